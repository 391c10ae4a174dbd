package tools_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

func TestWebfetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<html><head><script>var x=1;</script><style>p{}</style></head><body><h1>Title</h1><p>Hello &amp; welcome</p></body></html>"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/page?token=abc", http.StatusFound) })
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 404) })
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG"))
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("x", tools.WebfetchMaxBytes+10)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := newFixture(t, analyst())
	out := f.ok("webfetch", map[string]any{"url": srv.URL + "/redirect"})
	if !strings.Contains(out, "Title") || !strings.Contains(out, "Hello & welcome") || strings.Contains(out, "var x") {
		t.Errorf("page = %q", out)
	}
	if strings.Contains(out, "token=abc") || !strings.Contains(out, "/page?[redacted]") {
		t.Errorf("final URL not redacted: %q", out)
	}
	userURL := strings.Replace(srv.URL, "http://", "http://alice:pw@", 1) + "/missing?key=secret#frag"
	res := f.call("webfetch", map[string]any{"url": userURL})
	if !res.IsError || !strings.Contains(res.Content, "HTTP 404") || strings.Contains(res.Content, "alice") || strings.Contains(res.Content, "secret") || strings.Contains(res.Content, "frag") {
		t.Errorf("404 = %q", res.Content)
	}
	f.fails("webfetch", map[string]any{"url": srv.URL + "/image"}, "is not text")
	f.fails("webfetch", map[string]any{"url": srv.URL + "/huge"}, "larger than")
	f.fails("webfetch", map[string]any{"url": "file:///etc/passwd"}, "not an absolute http(s) URL")
}

func TestCardToolsScope(t *testing.T) {
	ctx := context.Background()
	// The Analyst creates cards anywhere (not under a running parent).
	a := newFixture(t, analyst())
	out := a.ok("create_card", map[string]any{"parent_id": "project", "title": "Goal", "records": map[string]string{"brief": "Do it."}})
	if !strings.Contains(out, `"id": "project.a"`) || !strings.Contains(out, `"latest_version": 1`) {
		t.Errorf("create = %s", out)
	}
	a.ok("create_card", map[string]any{"parent_id": "project.a", "title": "Task", "records": map[string]string{"brief": "x"}})
	if _, err := a.p.Cards.Activate(ctx, "project"); err != nil {
		t.Fatal(err)
	}
	a.fails("create_card", map[string]any{"parent_id": "project", "title": "Another"}, "project is running")
	a.rt.intervene = errString("the runtime is running; card maintenance needs it stopped or paused")
	a.fails("reorder_child", map[string]any{"card_id": "project.a", "position": 0}, "needs it stopped or paused")
	a.fails("start_project", map[string]any{"x": 1}, "invalid arguments")
	if out := a.ok("start_project", map[string]any{}); !strings.Contains(out, `"status": "running"`) || a.rt.started != 1 {
		t.Errorf("start = %s", out)
	}
	if out := a.ok("get_tree", map[string]any{}); !strings.Contains(out, "  project.a [goal] backlog — Goal\n    project.a.a [task] backlog — Task") {
		t.Errorf("tree = %q", out)
	}

	// A Planner manages only its direct children; activation needs a runtime.
	p := newFixture(t, tools.Caller{Agent: "planner", Card: "project", Node: "plan", Tools: []string{"create_card"}})
	p.p = a.p
	p.env.Cards, p.env.Workflows = a.p.Cards, a.p.Workflows
	p.fails("edit_card", map[string]any{"card_id": "project.a.a", "title": "x"}, "not a child of project")
	p.fails("create_card", map[string]any{"parent_id": "project.a", "title": "x"}, "children of its own card project only")
	if out := p.ok("edit_card", map[string]any{"card_id": "project.a", "title": "Renamed goal"}); !strings.Contains(out, "version") {
		t.Errorf("edit = %s", out)
	}
	p.fails("activate_card", map[string]any{"card_id": "project.a"}, "inside a card's Planner")
	if out := p.ok("list_cards", map[string]any{}); !strings.Contains(out, "Renamed goal") {
		t.Errorf("list = %s", out)
	}
	c, _ := a.p.Cards.Get(ctx, "project.a")
	if c.Title != "Renamed goal" || c.Status != cards.Backlog {
		t.Errorf("card = %+v", c)
	}
	// Versions and diffs.
	if out := p.ok("diff_card_versions", map[string]any{"card_id": "project.a", "from": 1, "to": 3}); !strings.Contains(out, `+  "title": "Renamed goal"`) {
		t.Errorf("diff = %s", out)
	}
	if out := p.ok("list_card_versions", map[string]any{"card_id": "project.a", "record": "brief"}); !strings.Contains(out, "record:project.a/brief@1") {
		t.Errorf("record versions = %s", out)
	}
	if out := p.ok("read_record_version", map[string]any{"card_id": "project.a", "record": "brief", "version": 1}); !strings.Contains(out, "Do it.") {
		t.Errorf("record version = %s", out)
	}
	// Notifications go to a card type's recipient.
	a.rt.intervene = nil
	if out := a.ok("queue_notification", map[string]any{"card_id": "project", "message": "hello"}); !strings.Contains(out, "plan node") {
		t.Errorf("queue = %s", out)
	}
	a.fails("queue_notification", map[string]any{"card_id": "project.a.a", "message": "hi"}, "no notification recipient")
}

func TestShowConfigRedacts(t *testing.T) {
	f := newFixture(t, analyst())
	prov := f.env.Config.Providers["gateway"]
	prov.APIKey = "sk-config-secret-0123456789abcdef"
	f.env.Config.Providers["gateway"] = prov
	out := f.ok("show_config", map[string]any{})
	if strings.Contains(out, "sk-config-secret") || strings.Contains(out, "127.0.0.1:4000") || !strings.Contains(out, `"apiKey": "[redacted]"`) {
		t.Errorf("show_config = %s", out)
	}
}

func TestRedactor(t *testing.T) {
	r := tools.NewRedactor([]string{"hunter2-long-secret", "short"})
	in := "pw hunter2-long-secret and short; Authorization: Bearer abcdefghijklmnop; key sk-ABCDEFGHIJKLMNOPQRST12"
	out := r(in)
	for _, leak := range []string{"hunter2", "abcdefghijklmnop", "sk-ABCD"} {
		if strings.Contains(out, leak) {
			t.Errorf("redacted = %q leaks %q", out, leak)
		}
	}
	if !strings.Contains(out, "short") || !strings.Contains(out, "Bearer [redacted]") {
		t.Errorf("redacted = %q", out)
	}
}

// TestCatalogueNamesAreConfigurable: every implemented tool is a name the
// workflow compiler accepts in an agent's tools list.
func TestCatalogueNamesAreConfigurable(t *testing.T) {
	names := tools.Names()
	if len(names) < 30 {
		t.Fatalf("only %d tools: %v", len(names), names)
	}
	for _, n := range names {
		if !slices.Contains(workflow.KnownTools(), n) {
			t.Errorf("tool %s cannot be configured", n)
		}
	}
}

// TestRedactorPatternsBehindMarkers: each credential family is still masked
// with its literal marker in any position and case the pattern allows, and
// text without any marker comes back unchanged.
func TestRedactorPatternsBehindMarkers(t *testing.T) {
	r := tools.NewRedactor(nil)
	for _, tc := range []struct{ in, want string }{
		{"auth: BEARER abcdefghijklmnop", "auth: BEARER [redacted]"},
		{"auth: bEaReR abcdefghijklmnop", "auth: bEaReR [redacted]"},
		{"b bear bearer abcdefghijklmnop", "b bear bearer [redacted]"},
		{"token ghs_ABCDEFGHIJKLMNOPQRSTUVWX end", "token [redacted] end"},
		{"id AKIAABCDEFGHIJKLMNOP.", "id [redacted]."},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[redacted]"},
		{"sk-short and a bear", "sk-short and a bear"},
		{"nothing secret here: ghost_ship AKIB", "nothing secret here: ghost_ship AKIB"},
	} {
		if got := r(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
