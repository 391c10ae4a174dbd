// Package chats is Steward's primary conversation store (STEWARD_HOME/chats.db):
// the chat list, each chat's transcript as the user sees it (messages, tool
// cards, approvals) and each chat's agent session — the model conversation
// that lets a chat resume with its full history after a restart.
package chats

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/sqlitedb"
)

var migrations = []string{`
CREATE TABLE chats (
	id         TEXT PRIMARY KEY,
	title      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	unread     INTEGER NOT NULL DEFAULT 0,
	origin     TEXT NOT NULL DEFAULT 'user'   -- user, quick-send, watch
);
CREATE INDEX chats_updated ON chats(updated_at DESC);
CREATE TABLE entries (
	chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	id      TEXT NOT NULL,
	kind    TEXT NOT NULL,   -- user, assistant, tool, approval, error
	at      INTEGER NOT NULL,
	data    TEXT NOT NULL,   -- JSON, shape by kind
	PRIMARY KEY (chat_id, seq)
);
CREATE UNIQUE INDEX entries_id ON entries(chat_id, id);
CREATE TABLE session (
	chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	message TEXT NOT NULL,   -- llm.Message JSON
	PRIMARY KEY (chat_id, seq)
);
`, `
CREATE TABLE files (
	token      TEXT PRIMARY KEY,
	name       TEXT NOT NULL,   -- the uploaded name, for display only
	mime       TEXT NOT NULL,
	size       INTEGER NOT NULL,
	path       TEXT NOT NULL,   -- where the bytes are, chosen by the host
	created_at INTEGER NOT NULL
);
`}

// ErrNotFound reports a chat that does not exist (or was deleted).
var ErrNotFound = errors.New("chat not found")

// ErrEntryNotFound reports a transcript entry that does not exist in a chat.
var ErrEntryNotFound = errors.New("transcript entry not found")

// Chat is one conversation in the list.
type Chat struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Unread    bool      `json:"unread"`
	Origin    string    `json:"origin"`
}

// Entry is one transcript item; Data's shape depends on Kind and is defined
// by the protocol.
type Entry struct {
	ID   string          `json:"id"`
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Store is the chats database. Writes go through one connection; reads use
// a separate read-only pool, so a streaming turn's writes never make another
// chat wait to read (WAL lets readers run beside the writer).
type Store struct {
	db, ro *sql.DB
	// The statements every turn runs several times, prepared once: parsing
	// them was a third of a turn's SQLite work.
	touch, addEntry, lastSeq, addMessage *sql.Stmt
}

// Open opens (creating) the store at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open chats: %w", err)
	}
	ro, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true, MaxOpenConns: 4})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open chats for reading: %w", err)
	}
	s := &Store{db: db, ro: ro}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.touch, `UPDATE chats SET updated_at = ? WHERE id = ?`},
		{&s.addEntry, `INSERT INTO entries(chat_id, seq, id, kind, at, data)
			VALUES (?, (SELECT COALESCE(max(seq), 0) + 1 FROM entries WHERE chat_id = ?), ?, ?, ?, ?)`},
		{&s.lastSeq, `SELECT COALESCE(max(seq), 0) FROM session WHERE chat_id = ?`},
		{&s.addMessage, `INSERT INTO session(chat_id, seq, message) VALUES (?,?,?)`},
	} {
		if *p.stmt, err = db.PrepareContext(ctx, p.sql); err != nil {
			s.Close()
			return nil, fmt.Errorf("open chats: prepare %q: %w", p.sql, err)
		}
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.touch, s.addEntry, s.lastSeq, s.addMessage} {
		if st != nil {
			st.Close()
		}
	}
	return errors.Join(s.ro.Close(), s.db.Close())
}

// NewID returns a random identifier with a readable prefix.
func NewID(prefix string) string {
	var b [9]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// MaxTitle bounds chat titles, in characters.
const MaxTitle = 200

func cleanTitle(t string) string {
	t = strings.Join(strings.Fields(t), " ")
	if r := []rune(t); len(r) > MaxTitle {
		t = string(r[:MaxTitle])
	}
	return t
}

// Create adds a chat.
func (s *Store) Create(ctx context.Context, title, origin string) (*Chat, error) {
	now := time.Now()
	c := &Chat{ID: NewID("chat"), Title: cleanTitle(title), CreatedAt: now, UpdatedAt: now, Origin: origin}
	if c.Title == "" {
		c.Title = "New chat"
	}
	if c.Origin == "" {
		c.Origin = "user"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO chats(id, title, created_at, updated_at, origin) VALUES (?,?,?,?,?)`,
		c.ID, c.Title, now.UnixMilli(), now.UnixMilli(), c.Origin)
	if err != nil {
		return nil, fmt.Errorf("create chat: %w", err)
	}
	return c, nil
}

// Get returns one chat.
func (s *Store) Get(ctx context.Context, id string) (*Chat, error) {
	var c Chat
	var created, updated int64
	err := s.ro.QueryRowContext(ctx, `SELECT id, title, created_at, updated_at, unread, origin FROM chats WHERE id = ?`, id).
		Scan(&c.ID, &c.Title, &created, &updated, &c.Unread, &c.Origin)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get chat %s: %w", id, err)
	}
	c.CreatedAt, c.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return &c, nil
}

// List returns every chat, most recently updated first.
func (s *Store) List(ctx context.Context) ([]Chat, error) {
	rows, err := s.ro.QueryContext(ctx, `SELECT id, title, created_at, updated_at, unread, origin FROM chats ORDER BY updated_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	out := []Chat{}
	for rows.Next() {
		var c Chat
		var created, updated int64
		if err := rows.Scan(&c.ID, &c.Title, &created, &updated, &c.Unread, &c.Origin); err != nil {
			return nil, err
		}
		c.CreatedAt, c.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *Store) exec(ctx context.Context, what, id, q string, args ...any) error {
	r, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s chat %s: %w", what, id, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Rename changes a chat's title.
func (s *Store) Rename(ctx context.Context, id, title string) error {
	title = cleanTitle(title)
	if title == "" {
		return errors.New("a chat title cannot be empty")
	}
	return s.exec(ctx, "rename", id, `UPDATE chats SET title = ? WHERE id = ?`, title, id)
}

// Delete removes a chat with its transcript and session.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.exec(ctx, "delete", id, `DELETE FROM chats WHERE id = ?`, id)
}

// SetUnread marks a chat as having (or not) messages the user has not seen.
func (s *Store) SetUnread(ctx context.Context, id string, unread bool) error {
	return s.exec(ctx, "mark", id, `UPDATE chats SET unread = ? WHERE id = ?`, unread, id)
}

// Append adds a transcript entry (assigning its ID when empty) and bumps the
// chat to the top of the list.
func (s *Store) Append(ctx context.Context, chatID string, e *Entry) error {
	if e.ID == "" {
		e.ID = NewID(e.Kind)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	r, err := tx.StmtContext(ctx, s.touch).ExecContext(ctx, e.At.UnixMilli(), chatID)
	if err != nil {
		return fmt.Errorf("append to chat %s: %w", chatID, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	_, err = tx.StmtContext(ctx, s.addEntry).ExecContext(ctx, chatID, chatID, e.ID, e.Kind, e.At.UnixMilli(), string(e.Data))
	if err != nil {
		return fmt.Errorf("append to chat %s: %w", chatID, err)
	}
	return tx.Commit()
}

// UpdateEntry replaces the data of an entry (a tool card that finished, an
// approval that was answered).
func (s *Store) UpdateEntry(ctx context.Context, chatID, entryID string, data json.RawMessage) error {
	r, err := s.db.ExecContext(ctx, `UPDATE entries SET data = ? WHERE chat_id = ? AND id = ?`, string(data), chatID, entryID)
	if err != nil {
		return fmt.Errorf("update entry of chat %s: %w", chatID, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("update entry %s of chat %s: %w", entryID, chatID, ErrEntryNotFound)
	}
	return nil
}

// Transcript returns a chat's entries in order.
func (s *Store) Transcript(ctx context.Context, chatID string) ([]Entry, error) {
	if _, err := s.Get(ctx, chatID); err != nil {
		return nil, err
	}
	rows, err := s.ro.QueryContext(ctx, `SELECT id, kind, at, data FROM entries WHERE chat_id = ? ORDER BY seq`, chatID)
	if err != nil {
		return nil, fmt.Errorf("transcript of chat %s: %w", chatID, err)
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var at int64
		var data string
		if err := rows.Scan(&e.ID, &e.Kind, &at, &data); err != nil {
			return nil, err
		}
		e.At, e.Data = time.UnixMilli(at), json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Session returns the chat's agent conversation.
func (s *Store) Session(ctx context.Context, chatID string) ([]llm.Message, error) {
	rows, err := s.ro.QueryContext(ctx, `SELECT message FROM session WHERE chat_id = ? ORDER BY seq`, chatID)
	if err != nil {
		return nil, fmt.Errorf("session of chat %s: %w", chatID, err)
	}
	defer rows.Close()
	var out []llm.Message
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var m llm.Message
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, fmt.Errorf("session of chat %s: damaged message: %w", chatID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// AppendSession adds messages to the chat's agent conversation in one transaction.
func (s *Store) AppendSession(ctx context.Context, chatID string, msgs ...llm.Message) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var next int
	if err := tx.StmtContext(ctx, s.lastSeq).QueryRowContext(ctx, chatID).Scan(&next); err != nil {
		return err
	}
	add := tx.StmtContext(ctx, s.addMessage)
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		next++
		if _, err := add.ExecContext(ctx, chatID, next, string(b)); err != nil {
			return fmt.Errorf("save session of chat %s: %w", chatID, err)
		}
	}
	return tx.Commit()
}

// ReplaceSession replaces the chat's whole agent conversation in one
// transaction: a compaction put a summary in place of its older part.
func (s *Store) ReplaceSession(ctx context.Context, chatID string, msgs ...llm.Message) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM session WHERE chat_id = ?`, chatID); err != nil {
		return fmt.Errorf("replace session of chat %s: %w", chatID, err)
	}
	add := tx.StmtContext(ctx, s.addMessage)
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := add.ExecContext(ctx, chatID, i+1, string(b)); err != nil {
			return fmt.Errorf("replace session of chat %s: %w", chatID, err)
		}
	}
	return tx.Commit()
}

// File is an uploaded file registered under an opaque token.
type File struct {
	Token     string
	Name      string
	MIME      string
	Size      int64
	Path      string
	CreatedAt time.Time
}

// RegisterFile records an uploaded file.
func (s *Store) RegisterFile(ctx context.Context, f File) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO files(token, name, mime, size, path, created_at) VALUES (?,?,?,?,?,?)`,
		f.Token, f.Name, f.MIME, f.Size, f.Path, f.CreatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("register upload: %w", err)
	}
	return nil
}

// ErrNoFile reports an unknown upload token.
var ErrNoFile = errors.New("no such file")

// File returns the upload registered under token.
func (s *Store) File(ctx context.Context, token string) (*File, error) {
	var f File
	var created int64
	err := s.ro.QueryRowContext(ctx, `SELECT token, name, mime, size, path, created_at FROM files WHERE token = ?`, token).
		Scan(&f.Token, &f.Name, &f.MIME, &f.Size, &f.Path, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoFile
	}
	if err != nil {
		return nil, fmt.Errorf("look up file: %w", err)
	}
	f.CreatedAt = time.UnixMilli(created)
	return &f, nil
}
