package tools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/saivage/tools"
)

const searchKey = "sk-test-4f9c1e"

// Response bodies shaped like the providers' recorded answers (fields the
// tool ignores included).
const (
	braveAnswer = `{"type":"search","query":{"original":"golang generics","more_results_available":true},
"web":{"type":"search","family_friendly":true,"results":[
{"title":"Go generics tutorial","url":"https://go.dev/doc/tutorial/generics","is_source_local":false,"description":"Get started with <strong>generics</strong>.","profile":{"name":"Go"},"language":"en"},
{"title":"no url","description":"dropped"},
{"title":"Type parameters proposal","url":"https://go.googlesource.com/proposal/+/HEAD/design/43651-type-parameters.md","description":"The design."},
{"title":"Third","url":"https://example.org/3","description":"cut by the limit"}]},
"mixed":{"type":"mixed","main":[]}}`
	tavilyAnswer = `{"query":"golang generics","follow_up_questions":null,"answer":null,"images":[],"results":[
{"title":"Go generics tutorial","url":"https://go.dev/doc/tutorial/generics","content":"Get started with generics.","score":0.93,"raw_content":null},
{"title":"no url","content":"dropped","score":0.5},
{"title":"Type parameters proposal","url":"https://go.googlesource.com/proposal/+/HEAD/design/43651-type-parameters.md","content":"The design.","score":0.81,"raw_content":null},
{"title":"Third","url":"https://example.org/3","content":"cut by the limit","score":0.2}],"response_time":1.07}`
	searxngAnswer = `{"query":"golang generics","number_of_results":0,"results":[
{"title":"Go generics tutorial","url":"https://go.dev/doc/tutorial/generics","content":"Get started with generics.","engine":"duckduckgo"},
{"title":"no url","content":"dropped"},
{"title":"Type parameters proposal","url":"https://go.googlesource.com/proposal/+/HEAD/design/43651-type-parameters.md","content":"The design.","engine":"google"},
{"title":"Third","url":"https://example.org/3","content":"cut by the limit"}],"answers":[],"suggestions":[]}`
)

// searchServer is a loopback provider: it checks each request's exact shape
// with check (which returns the query it carried and what is wrong, if
// anything), then answers by the query: "unauthorized", "limited",
// "garbage", "huge", "down" or, otherwise, ok.
func searchServer(t *testing.T, ok string, check func(r *http.Request) (query string, problem string)) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, problem := check(r)
		if problem != "" {
			mu.Lock()
			t.Errorf("request %s %s: %s", r.Method, r.URL, problem)
			mu.Unlock()
			http.Error(w, problem, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch q {
		case "unauthorized":
			// Providers echo the offending token; it must not reach the model.
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid token `+searchKey+`"}`)
		case "limited":
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":"rate limited"}`)
		case "garbage":
			io.WriteString(w, `{"results":[{"title":"cut`)
		case "huge":
			io.WriteString(w, `{"results":[],"pad":"`+strings.Repeat("x", 5<<20)+`"}`)
		case "down":
			w.WriteHeader(http.StatusBadGateway)
		default:
			io.WriteString(w, ok)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWebsearchBackends(t *testing.T) {
	cases := []struct {
		backend string
		answer  string
		check   func(r *http.Request) (string, string)
	}{
		{tools.SearchBackendBrave, braveAnswer, func(r *http.Request) (string, string) {
			q := r.URL.Query()
			switch {
			case r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search":
				return "", "want GET /res/v1/web/search"
			case len(q) != 2 || q.Get("count") != "2" || q.Get("q") == "":
				return "", "want exactly q and count=2"
			case r.Header.Get("X-Subscription-Token") != searchKey || r.Header.Get("Authorization") != "":
				return "", "want the key in X-Subscription-Token only"
			}
			return q.Get("q"), ""
		}},
		{tools.SearchBackendTavily, tavilyAnswer, func(r *http.Request) (string, string) {
			var body map[string]any
			if r.Method != http.MethodPost || r.URL.Path != "/search" || r.URL.RawQuery != "" {
				return "", "want POST /search without a query string"
			}
			if r.Header.Get("Authorization") != "Bearer "+searchKey || r.Header.Get("Content-Type") != "application/json" {
				return "", "want a bearer key and a JSON body"
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body) != 2 || body["max_results"] != 2.0 {
				return "", "want exactly {query, max_results: 2}"
			}
			q, _ := body["query"].(string)
			return q, ""
		}},
		{tools.SearchBackendSearXNG, searxngAnswer, func(r *http.Request) (string, string) {
			q := r.URL.Query()
			if r.Method != http.MethodGet || r.URL.Path != "/search" || q.Get("format") != "json" || r.Header.Get("Authorization") != "Bearer "+searchKey {
				return "", "want GET /search?format=json with a bearer key"
			}
			return q.Get("q"), ""
		}},
	}
	want := []tools.SearchHit{
		{Title: "Go generics tutorial", URL: "https://go.dev/doc/tutorial/generics"},
		{Title: "Type parameters proposal", URL: "https://go.googlesource.com/proposal/+/HEAD/design/43651-type-parameters.md", Snippet: "The design."},
	}
	for _, c := range cases {
		t.Run(c.backend, func(t *testing.T) {
			srv := searchServer(t, c.answer, c.check)
			ws, err := tools.NewWebSearcher(tools.WebSearchOptions{Backend: c.backend, BaseURL: srv.URL + "/", APIKey: searchKey})
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, analyst())
			f.env.WebSearch = ws
			f.env.Redact = nil // the key must stay out by construction, not by redaction

			out := f.ok("websearch", map[string]any{"query": "golang generics", "limit": 2})
			var doc struct {
				Query   string            `json:"query"`
				Results []tools.SearchHit `json:"results"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			exp := append([]tools.SearchHit(nil), want...)
			if c.backend == tools.SearchBackendBrave {
				exp[0].Snippet = "Get started with <strong>generics</strong>."
			} else {
				exp[0].Snippet = "Get started with generics."
			}
			if doc.Query != "golang generics" || !reflect.DeepEqual(doc.Results, exp) {
				t.Errorf("result = %s", out)
			}

			for q, msg := range map[string]string{
				"unauthorized": "search backend refused the configured API key (401 Unauthorized)",
				"limited":      "search backend rate limit reached (429 Too Many Requests); retry after 30 s",
				"garbage":      "search backend returned malformed JSON",
				"huge":         "search response exceeds 4194304 bytes",
				"down":         "search backend answered 502 Bad Gateway",
			} {
				res := f.call("websearch", map[string]any{"query": q, "limit": 2})
				if !res.IsError || !strings.Contains(res.Content, msg) || len(res.Content) > 300 {
					t.Errorf("%s: %q, want a short error with %q", q, res.Content, msg)
				}
				if strings.Contains(res.Content, searchKey) || strings.Contains(string(res.Data), searchKey) {
					t.Errorf("%s: the key reached the tool result: %q", q, res.Content)
				}
			}
		})
	}
}

func TestWebsearchConfiguration(t *testing.T) {
	cases := []struct {
		name string
		opts tools.WebSearchOptions
		want string // error text; empty = accepted
	}{
		{"unknown backend", tools.WebSearchOptions{Backend: "bing", APIKey: searchKey}, `unknown websearch backend "bing" (allowed: brave, searxng, tavily)`},
		{"brave without key", tools.WebSearchOptions{Backend: "brave"}, "websearch backend brave needs an API key"},
		{"tavily without key", tools.WebSearchOptions{Backend: "tavily", BaseURL: "http://127.0.0.1:1"}, "websearch backend tavily needs an API key"},
		{"searxng without URL", tools.WebSearchOptions{}, "websearch backend searxng needs the instance URL"},
		{"relative URL", tools.WebSearchOptions{Backend: "searxng", BaseURL: "search.local/"}, "is not an absolute http(s) URL"},
		{"credentials in URL", tools.WebSearchOptions{Backend: "brave", BaseURL: "https://u:p@api.example/", APIKey: searchKey}, "is not an absolute http(s) URL"},
		{"brave default endpoint", tools.WebSearchOptions{Backend: "brave", APIKey: searchKey}, ""},
		{"searxng default backend", tools.WebSearchOptions{BaseURL: "http://127.0.0.1:8888"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, err := tools.NewWebSearcher(c.opts)
			if c.want == "" {
				if err != nil || ws == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), searchKey) || strings.Contains(err.Error(), "u:p") {
				t.Fatalf("err = %v, want %q without the key or the URL's credentials", err, c.want)
			}
		})
	}
	if b, _ := tools.NewWebSearcher(tools.WebSearchOptions{Backend: "brave", APIKey: searchKey}); b.(*tools.Brave).BaseURL != tools.DefaultBraveURL {
		t.Errorf("brave endpoint = %q", b.(*tools.Brave).BaseURL)
	}
	if b, _ := tools.NewWebSearcher(tools.WebSearchOptions{Backend: "tavily", APIKey: searchKey}); b.(*tools.Tavily).BaseURL != tools.DefaultTavilyURL {
		t.Errorf("tavily endpoint = %q", b.(*tools.Tavily).BaseURL)
	}
}
