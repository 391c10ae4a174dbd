package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPArgumentsValidatedPerDialect: dispatch validates arguments against
// the tool's whole input schema in the dialect it declares — 2020-12 when
// $schema is absent or 2020-12 (prefixItems, $defs), draft-07 only when
// declared (tuple items with additionalItems, definitions) — and refuses
// other dialects and references it would have to fetch.
func TestMCPArgumentsValidatedPerDialect(t *testing.T) {
	const (
		defaultDialect = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
		dialect2020    = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
			"properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},
			"count":{"$ref":"#/$defs/positive"}},"$defs":{"positive":{"type":"integer","minimum":1}}}`
		draft07 = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false},
			"count":{"$ref":"#/definitions/positive"}},"definitions":{"positive":{"type":"integer","minimum":1}}}`
	)
	tests := []struct {
		name, schema, args string
		want               string // error text; empty = accepted
	}{
		{"default dialect", defaultDialect, `{"n":1}`, ""},
		{"default dialect, no arguments", defaultDialect, ``, "do not match the tool's input schema"},
		{"default dialect, wrong type", defaultDialect, `{"n":"1"}`, "do not match the tool's input schema"},
		{"default dialect, extra property", defaultDialect, `{"n":1,"x":2}`, "do not match the tool's input schema"},
		{"2020-12 tuple", dialect2020, `{"pair":["a",1],"count":2}`, ""},
		{"2020-12 tuple, wrong member", dialect2020, `{"pair":["a","b"]}`, "do not match"},
		{"2020-12 tuple, extra member", dialect2020, `{"pair":["a",1,2]}`, "do not match"},
		{"2020-12 $defs", dialect2020, `{"count":0}`, "do not match"},
		{"draft-07 tuple", draft07, `{"pair":["a",1],"count":2}`, ""},
		{"draft-07 tuple, wrong member", draft07, `{"pair":["a","b"]}`, "do not match"},
		{"draft-07 additionalItems", draft07, `{"pair":["a",1,2]}`, "do not match"},
		{"draft-07 definitions", draft07, `{"count":0}`, "do not match"},
		{"draft-04 refused", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, `{}`,
			`dialect "http://json-schema.org/draft-04/schema#"; only 2020-12 and draft-07 are supported`},
		{"remote reference not fetched", `{"type":"object","properties":{"x":{"$ref":"http://127.0.0.1:1/x.json"}}}`, `{"x":1}`, "does not resolve"},
		{"arguments not JSON", defaultDialect, `{"n":`, "arguments are not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateArgs(json.RawMessage(tt.schema), json.RawMessage(tt.args))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
