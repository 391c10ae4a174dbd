package host_test

import (
	"context"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/protocol"
)

// The chat lookup at the start of a turn is answered from memory after the
// first turn; deleting the chat, through the host or behind its back
// followed by Forget, still refuses the next message.
func TestDeletedChatRefusesTurns(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.dial(token)
	tests := []struct {
		name   string
		delete func(chatID string)
	}{
		{"through the host", func(chatID string) {
			c.send(map[string]any{"type": "chat.delete", "chatId": chatID})
			c.next("chat.deleted", func(f map[string]any) bool { return f["chatId"] == chatID })
		}},
		{"in the store, then forgotten", func(chatID string) {
			if err := e.store.Delete(context.Background(), chatID); err != nil {
				t.Fatal(err)
			}
			e.host.Manager().Forget(chatID)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chat := c.createChat(tt.name)
			e.provider.Enqueue("tier-5", llmtest.Reply{Content: "first answer"})
			c.say(chat, "hello")
			if d := c.next("turn.done", nil); d["ok"] != true {
				t.Fatalf("first turn: %v", d)
			}
			if err := e.host.Manager().CheckChat(context.Background(), chat); err != nil {
				t.Fatalf("CheckChat of a live chat: %v", err)
			}
			n := len(e.provider.Requests())
			tt.delete(chat)
			c.say(chat, "are you there?")
			if f := c.next("error", nil); f["code"] != protocol.ErrNotFound || f["chatId"] != chat {
				t.Fatalf("message to a deleted chat: %v", f)
			}
			if err := e.host.Manager().CheckChat(context.Background(), chat); err != chats.ErrNotFound {
				t.Fatalf("CheckChat of a deleted chat = %v, want chats.ErrNotFound", err)
			}
			if len(e.provider.Requests()) != n {
				t.Error("a message to a deleted chat reached the model")
			}
		})
	}
}
