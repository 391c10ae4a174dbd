package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyAndHealthWarning(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		model   string
		ready   bool
		missing []string
	}{
		{"default config without DeepSeek key", nil, "tier-5", false, []string{"DEEPSEEK_API_KEY"}},
		{"default config with the key", map[string]string{"DEEPSEEK_API_KEY": "sk-x"}, "tier-5", true, nil},
		{"keyless local tier", nil, "tier-1", true, nil},
		{"unknown name", nil, "tier-9", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(Options{Config: DefaultConfig(), LookupEnv: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(NewSwitch(g).Handler())
			defer srv.Close()
			res, err := http.Get(srv.URL + "/health?model=" + tc.model)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Warning string    `json:"warning"`
				Ready   Readiness `json:"ready"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Ready.Ready != tc.ready || (body.Warning == "") != tc.ready {
				t.Errorf("ready=%v warning=%q, want ready=%v", body.Ready.Ready, body.Warning, tc.ready)
			}
			if len(tc.missing) > 0 && (len(body.Ready.MissingKeys) != 1 || body.Ready.MissingKeys[0] != tc.missing[0]) {
				t.Errorf("missing keys %v, want %v", body.Ready.MissingKeys, tc.missing)
			}
		})
	}
}
