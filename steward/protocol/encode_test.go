package protocol

import (
	"encoding/json"
	"testing"
)

func TestAssistantDeltaAppendJSON(t *testing.T) {
	tests := []AssistantDelta{
		{Envelope: Env(TypeAssistantDelta, ""), ChatID: "chat_1", TurnID: "turn_1", Text: "tok1 "},
		{Envelope: Env(TypeAssistantDelta, "req-7"), ChatID: "chat_1", TurnID: "turn_1", Text: ""},
		{Envelope: Env(TypeAssistantDelta, ""), ChatID: "c", TurnID: "t", Text: "line\n\t\"quoted\" \\ <b>&amp; é 😀 \u2028 \x00 \xff"},
	}
	for _, f := range tests {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON = %s, want %s", got, want)
		}
	}
}

// FuzzAssistantDeltaAppendJSON checks that the hand encoding is byte for byte
// what json.Marshal writes.
func FuzzAssistantDeltaAppendJSON(f *testing.F) {
	f.Add("", "chat_1", "turn_1", "tok ")
	f.Add("id", "c\"", "t<", "\xf0\x9f\x98\x80 \u2029 \x7f \x1f")
	f.Fuzz(func(t *testing.T, id, chatID, turnID, text string) {
		d := AssistantDelta{Envelope: Env(TypeAssistantDelta, id), ChatID: chatID, TurnID: turnID, Text: text}
		want, _ := json.Marshal(d)
		if got := d.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON = %s, want %s", got, want)
		}
	})
}
