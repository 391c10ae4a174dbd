package eval_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/eval"
)

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

// storeWithChats writes two chats to a real chats.db: one with two tool
// decisions (a search, then a send), one with a plain answer only.
func storeWithChats(t *testing.T) (*chats.Store, string, string) {
	t.Helper()
	ctx := context.Background()
	store, err := chats.Open(ctx, filepath.Join(t.TempDir(), "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	a, _ := store.Create(ctx, "invoice", "user")
	b, _ := store.Create(ctx, "hello", "user")
	if err := store.AppendSession(ctx, a.ID,
		llm.Message{Role: "user", Content: "find the invoice from ACME and send it to Anna"},
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__search_mail", `{"query":"ACME invoice"}`)}},
		llm.Message{Role: "tool", ToolCallID: "c1", Content: "1 message: id 42"},
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call("c2", "mcp__mail__send_email", `{"to":"anna@polimi.it","body":"see attached"}`),
			call("c3", "mcp__old__gone", `not json`)}},
		llm.Message{Role: "tool", ToolCallID: "c2", Content: "sent"},
		llm.Message{Role: "tool", ToolCallID: "c3", Content: "error"},
		llm.Message{Role: "assistant", Content: "Sent."},
	); err != nil {
		t.Fatal(err)
	}
	if err := store.AppendSession(ctx, b.ID, llm.Message{Role: "user", Content: "hi"}, llm.Message{Role: "assistant", Content: "Hello!"}); err != nil {
		t.Fatal(err)
	}
	return store, a.ID, b.ID
}

var tools = []llm.Tool{
	{Type: "function", Function: llm.FunctionDef{Name: "mcp__mail__search_mail", Parameters: json.RawMessage(`{"type":"object"}`)}},
	{Type: "function", Function: llm.FunctionDef{Name: "mcp__mail__send_email", Parameters: json.RawMessage(`{"type":"object"}`)}},
}

func TestCatalogCollectsDecisionPoints(t *testing.T) {
	store, chatA, _ := storeWithChats(t)
	sessions, err := eval.Sessions(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	cat := eval.Collect(sessions, eval.CollectOptions{Source: "chats.db", Tools: tools, SystemPrompt: "you are steward"})
	if !cat.Private || len(cat.Tools) != 2 || len(cat.Cases) != 2 {
		t.Fatalf("catalog: private %v, %d tools, %d cases", cat.Private, len(cat.Tools), len(cat.Cases))
	}
	first, second := cat.Cases[0], cat.Cases[1]
	if first.ID != chatA+"#1" || first.ChatTitle != "invoice" || len(first.History) != 2 ||
		first.History[0].Role != "system" || first.History[0].Content != "you are steward" || first.History[1].Role != "user" {
		t.Errorf("first case %+v", first)
	}
	if len(first.Expected) != 1 || first.Expected[0].Name != "mcp__mail__search_mail" || string(first.Expected[0].Arguments) != `{"query":"ACME invoice"}` {
		t.Errorf("first case expects %+v", first.Expected)
	}
	// The second decision sees the first call and its result; a tool the
	// catalog does not offer is named, and arguments that are not JSON stay
	// valid JSON (a string).
	if second.ID != chatA+"#3" || len(second.History) != 4 || second.History[3].Role != "tool" || len(second.Expected) != 2 ||
		strings.Join(second.MissingTools, ",") != "mcp__old__gone" || string(second.Expected[1].Arguments) != `"not json"` {
		t.Errorf("second case %+v", second)
	}
}

func TestRunComparesWithoutExecuting(t *testing.T) {
	store, _, _ := storeWithChats(t)
	sessions, _ := eval.Sessions(context.Background(), store)
	cat := eval.Collect(sessions, eval.CollectOptions{Tools: tools})

	// The scripted endpoint: the first case is proposed exactly; the second
	// with the right first tool but different arguments and no second call;
	// then the same second case once more, refused.
	up := llmtest.NewServer(t)
	up.Enqueue("local-model",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("x1", "mcp__mail__search_mail", `{ "query" : "ACME invoice" }`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("x2", "mcp__mail__send_email", `{"to":"someone@else.org"}`)}},
		llmtest.Reply{Status: 503, ErrorMessage: "model loading"})
	client := llm.NewClient(llm.ClientOptions{BaseURL: up.URL})
	var progress []int
	ids := []string{cat.Cases[0].ID, cat.Cases[1].ID, cat.Cases[1].ID}
	rep, err := eval.Run(context.Background(), cat, eval.RunOptions{Model: client, ModelName: "local-model", Cases: ids,
		Progress: func(done, total int, _ eval.CaseResult) { progress = append(progress, done*10+total) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cases != 3 || rep.Exact != 1 || rep.Sequence != 1 || rep.FirstTool != 2 || rep.Errors != 1 || !rep.Private {
		t.Errorf("report %+v", rep)
	}
	r := rep.Results
	if !r[0].Exact || r[1].Sequence || !r[1].FirstTool || len(r[1].Proposed) != 1 || !strings.Contains(r[2].Error, "model loading") {
		t.Errorf("results %+v", r)
	}
	if len(progress) != 3 || progress[2] != 33 {
		t.Errorf("progress %v", progress)
	}
	// One request per case, each with the history and the catalog's
	// tools, and never a follow-up carrying a tool result: nothing ran.
	reqs := up.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		msgs, _ := req.Body["messages"].([]any)
		offered, _ := req.Body["tools"].([]any)
		if len(offered) != 2 || len(msgs) != len(cat.Cases[min(i, 1)].History) {
			t.Errorf("request %d: %d messages, %d tools", i, len(msgs), len(offered))
		}
	}

	// An unknown case is an error before any request.
	if _, err := eval.Run(context.Background(), cat, eval.RunOptions{Model: client, ModelName: "m", Cases: []string{"nope#1"}}); err == nil ||
		!strings.Contains(err.Error(), "nope#1") {
		t.Errorf("unknown case: %v", err)
	}
	if len(up.Requests()) != 3 {
		t.Errorf("an unknown case made a request")
	}
}

func TestArtifactsArePrivateAndOutsideRepoAndHome(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "steward-home")
	repo := filepath.Join(root, "repo")
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	os.MkdirAll(home, 0o700)
	os.Symlink(home, filepath.Join(root, "link-to-home"))
	cat := &eval.Catalog{Private: true, CreatedAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Cases: []eval.Case{{ID: "c#1"}}}

	for _, bad := range []string{filepath.Join(home, "evals"), filepath.Join(repo, "sub", ".local-evals"), filepath.Join(root, "link-to-home", "x"), ""} {
		if _, err := (eval.Artifacts{Dir: bad, DataHome: home}).Write(eval.CatalogFile, cat); err == nil {
			t.Errorf("%q: written, want a refusal", bad)
		}
		if bad != "" {
			if _, err := os.Stat(bad); err == nil {
				t.Errorf("%q was created", bad)
			}
		}
	}
	out := filepath.Join(root, "evals", "run1")
	path, err := (eval.Artifacts{Dir: out, DataHome: home}).Write(eval.CatalogFile, cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{out, path, filepath.Join(out, eval.PrivateNotice)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s mode %v: readable by others", p, perm)
		}
	}
	notice, _ := os.ReadFile(filepath.Join(out, eval.PrivateNotice))
	if !strings.HasPrefix(string(notice), "PRIVATE") {
		t.Errorf("notice %q", notice)
	}
	back, err := eval.ReadCatalog(path)
	if err != nil || !back.Private || len(back.Cases) != 1 || back.Cases[0].ID != "c#1" {
		t.Errorf("read back %+v %v", back, err)
	}
	os.WriteFile(filepath.Join(out, "broken.json"), []byte("{"), 0o600)
	if _, err := eval.ReadCatalog(filepath.Join(out, "broken.json")); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("broken catalog: %v", err)
	}
}
