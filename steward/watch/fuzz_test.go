package watch

import (
	"encoding/json"
	"testing"
)

// FuzzCreateArgs: tool arguments come from the model and are untrusted;
// parsing and rule validation must refuse cleanly or yield valid rules.
func FuzzCreateArgs(f *testing.F) {
	f.Add([]byte(`{"source":"train","resourceRef":"vt1_x","instruction":"avvisami","rules":[{"id":"d","event":"train.departed","once":true}]}`))
	f.Add([]byte(`{"source":"time","afterMinutes":30,"instruction":"x","rules":[{"id":"t","trigger":{"kind":"before_time","field":"atMs","minutes":5}}]}`))
	f.Add([]byte(`{"source":"time","afterMinutes":5,"instruction":"x","rules":[{"id":"a","event":"time.reached","grants":[{"tool":"test__call"}]}]}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		req, err := parseCreate(json.RawMessage(args), "chat_1", true)
		if err != nil {
			return
		}
		if validateRules(req.Rules) != nil {
			return
		}
		seen := map[string]bool{}
		grants := 0
		for _, r := range req.Rules {
			if seen[r.ID] || (r.Event == "") == (r.Trigger == nil) {
				t.Fatalf("invalid rules accepted: %+v", req.Rules)
			}
			seen[r.ID] = true
			grants += len(r.Grants)
		}
		// With no capability registered, any grant is refused and rules
		// without grants pass.
		reg, err := NewRegistry()
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.validateGrants(req.Rules); (err != nil) != (grants > 0) {
			t.Fatalf("validateGrants with no capabilities = %v for %d grants", err, grants)
		}
	})
}
