package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

// connect serves the actions MCP server over s and p to a test client.
func connect(t *testing.T, s *Store, p *Planner) *mcp.ClientSession {
	t.Helper()
	return mcptooltest.Connect(t, NewServer(ServerOptions{Open: func(context.Context) (*Store, error) { return s, nil }, Planner: p, Version: "test"}))
}

func TestListActionsSchemaAndPayload(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	for i := 0; i < 120; i++ {
		s.Upsert(ctx, testMailItem(i, c.t), false)
	}
	cs := connect(t, s, nil)
	schema := mcptooltest.InputSchema(t, cs, "list_actions")
	limit := schema["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["minimum"] != 1.0 || limit["maximum"] != 100.0 {
		t.Fatalf("limit schema %v", limit)
	}
	res, text := mcptooltest.CallText(t, cs, "list_actions", map[string]any{"limit": 1000})
	if !res.IsError || !strings.Contains(text, "limit") {
		t.Fatalf("limit 1000 accepted: %s", text)
	}
	// A direct store call with 1,000 is clamped to 100.
	if r, _ := s.List(ctx, ListOptions{Limit: 1000}); len(r.Items) != 100 {
		t.Fatalf("direct call listed %d", len(r.Items))
	}
	_, text = mcptooltest.CallText(t, cs, "list_actions", map[string]any{"limit": 5})
	if strings.Contains(text, "proposal") || strings.Contains(text, "snapshot") {
		t.Fatalf("payload without includePayload: %s", text)
	}
	var out ListResult
	json.Unmarshal([]byte(text), &out)
	if len(out.Items) != 5 || out.CountsTotal[StatusNew] != 120 {
		t.Fatalf("list: %d items, counts %v", len(out.Items), out.CountsTotal)
	}
	_, text = mcptooltest.CallText(t, cs, "list_actions", map[string]any{"limit": 1, "includePayload": true})
	if !strings.Contains(text, "mcp__mail__reply_email") {
		t.Fatalf("includePayload without the proposal: %s", text)
	}
	_, text = mcptooltest.CallText(t, cs, "read_action", map[string]any{"id": out.Items[0].ID})
	if !strings.Contains(text, "asked a question") {
		t.Fatalf("read_action: %s", text)
	}
	if res, text := mcptooltest.CallText(t, cs, "read_action", map[string]any{"id": 99999}); !res.IsError || !strings.Contains(text, "list_actions") {
		t.Fatalf("missing id: %s", text)
	}
	if _, text := mcptooltest.CallText(t, cs, "update_action_status", map[string]any{"id": out.Items[0].ID, "status": "dismissed"}); !strings.Contains(text, "dismissed") {
		t.Fatalf("update: %s", text)
	}
	if it, _ := s.Get(ctx, out.Items[0].ID); it.Status != StatusDismissed {
		t.Fatalf("status %s", it.Status)
	}
}

func TestFlowTools(t *testing.T) {
	s, _ := openTestStore(t)
	cs := connect(t, s, nil)
	if res, text := mcptooltest.CallText(t, cs, "create_flow", map[string]any{"name": "Receipts", "trigger": "purchase confirmation", "guidance": "forward to accounting"}); res.IsError {
		t.Fatal(text)
	}
	if res, text := mcptooltest.CallText(t, cs, "create_flow", map[string]any{"name": "", "trigger": "x", "guidance": "y"}); !res.IsError || !strings.Contains(text, "name") {
		t.Fatalf("empty name: %s", text)
	}
	_, text := mcptooltest.CallText(t, cs, "search_flows", map[string]any{"query": "Your purchase confirmation #123"})
	if !strings.Contains(text, "Receipts") {
		t.Fatalf("search: %s", text)
	}
	_, text = mcptooltest.CallText(t, cs, "update_flow", map[string]any{"id": 1, "guidance": "forward to finance"})
	if !strings.Contains(text, `"version":2`) {
		t.Fatalf("update: %s", text)
	}
	mcptooltest.CallText(t, cs, "delete_flow", map[string]any{"id": 1})
	if _, text = mcptooltest.CallText(t, cs, "list_flows", map[string]any{}); strings.Contains(text, "Receipts") {
		t.Fatalf("deleted flow listed: %s", text)
	}
}

func TestReviseActionThroughTheModel(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	id, _, _ := s.Upsert(ctx, testMailItem(1, c.t), false)
	sc := newScripted(t)
	sc.srv.Handle(func(llmtest.Request) llmtest.Reply {
		return jsonReply(map[string]any{"summary": "Decline politely", "alternatives": []any{map[string]any{"summary": "Decline", "confidence": 0.8,
			"steps": []any{map[string]any{"label": "Reply no", "type": "tool", "tool": "mcp__mail__reply_email", "args": map[string]any{"messageId": "1", "body": "Sorry, not Thursday."}}}}}})
	})
	cs := connect(t, s, sc.planner())
	if res, text := mcptooltest.CallText(t, cs, "revise_action", map[string]any{"id": id, "instruction": "say no instead"}); res.IsError {
		t.Fatal(text)
	}
	it, _ := s.Get(ctx, id)
	if it.Summary != "Decline politely" || !strings.Contains(string(it.Proposal[0].Steps[0].Args), "Sorry") ||
		len(it.Snapshot.Revisions) != 1 || it.Snapshot.Rationale != "asked a question" {
		t.Fatalf("revised %+v", it)
	}
	reqs := sc.chats()
	if len(reqs) != 1 || reqs[0].Header.Get(llm.HeaderUsageAction) != "revise" {
		t.Fatalf("model calls %d", len(reqs))
	}
	if _, user := messagesOf(reqs[0]); !strings.Contains(user, "say no instead") || !strings.Contains(user, "asked a question") {
		t.Fatalf("the revision prompt lacks the instruction or the snapshot: %s", user)
	}
}
