package gateway

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSplitObject(t *testing.T) {
	tests := []struct {
		name string
		body string
		want map[string]string // nil: refused
	}{
		{"empty object", `{}`, map[string]string{}},
		{"spaced", " \n{ \"a\" : 1 ,\t\"b\":[1, {\"c\":\"}\"}] }\r\n", map[string]string{"a": "1", "b": `[1, {"c":"}"}]`}},
		{"strings with escapes", `{"k\"ey":"va\\\"l}","x":"\u00e9"}`, map[string]string{`k"ey`: `"va\\\"l}"`, "x": `"\u00e9"`}},
		{"literals", `{"t":true,"f":false,"n":null,"num":-1.5e3}`, map[string]string{"t": "true", "f": "false", "n": "null", "num": "-1.5e3"}},
		{"repeated key keeps the last", `{"a":1,"a":2}`, map[string]string{"a": "2"}},
		{"array", `[1]`, nil},
		{"null", `null`, nil},
		{"truncated", `{"a":1`, nil},
		{"trailing garbage", `{"a":1} x`, nil},
		{"empty", ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splitObject([]byte(tt.body))
			if tt.want == nil {
				if err == nil {
					t.Fatalf("accepted %q: %v", tt.body, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused %q: %v", tt.body, err)
			}
			gotS := map[string]string{}
			for k, v := range got {
				gotS[k] = string(v)
			}
			if !maps.Equal(gotS, tt.want) {
				t.Fatalf("got %q, want %q", gotS, tt.want)
			}
		})
	}
}

func TestJoinObject(t *testing.T) {
	fields := map[string]json.RawMessage{"model": json.RawMessage(`"m"`), "a<b": json.RawMessage(`[1, 2]`), "stream": json.RawMessage("true")}
	got := string(joinObject(fields))
	want := `{"a\u003cb":[1, 2],"model":"m","stream":true}`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// FuzzSplitObject checks splitObject against decoding into a map of
// json.RawMessage: the same verdict, and the same values up to whitespace.
func FuzzSplitObject(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "requests", "*.json"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"a":{"b":["}",{"c":"\\"}]}, "d" : 1 }`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(body, &want)
		got, err := splitObject(body)
		if (err != nil) != (wantErr != nil || want == nil) {
			t.Fatalf("splitObject(%q) error %v, json.Unmarshal error %v", body, err, wantErr)
		}
		if err != nil {
			return
		}
		norm := func(m map[string]json.RawMessage) map[string]any {
			out := map[string]any{}
			for k, v := range m {
				var x any
				if err := json.Unmarshal(v, &x); err != nil {
					t.Fatalf("value of %q is not JSON: %q", k, v)
				}
				out[k] = x
			}
			return out
		}
		if !reflect.DeepEqual(norm(got), norm(want)) {
			t.Fatalf("splitObject(%q) = %q, want %q", body, got, want)
		}
		// What joinObject writes decodes to the same object.
		var back map[string]json.RawMessage
		if err := json.Unmarshal(joinObject(got), &back); err != nil || !reflect.DeepEqual(norm(back), norm(want)) {
			t.Fatalf("joinObject(%q) does not round-trip: %v", got, err)
		}
	})
}
