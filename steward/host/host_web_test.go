package host_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/usage"
	"github.com/agentstack/agentstack/steward/web"
)

func TestPairAnswersOnlyTheLocalPage(t *testing.T) {
	const tok = "pair-token-0123456789abcdef"
	h := host.New(host.Options{Token: tok})
	tests := []struct {
		name    string
		remote  string
		host    string
		headers map[string]string
		want    int
	}{
		{"local page fetch", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, 200},
		{"localhost name", "[::1]:50000", "localhost:4317", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"origin without fetch metadata", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Origin": "http://127.0.0.1:4317"}, 200},
		{"phone over the tailnet", "100.101.102.103:50000", "mac.tailnet.ts.net:4318", map[string]string{"Sec-Fetch-Site": "same-origin"}, 403},
		{"another site", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"another site with its origin", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403},
		{"DNS rebinding", "127.0.0.1:50000", "evil.example:4317", map[string]string{"Sec-Fetch-Site": "same-origin"}, 403},
		{"through a local proxy", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "same-origin", "X-Forwarded-For": "100.64.0.9"}, 403},
		{"typed into the address bar", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, 403},
		{"same-origin navigation", "127.0.0.1:50000", "127.0.0.1:4317", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"}, 403},
		{"curl without browser headers", "127.0.0.1:50000", "127.0.0.1:4317", nil, 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://"+tc.host+"/pair", nil)
			req.RemoteAddr = tc.remote
			req.Host = tc.host
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.Handler().ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, body)
			}
			if got := rec.Header().Get("Cache-Control"); rec.Code == 200 && got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			if leaked := strings.Contains(body, tok); leaked != (tc.want == 200) {
				t.Errorf("token in body = %v for status %d: %s", leaked, rec.Code, body)
			}
		})
	}
}

func TestWebAppMountedWithoutToken(t *testing.T) {
	h := host.New(host.Options{Token: "web-token-0123456789abcdef", Web: web.Handler(), Usage: openUsage(t)})
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path string
		want int
		has  string
	}{
		{"/", 200, `type="module"`},
		{"/sw.js", 200, "caches"},
		{"/manifest.webmanifest", 200, `"start_url"`},
		{"/usage", 401, "token"},         // data routes keep their token
		{"/system/status", 401, "token"}, // and so does the new status route
		{"/health", 200, `"ok":true`},
		{"/nope", 404, "not found"},
	} {
		res, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want || !strings.Contains(string(b), tc.has) {
			t.Errorf("GET %s = %d %.80q; want %d containing %q", tc.path, res.StatusCode, b, tc.want, tc.has)
		}
	}
}

func openUsage(t *testing.T) *usage.Store {
	t.Helper()
	u, err := usage.Open(context.Background(), filepath.Join(t.TempDir(), "usage.db"), usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

func TestSystemStatus(t *testing.T) {
	ctx := context.Background()
	const tok = "system-token-0123456789abcdef"
	store, err := chats.Open(ctx, filepath.Join(t.TempDir(), "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ledger := openUsage(t)
	pol, err := policy.New(policy.Options{User: policy.Rules{DenyPrefixes: []string{"mcp__danger__"}}, Connectors: []string{"mail", "calendar"},
		Hints: policy.StaticHints{"mcp__mail__search_mail": true}}) // as the mail connector annotates it
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string) agent.Tool {
		return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
			return agent.ToolResult{}, nil
		}}
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i, c := range []usage.ToolCall{
		{Tool: "mcp__mail__search_mail", OK: true},
		{Tool: "mcp__mail__search_mail", OK: false, Error: "mirror locked"},
		{Tool: "mcp__mail__search_mail", OK: true},
		{Tool: "mcp__mail__send_email", OK: false, Error: "Mail.app did not answer"},
	} {
		c.Time, c.Service, c.Action, c.Duration = t0.Add(time.Duration(i)*time.Minute), "host", "chat", 10*time.Millisecond
		ledger.RecordTool(ctx, c)
	}
	if err := ledger.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true}`)) }))
	defer gateway.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	h := host.New(host.Options{Token: tok, Version: "v-test", Usage: ledger,
		Chats: host.ManagerOptions{Store: store, Policy: pol, Tools: func() []agent.Tool {
			return []agent.Tool{tool("mcp__mail__search_mail"), tool("mcp__mail__send_email"), tool("mcp__danger__wipe")}
		}},
		System: func(ctx context.Context) host.SystemInfo {
			return host.SystemInfo{
				Services: []host.ServiceStatus{
					host.ProbeHTTP(ctx, nil, "gateway", gateway.URL+"/health"),
					host.ProbeHTTP(ctx, nil, "mcp:calendar", deadURL+"/health"),
				},
				// The calendar connector is down; its manifest keeps its tool listed.
				Tools: []host.ToolInfo{{Name: "mcp__calendar__create_event", Source: "calendar"}},
			}
		}})
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/system/status", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	var st host.SystemStatus
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Host.State != host.StateOK || !strings.Contains(st.Host.Detail, "v-test") {
		t.Errorf("host = %+v", st.Host)
	}
	states := map[string]string{}
	for _, s := range st.Services {
		states[s.Name] = s.State
	}
	if states["gateway"] != host.StateOK || states["mcp:calendar"] != host.StateError {
		t.Errorf("services = %+v; want gateway ok and calendar error", st.Services)
	}
	tools := map[string]host.ToolStatus{}
	var names []string
	for _, ts := range st.Tools {
		tools[ts.Name] = ts
		names = append(names, ts.Name)
	}
	want := []string{"ask_user", "mcp__calendar__create_event", "mcp__danger__wipe", "mcp__mail__search_mail", "mcp__mail__send_email"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("tools = %v, want %v (sorted)", names, want)
	}
	checks := []struct {
		name, source, decision string
		calls, errors          int
		lastOK                 bool
		lastErr                string
	}{
		{"mcp__mail__search_mail", "mail", "allow", 3, 1, true, ""},
		{"mcp__mail__send_email", "mail", "gate", 1, 1, false, "Mail.app did not answer"},
		{"mcp__danger__wipe", "danger", "deny", 0, 0, false, ""},
		{"mcp__calendar__create_event", "calendar", "gate", 0, 0, false, ""},
		{"ask_user", "host", "allow", 0, 0, false, ""},
	}
	for _, c := range checks {
		got := tools[c.name]
		if got.Source != c.source || got.Decision != c.decision || got.Calls != c.calls || got.Errors != c.errors ||
			got.LastOK != c.lastOK || got.LastError != c.lastErr {
			t.Errorf("%s = %+v; want source %s decision %s calls %d errors %d lastOk %v lastError %q",
				c.name, got, c.source, c.decision, c.calls, c.errors, c.lastOK, c.lastErr)
		}
		if (got.Calls > 0) != (got.LastAt != nil) {
			t.Errorf("%s: lastAt %v with %d calls", c.name, got.LastAt, got.Calls)
		}
	}
	if last := tools["mcp__mail__search_mail"].LastAt; last == nil || !last.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("search_mail last call at %v, want %v", last, t0.Add(2*time.Minute))
	}
}
