package protocol_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/agentstack/agentstack/steward/protocol"
)

// TestDocExamples decodes every example of docs/protocol.md strictly into its
// Go type, so the documentation cannot drift from the code.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]func() any{
		"auth": func() any { return &protocol.Auth{} }, "chat.list": func() any { return &protocol.Envelope{} },
		"chat.create": func() any { return &protocol.ChatCreate{} }, "chat.rename": func() any { return &protocol.ChatRename{} },
		"chat.delete": func() any { return &protocol.ChatRef{} }, "chat.open": func() any { return &protocol.ChatRef{} },
		"user.message": func() any { return &protocol.UserMessage{} }, "abort": func() any { return &protocol.ChatRef{} },
		"approval.respond": func() any { return &protocol.ApprovalRespond{} }, "question.answer": func() any { return &protocol.QuestionAnswer{} },
		"client.focus": func() any { return &protocol.ClientFocus{} },
		"hello":        func() any { return &protocol.Hello{} }, "chats": func() any { return &protocol.Chats{} },
		"chat.updated": func() any { return &protocol.ChatUpdated{} }, "chat.deleted": func() any { return &protocol.ChatDeleted{} },
		"chat.transcript": func() any { return &protocol.Transcript{} }, "user.message.saved": func() any { return &protocol.UserMessageSaved{} },
		"assistant.delta": func() any { return &protocol.AssistantDelta{} }, "assistant.message": func() any { return &protocol.AssistantMessage{} },
		"tool.start": func() any { return &protocol.ToolEvent{} }, "tool.result": func() any { return &protocol.ToolEvent{} },
		"tool.error": func() any { return &protocol.ToolEvent{} }, "approval.request": func() any { return &protocol.ApprovalRequest{} },
		"approval.resolved": func() any { return &protocol.ApprovalResolved{} }, "question": func() any { return &protocol.Question{} },
		"turn.done": func() any { return &protocol.TurnDone{} }, "error": func() any { return &protocol.Error{} },
		"conversation.summarised": func() any { return &protocol.Summarised{} },
	}
	re := regexp.MustCompile("(?s)### ([a-z.]+)\n.*?```json\n(.*?)\n```")
	seen := map[string]bool{}
	for _, m := range re.FindAllSubmatch(doc, -1) {
		name, example := string(m[1]), m[2]
		mk, ok := types[name]
		if !ok {
			t.Errorf("docs/protocol.md documents %q, which has no Go type here", name)
			continue
		}
		seen[name] = true
		dec := json.NewDecoder(bytes.NewReader(example))
		dec.DisallowUnknownFields()
		v := mk()
		if err := dec.Decode(v); err != nil {
			t.Errorf("example %s does not decode strictly: %v", name, err)
			continue
		}
		if tr, ok := v.(*protocol.Transcript); ok {
			// Each entry's data is strictly its kind's type.
			for _, e := range tr.Entries {
				data, ok := protocol.NewEntryData(e.Kind)
				if !ok {
					t.Errorf("example chat.transcript: entry kind %q has no Go type", e.Kind)
					continue
				}
				dec := json.NewDecoder(bytes.NewReader(e.Data))
				dec.DisallowUnknownFields()
				if err := dec.Decode(data); err != nil {
					t.Errorf("example chat.transcript: %s entry does not decode strictly: %v", e.Kind, err)
				}
			}
		}
		var env protocol.Envelope
		json.Unmarshal(example, &env)
		if env.V != protocol.Version || env.Type != name {
			t.Errorf("example %s has v=%d type=%q", name, env.V, env.Type)
		}
	}
	for name := range types {
		if !seen[name] {
			t.Errorf("frame %s has no example in docs/protocol.md", name)
		}
	}
}
