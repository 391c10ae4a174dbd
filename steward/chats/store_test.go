package chats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
)

func TestChatsLifecycleSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "chats.db")
	s, err := chats.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Create(ctx, "  Trains   to Torino ", "")
	time.Sleep(2 * time.Millisecond) // distinct updated_at for ordering
	b, _ := s.Create(ctx, "", "quick-send")
	if a.Title != "Trains to Torino" || b.Title != "New chat" || b.Origin != "quick-send" {
		t.Errorf("titles %q %q origin %q", a.Title, b.Title, b.Origin)
	}
	time.Sleep(2 * time.Millisecond)
	if err := s.Append(ctx, a.ID, &chats.Entry{Kind: "user", Data: json.RawMessage(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List(ctx)
	if len(list) != 2 || list[0].ID != a.ID {
		t.Errorf("list = %+v, want the chat with the newest entry first", list)
	}
	if err := s.AppendSession(ctx, a.ID, llm.Message{Role: "user", Content: "hi"},
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "t", Arguments: "{}"}}}},
		llm.Message{Role: "tool", ToolCallID: "c1", Content: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, a.ID, "Renamed"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = chats.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ := s.Get(ctx, a.ID)
	if got.Title != "Renamed" {
		t.Errorf("title after reopen = %q", got.Title)
	}
	sess, err := s.Session(ctx, a.ID)
	if err != nil || len(sess) != 3 || sess[1].ToolCalls[0].ID != "c1" || sess[2].ToolCallID != "c1" {
		t.Fatalf("session after reopen = %+v, %v", sess, err)
	}
	tr, _ := s.Transcript(ctx, a.ID)
	if len(tr) != 1 || tr[0].Kind != "user" || !strings.Contains(string(tr[0].Data), "hi") {
		t.Errorf("transcript = %+v", tr)
	}
	if err := s.UpdateEntry(ctx, a.ID, tr[0].ID, json.RawMessage(`{"text":"edited"}`)); err != nil {
		t.Fatal(err)
	}
	// A missing entry of an existing chat is not reported as a missing chat.
	if err := s.UpdateEntry(ctx, a.ID, "tool_missing", json.RawMessage(`{}`)); !errors.Is(err, chats.ErrEntryNotFound) || errors.Is(err, chats.ErrNotFound) {
		t.Errorf("update of a missing entry: %v, want ErrEntryNotFound", err)
	}

	if err := s.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"get":     func() error { _, err := s.Get(ctx, a.ID); return err }(),
		"rename":  s.Rename(ctx, a.ID, "x"),
		"append":  s.Append(ctx, a.ID, &chats.Entry{Kind: "user", Data: json.RawMessage(`{}`)}),
		"delete":  s.Delete(ctx, a.ID),
		"history": func() error { _, err := s.Transcript(ctx, a.ID); return err }(),
	} {
		if !errors.Is(err, chats.ErrNotFound) {
			t.Errorf("%s on a deleted chat: %v, want ErrNotFound", name, err)
		}
	}
	if sess, err := s.Session(ctx, a.ID); err != nil || len(sess) != 0 {
		t.Errorf("deleting a chat left its session: %d messages (%v)", len(sess), err)
	}
	if err := s.AppendSession(ctx, a.ID, llm.Message{Role: "user"}); err == nil {
		t.Error("session append to a deleted chat succeeded")
	}
	if err := s.Rename(ctx, b.ID, "   "); err == nil {
		t.Error("accepted an empty title")
	}
}

func TestReplaceSessionKeepsOtherChatsAndAppendsAfter(t *testing.T) {
	ctx := context.Background()
	s, err := chats.Open(ctx, filepath.Join(t.TempDir(), "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.Create(ctx, "a", "")
	b, _ := s.Create(ctx, "b", "")
	for i := range 5 {
		s.AppendSession(ctx, a.ID, llm.Message{Role: "user", Content: fmt.Sprint("a", i)})
	}
	s.AppendSession(ctx, b.ID, llm.Message{Role: "user", Content: "b0"})
	if err := s.ReplaceSession(ctx, a.ID, llm.Message{Role: "user", Content: "summary"}, llm.Message{Role: "user", Content: "a4"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendSession(ctx, a.ID, llm.Message{Role: "assistant", Content: "next"}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Session(ctx, a.ID)
	var contents []string
	for _, m := range got {
		contents = append(contents, m.Content)
	}
	if strings.Join(contents, ",") != "summary,a4,next" {
		t.Fatalf("session a = %v", contents)
	}
	if other, _ := s.Session(ctx, b.ID); len(other) != 1 || other[0].Content != "b0" {
		t.Fatalf("session b = %+v", other)
	}
}
