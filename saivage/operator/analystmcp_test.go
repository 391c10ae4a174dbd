package operator_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/operator"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

const mcpToken = "external-analyst-token-0123456789"

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP connects the official go-sdk client to the external endpoint.
func connectMCP(t *testing.T, url, tok string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{tok}}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestExternalAnalystOverMCP drives a project through the external
// endpoint with the go-sdk client: list the Analyst's tools, create a card,
// write the objective record, start a Run, reopen the failed root; a wrong
// token is refused; a disconnect mid-call neither cancels nor repeats the
// call; external-only mode refuses POST /api/chat; receipts are body-free.
func TestExternalAnalystOverMCP(t *testing.T) {
	s := start(t, map[string]string{"SAIVAGE_ANALYST_MODE": "external", operator.EnvAnalystMCPToken: mcpToken})
	url := s.app.AnalystMCPURL
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, operator.AnalystMCPPath(s.dir)) || len(operator.AnalystMCPPath(s.dir)) != len("/mcp/")+16 {
		t.Fatalf("endpoint = %q", url)
	}

	// External-only: the internal Analyst refuses before anything is
	// appended; its (empty) history stays readable.
	if code, m := s.do("POST", "/api/chat", token, `{"message":"hello"}`); code != 409 || m["error"] != "InternalAnalystDisabled" {
		t.Fatalf("POST /api/chat in external mode = %d %v", code, m)
	}
	if code, _ := s.do("GET", "/api/agents/agent:analyst:global/conversation", token, ""); code != 200 {
		t.Errorf("analyst conversation = %d", code)
	}
	if s.script.Count("analyst") != 0 {
		t.Error("the internal Analyst called the provider")
	}

	// Wrong tokens are refused: a wrong value and the operator token.
	for _, bad := range []string{"wrong-token", token} {
		if _, err := connectMCP(t, url, bad); err == nil {
			t.Errorf("connect with %q succeeded", bad)
		}
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("unauthenticated POST = %d", resp.StatusCode)
	}

	cs, err := connectMCP(t, url, mcpToken)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	want := []string{}
	for _, sp := range s.app.Runtime.AnalystTools() {
		want = append(want, sp.Name)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) || !slices.Contains(names, "reopen_card") || slices.Contains(names, "emit_result") {
		t.Fatalf("tools = %v, want the Analyst's %v", names, want)
	}

	if text, isErr := callText(t, cs, "create_card", map[string]any{"parent_id": "project", "type": "goal", "title": "Docs",
		"records": map[string]string{"brief": "Write the docs."}}); isErr || !strings.Contains(text, "project.a") {
		t.Fatalf("create_card = %q %v", text, isErr)
	}
	if text, isErr := callText(t, cs, "write", map[string]any{"path": "record:project/objective", "content": "Ship the docs."}); isErr || !strings.Contains(text, "version 2") {
		t.Fatalf("write objective = %q %v", text, isErr)
	}
	s.script.Add("planner@project", runtimetest.Emit("failed", "not today", nil))
	if text, isErr := callText(t, cs, "start_project", map[string]any{}); isErr || !strings.Contains(text, `"ok": true`) {
		t.Fatalf("start_project = %q %v", text, isErr)
	}
	poll(t, "the Run to fail the root", func() bool {
		st := s.app.Runtime.Status()
		return st.Status == "stopped" && st.LastRun != nil
	})
	if text, isErr := callText(t, cs, "reopen_card", map[string]any{"card_id": "project"}); isErr || !strings.Contains(text, "reopened as changed: project") {
		t.Fatalf("reopen_card = %q %v", text, isErr)
	}
	// A refusal is a tool error, not a transport failure.
	if text, isErr := callText(t, cs, "reopen_card", map[string]any{"card_id": "project.zz"}); !isErr || text == "" {
		t.Errorf("reopen of a missing card = %q %v", text, isErr)
	}

	// Disconnect mid-call: the command finishes once and is not replayed.
	marker := filepath.Join(s.dir, "marker.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 1; echo once >> marker.txt"}})
	cancel()
	if err == nil {
		t.Fatal("the call outlived its client's deadline")
	}
	type receipt struct {
		Data map[string]any
	}
	var calls struct {
		Calls []receipt
		Total int
	}
	poll(t, "the run_command receipt", func() bool {
		s.get("/api/external-tool-calls", &calls)
		return len(calls.Calls) > 0 && calls.Calls[0].Data["tool"] == "run_command"
	})
	if b, _ := os.ReadFile(marker); string(b) != "once\n" {
		t.Errorf("marker = %q, want one line", b)
	}
	if calls.Calls[0].Data["ok"] != true || calls.Calls[0].Data["principal"] != "external:mcp" {
		t.Errorf("receipt = %v", calls.Calls[0].Data)
	}
	// Receipts are body-free: no arguments, no results.
	_, _, raw := s.raw("GET", "/api/external-tool-calls", token, "")
	for _, leak := range []string{"marker.txt", "Ship the docs", "Write the docs", "reopened"} {
		if strings.Contains(raw, leak) {
			t.Errorf("receipts contain %q: %s", leak, raw)
		}
	}
	var tools []string
	for _, c := range calls.Calls {
		tools = append(tools, c.Data["tool"].(string))
	}
	if got := strings.Join(tools, " "); got != "run_command reopen_card reopen_card start_project write create_card" {
		t.Errorf("receipts (newest first) = %s", got)
	}
	time.Sleep(1500 * time.Millisecond) // a replay would append a second line
	if b, _ := os.ReadFile(marker); string(b) != "once\n" {
		t.Errorf("marker after a while = %q", b)
	}
}
