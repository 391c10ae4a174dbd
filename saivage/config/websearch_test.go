package config_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
)

// wsKey is the websearch key the table's environment holds; it is all
// digits, so a plain ${WS_KEY} resolves as an integer scalar.
const wsKey = "12345678901234567890"

// TestWebSearchSection: the websearch section is decoded strictly,
// validated with the failing field named, and neither the key nor a URL's
// credentials appear in any error.
func TestWebSearchSection(t *testing.T) {
	vars := map[string]string{"WS_KEY": wsKey, "WS_EMPTY": ""}
	tests := []struct {
		name, section string
		wantPath      string // empty: accepted
		wantMsg       string
		want          config.WebSearch
	}{
		{"searxng", "websearch:\n  backend: searxng\n  url: http://127.0.0.1:8888\n", "", "",
			config.WebSearch{Backend: "searxng", URL: "http://127.0.0.1:8888"}},
		{"searxng with a key and a path", "websearch: {backend: searxng, url: \"https://search.example/searx/\", apiKey: \"${WS_KEY}\"}\n", "", "",
			config.WebSearch{Backend: "searxng", URL: "https://search.example/searx/", APIKey: wsKey}},
		{"brave, digits-only key from a plain reference", "websearch:\n  backend: brave\n  apiKey: ${WS_KEY}\n", "", "",
			config.WebSearch{Backend: "brave", APIKey: wsKey}},
		{"tavily at loopback", "websearch:\n  backend: tavily\n  url: http://127.0.0.1:9\n  apiKey: ${WS_KEY}\n", "", "",
			config.WebSearch{Backend: "tavily", URL: "http://127.0.0.1:9", APIKey: wsKey}},
		{"unknown key", "websearch:\n  backend: brave\n  apiKey: ${WS_KEY}\n  key: ${WS_KEY}\n", "websearch.key", "unknown key", config.WebSearch{}},
		{"unknown backend", "websearch:\n  backend: bing\n  apiKey: ${WS_KEY}\n", "websearch.backend", `unknown websearch backend "bing" (allowed: brave, searxng, tavily)`, config.WebSearch{}},
		{"backend is case-sensitive", "websearch:\n  backend: Brave\n  apiKey: ${WS_KEY}\n", "websearch.backend", "unknown websearch backend", config.WebSearch{}},
		{"backend required", "websearch:\n  url: http://127.0.0.1:8888\n", "websearch.backend", "required (brave, searxng, tavily)", config.WebSearch{}},
		{"brave without a key", "websearch:\n  backend: brave\n", "websearch.apiKey", "websearch backend brave needs an API key", config.WebSearch{}},
		{"tavily with an empty variable", "websearch:\n  backend: tavily\n  apiKey: ${WS_EMPTY}\n", "websearch.apiKey", "websearch backend tavily needs an API key", config.WebSearch{}},
		{"key variable not set", "websearch:\n  backend: brave\n  apiKey: ${WS_UNSET}\n", "websearch.apiKey", "environment variable WS_UNSET is not set", config.WebSearch{}},
		{"key of the wrong type", "websearch:\n  backend: brave\n  apiKey: [a]\n", "websearch.apiKey", "expected a string", config.WebSearch{}},
		{"searxng without a URL", "websearch:\n  backend: searxng\n", "websearch.url", "websearch backend searxng needs the instance URL", config.WebSearch{}},
		{"URL with credentials", "websearch:\n  backend: searxng\n  url: http://user:sekrit@127.0.0.1:8888\n", "websearch.url", "not an absolute http(s) URL without credentials, query or fragment", config.WebSearch{}},
		{"URL with a query", "websearch:\n  backend: brave\n  apiKey: ${WS_KEY}\n  url: \"https://api.example/?token=sekrit\"\n", "websearch.url", "without credentials, query or fragment", config.WebSearch{}},
		{"URL with an empty query", "websearch:\n  backend: searxng\n  url: \"http://127.0.0.1:8888/?\"\n", "websearch.url", "without credentials, query or fragment", config.WebSearch{}},
		{"URL with a fragment", "websearch:\n  backend: searxng\n  url: \"http://127.0.0.1:8888/#sekrit\"\n", "websearch.url", "without credentials, query or fragment", config.WebSearch{}},
		{"relative URL", "websearch:\n  backend: searxng\n  url: search.local/\n", "websearch.url", "not an absolute http(s) URL", config.WebSearch{}},
		{"other scheme", "websearch:\n  backend: searxng\n  url: ftp://127.0.0.1/\n", "websearch.url", "not an absolute http(s) URL", config.WebSearch{}},
		{"null section", "websearch:\n", "websearch", "value is null", config.WebSearch{}},
		{"scalar section", "websearch: searxng\n", "websearch", "expected a mapping", config.WebSearch{}},
	}
	base := classicYAML(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(config.LoadOptions{Path: writeConfig(t, base+tt.section), LookupEnv: env(vars), DefaultCardTypes: templates.ClassicCardTypes})
			if tt.wantPath == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.WebSearch == nil || *cfg.WebSearch != tt.want {
					t.Fatalf("websearch = %+v, want %+v", cfg.WebSearch, tt.want)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath || !strings.Contains(ce.Msg, tt.wantMsg) {
				t.Fatalf("err = %v, want %s: %s", err, tt.wantPath, tt.wantMsg)
			}
			if msg := err.Error(); strings.Contains(msg, wsKey) || strings.Contains(msg, "sekrit") {
				t.Fatalf("error reveals a secret: %s", msg)
			}
		})
	}
	// Without the section nothing is configured.
	cfg, err := config.Load(config.LoadOptions{Path: writeConfig(t, base), LookupEnv: env(vars), DefaultCardTypes: templates.ClassicCardTypes})
	if err != nil || cfg.WebSearch != nil {
		t.Fatalf("no section: %+v, %v", cfg.WebSearch, err)
	}
}

// TestRedactWebSearch: show_config's rendering masks the key and reduces
// the URL to scheme, host and path.
func TestRedactWebSearch(t *testing.T) {
	cfg := &config.Config{WebSearch: &config.WebSearch{Backend: "searxng", URL: "https://search.example/searx", APIKey: wsKey}}
	m, err := config.Redact(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m["websearch"])
	if got, want := string(b), `{"apiKey":"[redacted]","backend":"searxng","url":"https://search.example/searx"}`; got != want {
		t.Fatalf("websearch = %s, want %s", got, want)
	}
	// A URL that bypassed validation still loses its credentials and query.
	cfg.WebSearch.URL = "https://u:sekrit@search.example/?k=sekrit"
	m, _ = config.Redact(cfg)
	if b, _ := json.Marshal(m); strings.Contains(string(b), "sekrit") || strings.Contains(string(b), wsKey) {
		t.Fatalf("redacted = %s", b)
	}
	// Without a key the section shows no apiKey at all.
	m, _ = config.Redact(&config.Config{WebSearch: &config.WebSearch{Backend: "searxng", URL: "http://127.0.0.1:8888"}})
	if _, ok := m["websearch"].(map[string]any)["apiKey"]; ok {
		t.Fatalf("apiKey shown without a key: %v", m["websearch"])
	}
}
