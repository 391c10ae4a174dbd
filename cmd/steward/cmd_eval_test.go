package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/eval"
)

// TestEvalCatalogAndRun catalogs a real chats.db with Steward's connectors
// started as MCP processes for their schemas, then replays the cases
// against the scripted OpenAI-compatible server.
func TestEvalCatalogAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every connector")
	}
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(home, 0o700)
	store, err := chats.Open(ctx, filepath.Join(home, "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := store.Create(ctx, "invoice", "user")
	tc := func(id, name, args string) llm.ToolCall {
		return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
	}
	err = store.AppendSession(ctx, c.ID,
		llm.Message{Role: "user", Content: "find the ACME invoice"},
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{tc("c1", "mcp__mail__search_mail", `{"query":"ACME invoice"}`)}},
		llm.Message{Role: "tool", ToolCallID: "c1", Content: "no mail configured"},
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{tc("c2", "mcp__gone__lookup", `{}`)}},
		llm.Message{Role: "tool", ToolCallID: "c2", Content: "ok"},
		llm.Message{Role: "assistant", Content: "Nothing found."})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"STEWARD_HOME": home}
	out := filepath.Join(t.TempDir(), "evals")

	// Inside the data home: refused, nothing written.
	env, _, stderr := testEnv(t, vars)
	if code := run(ctx, []string{"eval", "catalog", "--output", filepath.Join(home, "evals")}, env); code == 0 || !strings.Contains(stderr.String(), "data home") {
		t.Fatalf("output inside STEWARD_HOME: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "evals")); err == nil {
		t.Error("the refused output directory was created")
	}

	env, stdout, stderr := testEnv(t, vars)
	if code := run(ctx, []string{"eval", "catalog", "--output", out, "--json"}, env); code != 0 {
		t.Fatalf("catalog: exit %d\n%s", code, stderr)
	}
	var sum struct{ Cases, Tools, CasesWithMissingTools int }
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.Cases != 2 || sum.CasesWithMissingTools != 1 || sum.Tools < 20 {
		t.Fatalf("catalog summary %s (%v)", stdout, err)
	}
	cat, err := eval.ReadCatalog(filepath.Join(out, eval.CatalogFile))
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, tool := range cat.Tools {
		offered[tool.Function.Name] = len(tool.Function.Parameters) > 2
	}
	if !offered["mcp__mail__search_mail"] || !offered["mcp__calendar__search_events"] || !offered["ask_user"] {
		t.Errorf("catalog tools lack the connectors' schemas: %v", offered)
	}
	if h := cat.Cases[0].History; len(h) != 2 || h[0].Role != "system" || cat.Cases[1].MissingTools[0] != "mcp__gone__lookup" {
		t.Errorf("cases %+v", cat.Cases)
	}

	up := llmtest.NewServer(t)
	up.Enqueue("local-model",
		llmtest.Reply{ToolCalls: []llm.ToolCall{tc("x1", "mcp__mail__search_mail", `{"query":"ACME invoice"}`)}},
		llmtest.Reply{Content: "I cannot do that."})
	env, stdout, stderr = testEnv(t, vars)
	if code := run(ctx, []string{"eval", "run", "--output", out, "--base-url", up.URL, "--model", "local-model", "--json"}, env); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	var rep eval.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Cases != 2 || rep.Exact != 1 || rep.FirstTool != 1 || rep.Errors != 0 ||
		rep.Endpoint != up.URL || rep.Results[1].Content != "I cannot do that." {
		t.Fatalf("report %s (%v)", stdout, err)
	}
	if !strings.Contains(stderr.String(), "2/2") {
		t.Errorf("no progress on stderr: %s", stderr)
	}
	if st, err := os.Stat(filepath.Join(out, eval.ReportFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("report.json: %v %v", st, err)
	}
	// The proposed call was only compared: one request per case, none
	// carrying a tool result back.
	for _, req := range up.Requests() {
		msgs, _ := req.Body["messages"].([]any)
		if last, _ := msgs[len(msgs)-1].(map[string]any); last["role"] == "tool" && last["tool_call_id"] == "x1" {
			t.Errorf("a proposed call was executed and its result sent: %v", last)
		}
	}
	if n := len(up.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}

	// A key is named by an environment variable, never passed as a flag;
	// an empty one is refused before any request.
	env, _, stderr = testEnv(t, vars)
	if code := run(ctx, []string{"eval", "run", "--output", out, "--base-url", up.URL, "--api-key-env", "STEWARD_TEST_NO_SUCH_KEY"}, env); code == 0 ||
		!strings.Contains(stderr.String(), "STEWARD_TEST_NO_SUCH_KEY") {
		t.Errorf("empty key variable: exit %d, %s", code, stderr)
	}
	if n := len(up.Requests()); n != 2 {
		t.Errorf("a refused run made requests")
	}
}
