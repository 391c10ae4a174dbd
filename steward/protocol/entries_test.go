package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/protocol"
)

// TestDecodeEntry: each kind's data comes back as its typed value, with the
// fields the host wrote; an unknown kind or broken data is an error naming
// the entry.
func TestDecodeEntry(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want any
	}{
		{protocol.EntryApproval, &protocol.ApprovalCard{ApprovalID: "appr_1", CallID: "c1", Tool: "mcp__mail__send_email", Args: json.RawMessage(`{"to":"a@b.c"}`), Status: "approved", Note: "ok"}},
		{protocol.EntryQuestion, &protocol.QuestionCard{QuestionID: "q_1", Text: "Which train?", Options: []string{"17:05"}, Status: protocol.StatusAnswered, Answer: "17:05"}},
		{protocol.EntryError, &protocol.TurnError{Error: "model API error 401", Cause: "The model provider refused the API key.", Fix: "Check the key."}},
		{protocol.EntryTool, &protocol.ToolCard{CallID: "c1", Name: "mcp__trains__find_next_train", Args: json.RawMessage(`{}`), Status: "done", Content: "FR 9544"}},
		{protocol.EntryUser, &protocol.UserMessageSaved{Envelope: protocol.Env(protocol.TypeUserMessageSaved, ""), ChatID: "chat_1", MessageID: "user_1", Text: "hi"}},
		{protocol.EntryControl, &protocol.UserMessageSaved{Envelope: protocol.Env(protocol.TypeUserMessageSaved, ""), ChatID: "chat_1", MessageID: "user_2", Text: "call"}},
		{protocol.EntryAssistant, &protocol.AssistantMessage{Envelope: protocol.Env(protocol.TypeAssistantMessage, ""), ChatID: "chat_1", TurnID: "turn_1", MessageID: "asst_1", Text: "hello"}},
		{protocol.EntrySummary, &protocol.Summarised{Envelope: protocol.Env(protocol.TypeSummarised, ""), ChatID: "chat_1", EntryID: "summary_1", Summary: "s", Covered: 4}},
	} {
		data, _ := json.Marshal(tc.want)
		got, err := protocol.DecodeEntry(protocol.Entry{ID: "e1", Kind: tc.kind, Data: data})
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %#v, %v; want %#v", tc.kind, got, err, tc.want)
		}
	}
	if _, err := protocol.DecodeEntry(protocol.Entry{ID: "e2", Kind: "mystery", Data: json.RawMessage(`{}`)}); err == nil || !strings.Contains(err.Error(), `e2: unknown kind "mystery"`) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := protocol.DecodeEntry(protocol.Entry{ID: "e3", Kind: protocol.EntryQuestion, Data: json.RawMessage(`{"status":1}`)}); err == nil || !strings.Contains(err.Error(), "e3 (question)") {
		t.Errorf("broken data: %v", err)
	}
}
