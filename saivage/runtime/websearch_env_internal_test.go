package runtime

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/tools"
)

// TestWebSearchFromEnv: the SAIVAGE_WEBSEARCH_* variables select the
// backend, its key joins the redacted secrets, and bad values are refused
// with the allowed names.
func TestWebSearchFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		backend any    // the WebSearcher's type; nil = none configured
		err     string // the refusal; empty = accepted
	}{
		{"nothing", map[string]string{EnvWebSearchKey: "k-1"}, nil, ""},
		{"searxng by URL", map[string]string{EnvWebSearchURL: "http://127.0.0.1:8888"}, &tools.SearXNG{}, ""},
		{"brave", map[string]string{EnvWebSearchBackend: "brave", EnvWebSearchKey: "k-1"}, &tools.Brave{}, ""},
		{"tavily at loopback", map[string]string{EnvWebSearchBackend: "tavily", EnvWebSearchKey: "k-1", EnvWebSearchURL: "http://127.0.0.1:9"}, &tools.Tavily{}, ""},
		{"unknown", map[string]string{EnvWebSearchBackend: "Brave", EnvWebSearchKey: "k-1"}, nil, `SAIVAGE_WEBSEARCH_BACKEND/SAIVAGE_WEBSEARCH_URL/SAIVAGE_WEBSEARCH_KEY: unknown websearch backend "Brave" (allowed: brave, searxng, tavily)`},
		{"tavily without key", map[string]string{EnvWebSearchBackend: "tavily"}, nil, "websearch backend tavily needs an API key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o Options
			err := o.BackendsFromEnv(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "k-1") {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.backend == nil {
				if o.WebSearch != nil {
					t.Fatalf("configured %T", o.WebSearch)
				}
				return
			}
			if reflect.TypeOf(o.WebSearch) != reflect.TypeOf(c.backend) {
				t.Fatalf("backend = %T, want %T", o.WebSearch, c.backend)
			}
			if k := c.env[EnvWebSearchKey]; k != "" && !reflect.DeepEqual(o.Secrets, []string{k}) {
				t.Errorf("secrets = %q", o.Secrets)
			}
		})
	}
}
