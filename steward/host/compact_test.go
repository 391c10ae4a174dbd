package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
)

// summaryRequest reports whether the provider got a compaction's summary step.
func summaryRequest(r llmtest.Request) bool {
	return strings.Contains(string(r.Raw), "You compact the conversation")
}

// lastMessage returns the role and content of a request's last message.
func lastMessage(r llmtest.Request) (string, string) {
	msgs, _ := r.Body["messages"].([]any)
	if len(msgs) == 0 {
		return "", ""
	}
	m := msgs[len(msgs)-1].(map[string]any)
	content, _ := m["content"].(string)
	return m["role"].(string), content
}

func checkPaired(t *testing.T, msgs []llm.Message) {
	t.Helper()
	if err := agent.CheckPairing(msgs); err != nil {
		t.Fatalf("stored session: %v", err)
	}
}

func entriesOf(t *testing.T, store *chats.Store, chatID string) map[string][]chats.Entry {
	t.Helper()
	tr, err := store.Transcript(context.Background(), chatID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]chats.Entry{}
	for _, e := range tr {
		out[e.Kind] = append(out[e.Kind], e)
	}
	return out
}

// TestLongChatCompacts: 300 turns against a provider whose context is 8k
// tokens (it refuses anything larger, as OpenAI does). Every turn answers;
// the chat is summarised whenever it nears the window, one summary call per
// compaction; the transcript keeps every message and tool card with the
// summaries marked between them; the stored session starts with the latest
// summary and keeps every tool call with its result.
func TestLongChatCompacts(t *testing.T) {
	const window, turns = 8192, 300
	provider := llmtest.NewServer(t)
	provider.ContextWindow = window
	summaries := 0
	provider.Handle(func(r llmtest.Request) llmtest.Reply {
		if summaryRequest(r) {
			summaries++
			return llmtest.Reply{Content: fmt.Sprintf("Summary %d: the user asked numbered questions; the answers and lookups are above.", summaries)}
		}
		role, content := lastMessage(r)
		var n int
		fmt.Sscanf(content, "Question %d", &n)
		if role == "user" && n%10 == 0 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{call(fmt.Sprint("c", n), "mcp__mail__search_mail", `{"query":"invoice"}`)}}
		}
		return llmtest.Reply{Content: "Answer: " + strings.Repeat("the details of this answer ", 12)}
	})
	e := newEnv(t, envOptions{provider: provider, contextWindow: window})
	ctx := context.Background()
	chat, err := e.store.Create(ctx, "long", "")
	if err != nil {
		t.Fatal(err)
	}
	m := e.host.Manager()
	for i := 1; i <= turns; i++ {
		text := fmt.Sprintf("Question %d: %s", i, strings.Repeat("please tell me more about it ", 10))
		if res := m.RunTurn(ctx, chat.ID, text, host.TurnOptions{}); !res.OK {
			t.Fatalf("turn %d: %+v", i, res)
		}
	}

	byKind := entriesOf(t, e.store, chat.ID)
	if len(byKind["user"]) != turns || len(byKind["assistant"]) != turns || len(byKind["tool"]) != turns/10 {
		t.Fatalf("transcript: %d user, %d assistant, %d tool entries", len(byKind["user"]), len(byKind["assistant"]), len(byKind["tool"]))
	}
	for _, te := range byKind["tool"] {
		if !strings.Contains(string(te.Data), `"status":"done"`) {
			t.Fatalf("tool card %s", te.Data)
		}
	}
	t.Logf("%d turns, %d compactions (one summary call each), %d model requests", turns, summaries, len(provider.Requests()))
	if summaries < 10 || len(byKind["summary"]) != summaries {
		t.Fatalf("%d summary calls, %d summary entries (want one entry per call, and at least 10)", summaries, len(byKind["summary"]))
	}
	for _, r := range provider.Requests() {
		if !summaryRequest(r) && len(r.Raw)/4 > window {
			t.Fatalf("a request of %d tokens reached the model", len(r.Raw)/4)
		}
	}
	var last struct {
		Summary string `json:"summary"`
		Covered int    `json:"coveredMessages"`
	}
	json.Unmarshal(byKind["summary"][len(byKind["summary"])-1].Data, &last)
	if last.Covered == 0 || !strings.HasPrefix(last.Summary, fmt.Sprintf("Summary %d:", summaries)) {
		t.Fatalf("last summary entry %+v", last)
	}
	sess, err := e.store.Session(ctx, chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !agent.IsSummary(sess[0]) || !strings.Contains(sess[0].Content, last.Summary) {
		t.Fatalf("the stored session starts with %+v, want the latest summary", sess[0])
	}
	checkPaired(t, sess)
	lastUser := ""
	for _, m := range sess {
		if m.Role == "user" {
			lastUser = m.Content
		}
	}
	if !strings.HasPrefix(lastUser, fmt.Sprintf("Question %d:", turns)) || !strings.HasPrefix(sess[len(sess)-1].Content, "Answer:") {
		t.Fatalf("the stored session ends with the question %.20q and %+v", lastUser, sess[len(sess)-1])
	}
	if n := agent.EstimateTokens(sess, nil); n > window {
		t.Fatalf("the stored session is %d tokens, over the window", n)
	}
}

// TestPendingApprovalSurvivesCompaction: a chat whose history is over its
// budget compacts before the model proposes a gated send; the approval is
// pending (and listed on reopening the chat, with the summary entry) after
// the compaction; once approved, the large tool result makes the next step
// compact again, keeping the call with its result.
func TestPendingApprovalSurvivesCompaction(t *testing.T) {
	const window = 8192
	provider := llmtest.NewServer(t)
	provider.ContextWindow = window
	e := newEnv(t, envOptions{provider: provider, contextWindow: window})
	ctx := context.Background()
	c := e.dial(token)
	chat := c.createChat("approval")
	var history []llm.Message
	for i := range 14 {
		history = append(history, llm.Message{Role: "user", Content: fmt.Sprintf("old question %d %s", i, strings.Repeat("words ", 60))},
			llm.Message{Role: "assistant", Content: fmt.Sprintf("old answer %d %s", i, strings.Repeat("words ", 60))})
	}
	if err := e.store.AppendSession(ctx, chat, history...); err != nil {
		t.Fatal(err)
	}
	e.tools.result = strings.Repeat("sent; the full delivery report follows. ", 220)
	provider.Handle(func(r llmtest.Request) llmtest.Reply {
		if summaryRequest(r) {
			return llmtest.Reply{Content: "Summary: fourteen old questions were answered."}
		}
		switch role, _ := lastMessage(r); role {
		case "user":
			return llmtest.Reply{ToolCalls: []llm.ToolCall{call("s1", "mcp__mail__send_email", `{"to":"a@b.c","body":"hello"}`)}}
		default:
			return llmtest.Reply{Content: "Sent."}
		}
	})
	c.say(chat, "send the greeting")
	first := c.next("conversation.summarised", nil)
	req := c.next("approval.request", nil)

	// Reopening the chat now shows the summary entry and the pending card.
	c2 := e.dial(token)
	c2.send(map[string]any{"type": "chat.open", "chatId": chat})
	tr := c2.next("chat.transcript", nil)
	pending := tr["pendingApprovals"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["approvalId"] != req["approvalId"] {
		t.Fatalf("pending approvals after the compaction: %v", pending)
	}
	kinds := ""
	for _, en := range tr["entries"].([]any) {
		kinds += en.(map[string]any)["kind"].(string) + " "
	}
	if !strings.Contains(kinds, "summary") || !strings.Contains(kinds, "approval") {
		t.Fatalf("transcript entries during the wait: %s", kinds)
	}
	c2.send(map[string]any{"type": "approval.respond", "approvalId": req["approvalId"], "decision": "approve"})
	second := c.next("conversation.summarised", func(f map[string]any) bool { return f["entryId"] != first["entryId"] })
	if d := c.next("turn.done", nil); d["ok"] != true || d["text"] != "Sent." {
		t.Fatalf("turn.done = %v", d)
	}
	if len(e.tools.got("mcp__mail__send_email")) != 1 {
		t.Fatal("the approved send did not run once")
	}
	if got := e.host.Manager().PendingApprovals(chat); len(got) != 0 {
		t.Fatalf("approvals still pending: %v", got)
	}

	byKind := entriesOf(t, e.store, chat)
	if len(byKind["summary"]) != 2 || len(byKind["approval"]) != 1 || !strings.Contains(string(byKind["approval"][0].Data), `"status":"approved"`) {
		t.Fatalf("transcript: %d summaries, approvals %v", len(byKind["summary"]), byKind["approval"])
	}
	if tool := byKind["tool"]; len(tool) != 1 || !strings.Contains(string(tool[0].Data), `"status":"done"`) {
		t.Fatalf("tool cards %v", tool)
	}
	var sess []llm.Message
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if sess, err = e.store.Session(ctx, chat); err == nil && len(sess) > 0 && sess[len(sess)-1].Content == "Sent." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored session %+v", sess)
		}
	}
	checkPaired(t, sess)
	if !agent.IsSummary(sess[0]) || second["coveredMessages"].(float64) < 1 {
		t.Fatalf("session starts with %+v; second compaction %v", sess[0], second)
	}
	calls := 0
	for _, m := range sess {
		for _, tc := range m.ToolCalls {
			if tc.ID == "s1" {
				calls++
			}
		}
	}
	if calls != 1 {
		t.Fatalf("the send's call is %d times in the session, want once (with its result)", calls)
	}
}

// TestSystemPageShowsTheContextBudget: the System page names the chat
// model's context budget, and says when only a rejection compacts.
func TestSystemPageShowsTheContextBudget(t *testing.T) {
	for _, tc := range []struct {
		window int
		want   string
	}{
		{8192, "tier-5: 8192-token context window, 3276 usable for the conversation; a chat is summarised past 2620 tokens"},
		{0, "tier-5: no context window declared"},
	} {
		e := newEnv(t, envOptions{contextWindow: tc.window})
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/system/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st host.SystemStatus
		json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		found := false
		for _, s := range st.Services {
			if s.Name == "chat context" && strings.HasPrefix(s.Detail, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("window %d: services %+v, want a chat context row %q", tc.window, st.Services, tc.want)
		}
	}
}
