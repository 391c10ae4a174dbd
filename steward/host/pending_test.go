package host_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/protocol"
)

// TestPendingQuestionsAndApprovalsShareOneRegistry: a question and an
// approval wait in the same way: each is a card in the transcript while it
// waits (listed as pending when the chat is opened elsewhere), answered by
// its own id and frame only (an approval answer never reaches a question),
// and its card records how it ended. Every entry decodes into its kind's
// typed value.
func TestPendingQuestionsAndApprovalsShareOneRegistry(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "ask_user", `{"question":"Which train?","options":["17:05","18:05"]}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__mail__send_email", `{"to":"anna@polimi.it","body":"The 18:05."}`)}},
		llmtest.Reply{Content: "Sent."})
	c := e.dial(token)
	chat := c.createChat("q")
	c.say(chat, "tell Anna my train")
	q := c.next("question", nil)

	open := func() (protocol.Transcript, map[string]any) {
		t.Helper()
		c2 := e.dial(token)
		c2.send(map[string]any{"type": "chat.open", "chatId": chat})
		raw, _ := json.Marshal(c2.next("chat.transcript", nil))
		var tr protocol.Transcript
		if err := json.Unmarshal(raw, &tr); err != nil {
			t.Fatal(err)
		}
		typed := map[string]any{}
		for _, en := range tr.Entries {
			v, err := protocol.DecodeEntry(en)
			if err != nil {
				t.Fatalf("entry %s: %v", en.Kind, err)
			}
			typed[en.ID] = v
		}
		return tr, typed
	}
	tr, typed := open()
	if len(tr.Questions) != 1 || tr.Questions[0].QuestionID != q["questionId"] || tr.Questions[0].Text != "Which train?" {
		t.Fatalf("pending questions while it waits: %+v", tr.Questions)
	}
	if card, ok := typed[q["questionId"].(string)].(*protocol.QuestionCard); !ok || card.Status != protocol.StatusPending || len(card.Options) != 2 {
		t.Fatalf("question card while it waits: %#v", typed[q["questionId"].(string)])
	}

	// The ids are one namespace of requests, but an answer only reaches its own kind.
	c.send(map[string]any{"type": "approval.respond", "approvalId": q["questionId"], "decision": "approve"})
	if f := c.next("error", nil); f["code"] != protocol.ErrNotFound {
		t.Errorf("an approval answer to a question = %v", f)
	}
	c.send(map[string]any{"type": "question.answer", "questionId": q["questionId"], "answer": "18:05"})
	req := c.next("approval.request", nil)
	c.send(map[string]any{"type": "question.answer", "questionId": req["approvalId"], "answer": "yes"})
	if f := c.next("error", nil); f["code"] != protocol.ErrNotFound {
		t.Errorf("a question answer to an approval = %v", f)
	}
	tr, typed = open()
	if len(tr.Questions) != 0 || len(tr.Pending) != 1 || tr.Pending[0].ApprovalID != req["approvalId"] {
		t.Fatalf("pending after the answer: questions %+v, approvals %+v", tr.Questions, tr.Pending)
	}
	if card, ok := typed[req["approvalId"].(string)].(*protocol.ApprovalCard); !ok || card.Status != protocol.StatusPending || card.Tool != "mcp__mail__send_email" {
		t.Fatalf("approval card while it waits: %#v", typed[req["approvalId"].(string)])
	}
	c.send(map[string]any{"type": "approval.respond", "approvalId": req["approvalId"], "decision": "approve", "note": "fine"})
	if d := c.next("turn.done", nil); d["ok"] != true || d["text"] != "Sent." {
		t.Fatalf("turn.done = %v", d)
	}

	tr, typed = open()
	if len(tr.Questions) != 0 || len(tr.Pending) != 0 {
		t.Fatalf("still pending after the turn: %+v %+v", tr.Questions, tr.Pending)
	}
	if card := typed[q["questionId"].(string)].(*protocol.QuestionCard); card.Status != protocol.StatusAnswered || card.Answer != "18:05" {
		t.Errorf("question card after the answer: %+v", card)
	}
	if card := typed[req["approvalId"].(string)].(*protocol.ApprovalCard); card.Status != "approved" || card.Note != "fine" {
		t.Errorf("approval card after the answer: %+v", card)
	}
	var kinds []string
	for _, en := range tr.Entries {
		kinds = append(kinds, en.Kind)
	}
	// Each card follows the tool card of the call that waited for it.
	want := []string{protocol.EntryUser, protocol.EntryTool, protocol.EntryQuestion, protocol.EntryTool, protocol.EntryApproval, protocol.EntryAssistant}
	if !slices.Equal(kinds, want) {
		t.Fatalf("entries %v, want %v", kinds, want)
	}
}
