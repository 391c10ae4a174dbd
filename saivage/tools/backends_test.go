package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/tools"
)

func TestWebsearch(t *testing.T) {
	var gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "bad request", 400)
			return
		}
		gotQuery, gotAuth = r.URL.Query().Get("q"), r.Header.Get("Authorization")
		if gotQuery == "boom" {
			http.Error(w, "engine down", 502)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"query":"x","results":[{"title":"Go","url":"https://go.dev/","content":"The Go language"},{"title":"no url"},{"title":"Tour","url":"https://go.dev/tour","content":"A tour"},{"title":"Spec","url":"https://go.dev/ref/spec"}]}`))
	}))
	defer srv.Close()

	f := newFixture(t, analyst())
	f.fails("websearch", map[string]any{"query": "golang"}, "websearch is unavailable: no search backend is configured (the operator sets the websearch section of config.yaml, or SAIVAGE_WEBSEARCH_URL")
	if res := f.call("websearch", map[string]any{"query": "golang"}); !strings.Contains(string(res.Data), `"unavailable":true`) {
		t.Errorf("unavailable data = %s", res.Data)
	}

	f.env.WebSearch = &tools.SearXNG{BaseURL: srv.URL + "/", APIKey: "search-key"}
	out := f.ok("websearch", map[string]any{"query": "golang generics", "limit": 2})
	var doc struct {
		Results []tools.SearchHit `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 2 || doc.Results[0].URL != "https://go.dev/" || doc.Results[1].URL != "https://go.dev/tour" || doc.Results[0].Snippet != "The Go language" {
		t.Errorf("results = %+v", doc.Results)
	}
	if gotQuery != "golang generics" || gotAuth != "Bearer search-key" {
		t.Errorf("request q=%q auth=%q", gotQuery, gotAuth)
	}
	f.fails("websearch", map[string]any{"query": "boom"}, "502")
}

func TestObservedCollections(t *testing.T) {
	var gotQuery map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/collections":
			w.Write([]byte(`{"collections":[{"name":"papers","description":"research papers","documents":42}]}`))
		case r.Method == "POST" && r.URL.Path == "/query":
			_ = json.NewDecoder(r.Body).Decode(&gotQuery)
			if gotQuery["collection"] != "papers" {
				http.Error(w, `{"error":"no such collection"}`, 404)
				return
			}
			w.Write([]byte(`{"results":[{"source":"a.pdf#p3","text":"attention is all you need","score":0.91},{"source":"b.pdf","text":"second","score":0.5}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	f := newFixture(t, analyst())
	f.fails("list_observed_collections", map[string]any{}, "list_observed_collections is unavailable: no retrieval engine is configured")
	f.fails("query_observed_collections", map[string]any{"collection": "papers", "query": "x"}, "query_observed_collections is unavailable")

	for _, bad := range []struct{ url, want string }{
		{"http://192.0.2.10:8080", "http://192.0.2.10:8080: the engine must listen on a loopback address"},
		{"http://user:sekrit@127.0.0.1:8080", "http://127.0.0.1:8080?[redacted]: want http://127.0.0.1:PORT, without credentials, query or fragment"},
		{"http://127.0.0.1:8080/?token=sekrit", "without credentials, query or fragment"},
		{"https://127.0.0.1:8080", "want http://127.0.0.1:PORT"},
	} {
		if _, err := tools.NewHTTPRetrieval(bad.url, nil); err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: err = %v, want %q without the secret", bad.url, err, bad.want)
		}
	}
	r, err := tools.NewHTTPRetrieval(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.env.Retrieval = r
	if out := f.ok("list_observed_collections", map[string]any{}); !strings.Contains(out, `"name": "papers"`) || !strings.Contains(out, `"documents": 42`) {
		t.Errorf("collections = %s", out)
	}
	out := f.ok("query_observed_collections", map[string]any{"collection": "papers", "query": "transformers", "limit": 1})
	if !strings.Contains(out, "attention is all you need") || strings.Contains(out, "second") {
		t.Errorf("query = %s", out)
	}
	if gotQuery["query"] != "transformers" || gotQuery["limit"] != float64(1) {
		t.Errorf("engine got %v", gotQuery)
	}
	f.fails("query_observed_collections", map[string]any{"collection": "nope", "query": "x"}, "no such collection")
}

func TestSkill(t *testing.T) {
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	// No index: an empty catalog.
	if out := f.ok("skill", map[string]any{}); !strings.Contains(out, `"skills": []`) {
		t.Errorf("empty catalog = %s", out)
	}
	f.writeFile(".saivage/skills/go-tests.md", "Run go test -race on the package.\n")
	f.writeFile(".saivage/skills/review.md", "Check the diff.\n")
	f.writeFile(".saivage/skills/index.json", `{"format_version":1,"skills":[
		{"name":"go-tests","description":"How to test Go code","file":"go-tests.md","agents":["executor","reviewer"]},
		{"name":"review","description":"Reviewing","file":"review.md","agents":["reviewer"]}]}`)
	out := f.ok("skill", map[string]any{})
	if !strings.Contains(out, "go-tests") || strings.Contains(out, `"review"`) {
		t.Errorf("executor's skills = %s", out)
	}
	if out := f.ok("skill", map[string]any{"name": "go-tests"}); out != "# Skill go-tests\n\nRun go test -race on the package.\n" {
		t.Errorf("load = %q", out)
	}
	f.fails("skill", map[string]any{"name": "review"}, `no skill "review" for agent executor`)

	f.writeFile(".saivage/skills/index.json", `{"format_version":1,"skills":[{"name":"x","description":"d","file":"../../etc/passwd","agents":["executor"]}]}`)
	f.fails("skill", map[string]any{}, "must be a relative path inside .saivage/skills")
	f.writeFile(".saivage/skills/index.json", `{"format_version":1,"skills":[{"name":"x","description":"d","file":"x.md","agents":["ghost"]}]}`)
	f.fails("skill", map[string]any{}, `agent "ghost" is not configured`)
	f.writeFile(".saivage/skills/index.json", `{"format_version":1,"skills":[],"extra":1}`)
	f.fails("skill", map[string]any{}, `unknown field "extra"`)

	// The Oversight agent has no skills: true.
	o := newFixture(t, tools.Caller{Agent: "oversight"})
	o.fails("skill", map[string]any{}, "does not have skills: true")
}

func TestNavigation(t *testing.T) {
	f := newFixture(t, analyst())
	f.writeFile("docs/guide.md", "hi")
	nav := func(args map[string]any) string {
		t.Helper()
		res := f.call("navigate_workspace", args)
		if res.IsError {
			t.Fatalf("navigate %v: %s", args, res.Content)
		}
		var d struct {
			Navigation tools.Navigation `json:"navigation"`
		}
		if err := json.Unmarshal(res.Data, &d); err != nil || res.Content != string(res.Data) {
			t.Fatalf("navigation %s / %s: %v", res.Content, res.Data, err)
		}
		return d.Navigation.Route
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"view": "card", "card_id": "project"}, "#/card/project"},
		{map[string]any{"view": "record", "card_id": "project", "record": "objective"}, "#/card/project/records?record=objective"},
		{map[string]any{"view": "files", "path": "docs/guide.md"}, "#/files?path=docs%2Fguide.md"},
		{map[string]any{"view": "system", "path": "errors"}, "#/system/errors"},
		{map[string]any{"view": "home"}, "#/"},
	} {
		if got := nav(c.args); got != c.want {
			t.Errorf("%v → %s, want %s", c.args, got, c.want)
		}
	}
	f.fails("navigate_workspace", map[string]any{"view": "card", "card_id": "nope"}, "nope")
	f.fails("navigate_workspace", map[string]any{"view": "record", "card_id": "project", "record": "ghost"}, `no record "ghost"`)
	f.fails("navigate_workspace", map[string]any{"view": "files", "path": ".saivage/cards"}, "inside .saivage")
	f.fails("navigate_workspace", map[string]any{"view": "files", "path": "missing.txt"}, "missing.txt")
	f.fails("navigate_workspace", map[string]any{"view": "system", "path": "secrets"}, "not one of")
	res := f.call("navigate_back", map[string]any{})
	if res.IsError || string(res.Data) != `{"navigation":{"intent":"back"}}` {
		t.Errorf("back = %s %s", res.Content, res.Data)
	}
}

type fakeEvidence struct{ events []project.Event }

func (e fakeEvidence) Events(context.Context, tools.EventFilter) ([]project.Event, error) {
	return e.events, nil
}
func (fakeEvidence) Sessions(context.Context) ([]tools.SessionInfo, error) { return nil, nil }
func (fakeEvidence) SessionRows(context.Context, string) ([]conversations.Row, error) {
	return nil, nil
}

func TestControlActionsAndRestart(t *testing.T) {
	f := newFixture(t, analyst())
	f.env.Evidence = fakeEvidence{events: []project.Event{
		{ID: "1", Type: "run_started"},
		{ID: "2", Type: "control_action", Data: map[string]any{"action": "pause_runtime", "author": "agent:analyst"}},
		{ID: "3", Type: "card_created"},
		{ID: "4", Type: "mcp_definition", Data: map[string]any{"action": "register", "server": "docs"}},
	}}
	out := f.ok("read_control_actions", map[string]any{})
	if !strings.Contains(out, `"total": 2`) || !strings.Contains(out, "pause_runtime") || !strings.Contains(out, `"register"`) || strings.Contains(out, "card_created") {
		t.Errorf("control actions = %s", out)
	}

	f.fails("restart_server", map[string]any{}, "restart_server is unavailable")
	var reason string
	f.env.RestartServer = func(_ context.Context, r string) error { reason = r; return nil }
	if out := f.ok("restart_server", map[string]any{"reason": "new config"}); !strings.Contains(out, `"restarting": true`) || reason != "new config" {
		t.Errorf("restart = %s, reason %q", out, reason)
	}
}

func TestQualityToolsUnavailableWithoutModules(t *testing.T) {
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	f.fails("code_quality_python_ruff", map[string]any{}, "code_quality_python_ruff is unavailable: no code-quality analyzers are configured")
}

func TestQualityToolRunsRuff(t *testing.T) {
	mods := os.Getenv("SAIVAGE_TEST_QUALITY_MODULES")
	if mods == "" {
		t.Skip("SAIVAGE_TEST_QUALITY_MODULES is not set (.ci/run installs the analyzers)")
	}
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	f.env.Quality = quality.Runner{NodeModules: mods}
	f.writeFile("src/app.py", "import sys\n")
	out := f.ok("code_quality_python_ruff", map[string]any{"paths": []string{"src"}})
	if !strings.Contains(out, `"rule": "F401"`) || !strings.Contains(out, `"path": "src/app.py"`) {
		t.Errorf("report = %s", out)
	}
	f.fails("code_quality_python_ruff", map[string]any{"paths": []string{".saivage/cards"}}, "inside .saivage")
	f.fails("code_quality_typescript_eslint", map[string]any{"paths": []string{"/etc"}}, "outside the project")
}

func TestViewImageTool(t *testing.T) {
	f := newFixture(t, tools.Caller{Agent: "reviewer", Card: "project"})
	src, err := os.ReadFile("../images/testdata/quad.webp")
	if err != nil {
		t.Fatal(err)
	}
	f.writeFile("shots/quad.webp", string(src))
	res := f.call("view_image", map[string]any{"path": "shots/quad.webp"})
	if res.IsError || len(res.Images) != 1 || res.Images[0].MIME != "image/png" || !strings.Contains(res.Content, `"source_format": "webp"`) || !strings.Contains(res.Content, `"source_path": "shots/quad.webp"`) {
		t.Fatalf("result = %+v", res)
	}
	f.writeFile("anim.gif", "GIF89a\x01\x00\x01\x00")
	f.fails("view_image", map[string]any{"path": "anim.gif"}, "not a PNG, JPEG or WebP image")
	f.fails("view_image", map[string]any{"path": "shots"}, "not a regular file")
	f.fails("view_image", map[string]any{"path": ".saivage/config.yaml"}, "inside .saivage")
	f.fails("view_image", map[string]any{"path": "missing.png"}, "missing.png")
}
