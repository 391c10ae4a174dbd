package runtime

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/project"
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

// TestWebSearchFromConfig: the websearch section configures the backend
// and its key joins the secrets; the section together with the backend or
// URL variable is refused naming both, while the key variable alone (which
// the section may reference) is allowed.
func TestWebSearchFromConfig(t *testing.T) {
	section := &config.WebSearch{Backend: "brave", URL: "http://127.0.0.1:9", APIKey: "k-cfg"}
	cases := []struct {
		name    string
		env     map[string]string
		backend any
		secret  string
		err     string
	}{
		{"section alone", nil, &tools.Brave{}, "k-cfg", ""},
		{"key variable beside it", map[string]string{EnvWebSearchKey: "k-env"}, &tools.Brave{}, "k-cfg", ""},
		{"backend variable too", map[string]string{EnvWebSearchBackend: "tavily", EnvWebSearchKey: "k-env"}, nil, "",
			"websearch is configured both by the websearch section of config.yaml and by SAIVAGE_WEBSEARCH_BACKEND or SAIVAGE_WEBSEARCH_URL; keep one"},
		{"URL variable too", map[string]string{EnvWebSearchURL: "http://127.0.0.1:8888"}, nil, "", "configured both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Project: &project.Project{Config: &config.Config{WebSearch: section}}}
			err := o.BackendsFromEnv(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "k-") {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, ok := o.WebSearch.(*tools.Brave)
			if !ok || b.BaseURL != section.URL || b.APIKey != "k-cfg" {
				t.Fatalf("backend = %#v", o.WebSearch)
			}
			if !reflect.DeepEqual(o.Secrets, []string{c.secret}) {
				t.Errorf("secrets = %q", o.Secrets)
			}
		})
	}
	// A section that bypassed config.Load is still checked.
	_, _, err := WebSearchBackend(&config.Config{WebSearch: &config.WebSearch{Backend: "tavily"}}, func(string) (string, bool) { return "", false }, nil)
	if err == nil || err.Error() != "config websearch: websearch backend tavily needs an API key" {
		t.Fatalf("err = %v", err)
	}
}
