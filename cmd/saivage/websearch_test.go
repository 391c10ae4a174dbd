package main

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

// searchKey is the websearch key of these tests; it must reach the search
// server's Authorization header and nothing else.
const searchKey = "ws-key-8f3a91c2d7"

// searxngStub is a loopback SearXNG-compatible JSON endpoint recording the
// requests it answered.
type searxngStub struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func newSearxngStub(t *testing.T) *searxngStub {
	s := &searxngStub{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Clone(r.Context()))
		s.mu.Unlock()
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+searchKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"results": []map[string]string{
			{"title": "Saivage workflows", "url": "https://docs.example/saivage", "content": "typed templates and action nodes"},
		}})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *searxngStub) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.seen...)
}

func websearchSection(url string) string {
	return "websearch:\n  backend: searxng\n  url: " + url + "\n  apiKey: ${WS_TEST_KEY}\n"
}

// TestWebsearchFromConfigFile: a websearch section in config.yaml (the key
// a ${WS_TEST_KEY} reference) makes a served project's Analyst search a
// loopback SearXNG-compatible server with the key in the Authorization
// header; show_config, /api/config, the logs and every file under .saivage
// show the key only masked.
func TestWebsearchFromConfigFile(t *testing.T) {
	search := newSearxngStub(t)
	p := startServed(t, "ws-token-abcdef", serveOptions{
		objective:  "Search the web.",
		vars:       map[string]string{"WS_TEST_KEY": searchKey},
		configEdit: func(s string) string { return s + websearchSection(search.URL) },
	})
	p.script.Add("analyst",
		rtt.Call("websearch", map[string]any{"query": "saivage workflows", "limit": 3}),
		rtt.Call("show_config", map[string]any{}),
		rtt.Text("Found the docs."),
	)
	var chat struct{ Result struct{ Text, Error string } }
	if code := p.do("POST", "/api/chat", `{"message":"Search for the Saivage docs.","wait":true}`, &chat); code != 200 || chat.Result.Text != "Found the docs." {
		t.Fatalf("chat = %d %+v", code, chat)
	}
	reqs := search.requests()
	if len(reqs) != 1 {
		t.Fatalf("search server saw %d requests", len(reqs))
	}
	if r := reqs[0]; r.Method != "GET" || r.URL.Query().Get("q") != "saivage workflows" || r.Header.Get("Authorization") != "Bearer "+searchKey ||
		strings.Contains(r.URL.String(), searchKey) {
		t.Fatalf("search request = %s %s, Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}

	var conv struct {
		Rows []struct {
			Kind, Name string
			Content    json.RawMessage
		}
	}
	p.get("/api/agents/agent:analyst:global/conversation", &conv)
	results := map[string]string{}
	for _, r := range conv.Rows {
		var c struct{ Content string }
		if r.Kind == "tool_result" && json.Unmarshal(r.Content, &c) == nil {
			results[r.Name] = c.Content
		}
	}
	if got := results["websearch"]; !strings.Contains(got, "https://docs.example/saivage") || !strings.Contains(got, "typed templates and action nodes") {
		t.Errorf("websearch result = %s", got)
	}
	var shown struct{ Websearch map[string]string }
	if err := json.Unmarshal([]byte(results["show_config"]), &shown); err != nil ||
		!reflect.DeepEqual(shown.Websearch, map[string]string{"apiKey": "[redacted]", "backend": "searxng", "url": search.URL}) {
		t.Errorf("show_config websearch = %v (%v)", shown.Websearch, err)
	}

	var cfg struct {
		Config struct {
			Websearch map[string]string `json:"websearch"`
		} `json:"config"`
	}
	if code := p.get("/api/config", &cfg); code != 200 || cfg.Config.Websearch["apiKey"] != "[redacted]" || cfg.Config.Websearch["backend"] != "searxng" {
		t.Errorf("/api/config = %d %+v", code, cfg)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("start exit = %d: %s", code, p.errb.String())
	}
	if strings.Contains(p.out.String()+p.errb.String(), searchKey) {
		t.Errorf("the key reached the server's output")
	}
	// Conversations, evidence, the app log, config.yaml: the key is nowhere.
	err := filepath.WalkDir(filepath.Join(p.dir, ".saivage"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), searchKey) {
			t.Errorf("%s contains the websearch key", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestValidateWebsearch: saivage validate reports a bad websearch section
// by field (without the secret), and a section set together with the
// backend variables.
func TestValidateWebsearch(t *testing.T) {
	tests := []struct {
		name, section string
		vars          map[string]string
		want          string // stderr text; empty = ok
	}{
		{"valid", websearchSection("http://127.0.0.1:8888"), nil, ""},
		{"brave with a referenced key", "websearch: {backend: brave, apiKey: \"${WS_TEST_KEY}\"}\n", nil, ""},
		{"unknown key", "websearch: {backend: brave, apiKey: \"${WS_TEST_KEY}\", token: x}\n", nil, "websearch.token: unknown key"},
		{"unknown backend", "websearch: {backend: bing, apiKey: \"${WS_TEST_KEY}\"}\n", nil, `websearch.backend: unknown websearch backend "bing" (allowed: brave, searxng, tavily)`},
		{"missing key", "websearch: {backend: tavily}\n", nil, "websearch.apiKey: websearch backend tavily needs an API key"},
		{"URL with credentials", "websearch: {backend: searxng, url: \"http://me:" + searchKey + "@127.0.0.1:8888\"}\n", nil, "websearch.url: websearch backend searxng: the URL is not an absolute http(s) URL without credentials, query or fragment"},
		{"URL with a query", "websearch: {backend: searxng, url: \"http://127.0.0.1:8888/?key=" + searchKey + "\"}\n", nil, "websearch.url:"},
		{"section and variables", websearchSection("http://127.0.0.1:8888"), map[string]string{"SAIVAGE_WEBSEARCH_URL": "http://127.0.0.1:9999"},
			"websearch is configured both by the websearch section of config.yaml and by SAIVAGE_WEBSEARCH_BACKEND or SAIVAGE_WEBSEARCH_URL"},
		{"variables alone", "", map[string]string{"SAIVAGE_WEBSEARCH_BACKEND": "brave"}, "SAIVAGE_WEBSEARCH_BACKEND/SAIVAGE_WEBSEARCH_URL/SAIVAGE_WEBSEARCH_KEY: websearch backend brave needs an API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			vars := map[string]string{"SAIVAGE_ROOT": dir, "WS_TEST_KEY": searchKey}
			if code, _, errs := runCLI(t, vars, "init"); code != 0 {
				t.Fatal(errs)
			}
			cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
			b, _ := os.ReadFile(cfgPath)
			if err := os.WriteFile(cfgPath, append(b, tt.section...), 0o644); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.vars {
				vars[k] = v
			}
			code, out, errs := runCLI(t, vars, "validate")
			if tt.want == "" {
				if code != 0 || !strings.HasPrefix(out, "ok: ") {
					t.Fatalf("validate = %d %q %q", code, out, errs)
				}
				return
			}
			if code != 1 || !strings.Contains(errs, tt.want) {
				t.Fatalf("validate = %d %q, want %q", code, errs, tt.want)
			}
			if strings.Contains(out+errs, searchKey) {
				t.Fatalf("validate shows the key: %q", errs)
			}
		})
	}
}
