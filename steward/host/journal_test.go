package host

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestStartGate(t *testing.T) {
	g := newStartGate()
	if !closed(g.clear()) {
		t.Fatal("a new gate is not clear")
	}
	g.enter()
	g.enter()
	c := g.clear()
	if closed(c) {
		t.Fatal("clear with two turns starting")
	}
	g.leave()
	if closed(c) {
		t.Fatal("clear with one turn starting")
	}
	g.leave()
	if !closed(c) || !closed(g.clear()) {
		t.Fatal("not clear once every turn left")
	}
}

// A turn's journal writes everything by close, even while another turn of
// the host is still waiting for its first output and without release.
func TestJournalCloseWritesWhileOthersStart(t *testing.T) {
	ctx := context.Background()
	store, err := chats.Open(ctx, filepath.Join(t.TempDir(), "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	chat, err := store.Create(ctx, "journal", "user")
	if err != nil {
		t.Fatal(err)
	}
	g := newStartGate()
	g.enter() // another turn that never produces output
	j := newJournal(ctx, store, chat.ID, slog.New(slog.DiscardHandler), g)
	j.append(&chats.Entry{Kind: "user", Data: []byte(`{"text":"hi"}`)})
	j.session(llm.Message{Role: "user", Content: "hi"})
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	tr, err := store.Transcript(ctx, chat.ID)
	if err != nil || len(tr) != 1 || tr[0].Kind != "user" {
		t.Fatalf("transcript %+v %v", tr, err)
	}
	sess, err := store.Session(ctx, chat.ID)
	if err != nil || len(sess) != 1 || sess[0].Content != "hi" {
		t.Fatalf("session %+v %v", sess, err)
	}
}

// A client opening a chat sees the entries a running turn has queued but not
// yet written (a new chat is opened right after its first message, while
// the journal holds its writes), and each entry once after they land.
func TestTranscriptIncludesQueuedEntries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "chats.db")
	store, err := chats.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	chat, err := store.Create(ctx, "new chat", "user")
	if err != nil {
		t.Fatal(err)
	}
	// Another writer holds chats.db, so the journal cannot write yet.
	other, err := sql.Open("sqlite", path) // the driver sqlitedb registers
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	m := NewManager(ManagerOptions{Store: store})
	j := newJournal(ctx, store, chat.ID, slog.New(slog.DiscardHandler), nil)
	m.turns[chat.ID] = &turn{journal: j}
	j.append(&chats.Entry{Kind: "user", Data: []byte(`{"text":"hello"}`)})
	j.release()
	tr, err := m.Transcript(ctx, chat.ID)
	if err != nil || len(tr) != 1 || tr[0].Kind != "user" || tr[0].ID == "" || tr[0].At.IsZero() {
		t.Fatalf("transcript while the write waits: %+v %v", tr, err)
	}
	stored, err := store.Transcript(ctx, chat.ID)
	if err != nil {
		t.Fatalf("read the stored transcript while the write waits: %v", err)
	}
	if len(stored) != 0 {
		t.Fatalf("the write was not held back (%d entries stored); the test proves nothing", len(stored))
	}

	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	after, err := m.Transcript(ctx, chat.ID)
	if err != nil || len(after) != 1 || after[0].ID != tr[0].ID {
		t.Fatalf("transcript once written: %+v %v; want the same single entry", after, err)
	}
}
