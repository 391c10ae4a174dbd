// Package threads reads whole conversations from the mail mirror for the
// background consumers that reason about threads rather than messages: the
// mail→wiki promotion and the Action Center's mail scanner. It gives them
// one thread reader, one content hash, one deterministic noise prefilter and
// one chronological rendering, so both decide "noise" and "changed" alike.
package threads

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// ErrNoMirror reports that the mirror database does not exist yet.
var ErrNoMirror = errors.New("the mail mirror does not exist yet; run 'steward mail backfill'")

// ErrNotFound reports an unknown thread, or one whose messages are all deleted.
var ErrNotFound = errors.New("thread not found")

// Reader reads threads from the mail mirror (STEWARD_HOME/mail/mail.db),
// read-only: it never blocks the mirror's writer.
type Reader struct {
	db *sql.DB
	// headerCols selects the list headers, or empty strings on a mirror
	// older than the migration that stores them.
	headerCols string
}

// Open opens the mirror at dbPath read-only.
func Open(ctx context.Context, dbPath string) (*Reader, error) {
	if _, err := os.Stat(dbPath); err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoMirror, dbPath)
	}
	db, err := sqlitedb.Open(ctx, dbPath, sqlitedb.Options{ReadOnly: true, MaxOpenConns: 4})
	if err != nil {
		return nil, fmt.Errorf("open mail mirror %s for thread reading: %w", dbPath, err)
	}
	r := &Reader{db: db, headerCols: "'', '', ''"}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'list_id'").Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("inspect mail mirror %s: %w", dbPath, err)
	}
	if n == 1 {
		r.headerCols = "m.list_id, m.precedence, m.auto_submitted"
	}
	return r, nil
}

// Close closes the reader's connections.
func (r *Reader) Close() error { return r.db.Close() }

// ListOptions bound Recent.
type ListOptions struct {
	// Since keeps threads whose last activity is at or after it (zero: no bound).
	Since time.Time
	// Limit caps the threads returned (0: no limit).
	Limit int
}

// Summary is a thread without its messages.
type Summary struct {
	ID       int64
	Account  string
	Subject  string
	FirstAt  time.Time
	LastAt   time.Time
	Messages int
}

// Key is the thread's source identity ("thread:<id>").
func (s Summary) Key() string { return Key(s.ID) }

// Key is the source identity of thread id, as promotion state and Action
// Center items record it.
func Key(id int64) string { return "thread:" + strconv.FormatInt(id, 10) }

// Recent lists threads that still hold a message, most recent activity first.
func (r *Reader) Recent(ctx context.Context, opts ListOptions) ([]Summary, error) {
	q := `SELECT t.id, a.name, t.subject_norm, t.first_at, t.last_at, t.message_count
		FROM threads t JOIN accounts a ON a.id = t.account_id
		WHERE t.message_count > 0 AND t.last_at >= ? ORDER BY t.last_at DESC, t.id DESC`
	args := []any{opts.Since.Unix()}
	if opts.Since.IsZero() {
		args[0] = int64(0)
	}
	if opts.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, opts.Limit)
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list recent threads: %w", err)
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var s Summary
		var first, last int64
		if err := rows.Scan(&s.ID, &s.Account, &s.Subject, &first, &last, &s.Messages); err != nil {
			return nil, fmt.Errorf("list recent threads: %w", err)
		}
		s.FirstAt, s.LastAt = time.Unix(first, 0), time.Unix(last, 0)
		out = append(out, s)
	}
	return out, rows.Err()
}

// MessageRef is a message's identity without its content.
type MessageRef struct {
	ID        int64
	MessageID string
	ThreadID  int64
	Date      time.Time
	// Ingested is when the mirror first stored the message (the Action
	// Center's re-enable cutoff compares it, not the message's date).
	Ingested time.Time
}

// MessagesSince lists non-deleted messages with a mirror id above afterID
// dated at or after since (zero: no bound), ascending, at most limit (0: no
// limit). Mirror ids grow with the message date, so a ledger of the highest
// id seen finds the genuinely new messages.
func (r *Reader) MessagesSince(ctx context.Context, afterID int64, since time.Time, limit int) ([]MessageRef, error) {
	var from int64
	if !since.IsZero() {
		from = since.Unix()
	}
	q := `SELECT id, message_id, coalesce(thread_id, 0), date, ingested_at FROM messages
		WHERE id > ? AND date >= ? AND deleted_at IS NULL ORDER BY id`
	args := []any{afterID, from}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list messages after %d: %w", afterID, err)
	}
	defer rows.Close()
	var out []MessageRef
	for rows.Next() {
		var m MessageRef
		var date, ingested int64
		if err := rows.Scan(&m.ID, &m.MessageID, &m.ThreadID, &date, &ingested); err != nil {
			return nil, fmt.Errorf("list messages after %d: %w", afterID, err)
		}
		m.Date, m.Ingested = time.Unix(date, 0), time.Unix(ingested, 0)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Thread is a conversation with its messages in date order.
type Thread struct {
	ID       int64
	Account  string
	Subject  string
	FirstAt  time.Time
	LastAt   time.Time
	Messages []Message
}

// Message is one message of a thread.
type Message struct {
	// ID is the mirror row id, the id read_message takes.
	ID int64
	// MessageID is the RFC 5322 Message-ID without angle brackets.
	MessageID string
	Account   string
	Mailbox   string
	// Role is the mailbox's role: inbox, sent, drafts, trash, junk, archive,
	// all, or "" for an ordinary folder.
	Role      string
	FromName  string
	FromAddr  string
	To, Cc    string
	Subject   string
	Date      time.Time
	Body      string
	BodyState string
	Junk      bool
	FromMe    bool
	Seen      bool
	// ListID, Precedence and AutoSubmitted are the list and bulk headers
	// (the latter two lower-cased); empty when absent.
	ListID, Precedence, AutoSubmitted string
	Attachments                       []Attachment
}

// Attachment is an attachment's metadata; its bytes are in the mirror's blob
// store under SHA256 (empty when Mail has not downloaded the content).
type Attachment struct {
	ID          int64
	Part        string
	Filename    string
	ContentType string
	Size        int64
	SHA256      string
	Inline      bool
}

// Key is the thread's source identity ("thread:<id>").
func (t *Thread) Key() string { return Key(t.ID) }

// Hash is the hex SHA-256 over the ordered subjects and bodies of the whole
// thread: a new reply or an edited body changes it, a flag change does not.
func (t *Thread) Hash() string {
	h := sha256.New()
	for _, m := range t.Messages {
		hashMessage(h, m.Subject, m.Body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashMessage(h io.Writer, subject, body string) {
	// Length prefixes keep "ab"+"c" and "a"+"bc" apart.
	fmt.Fprintf(h, "%d:%s%d:%s", len(subject), subject, len(body), body)
}

// hashChunk bounds the threads of one Hashes query.
const hashChunk = 500

// Hashes returns the Hash of each listed thread (threads without a
// message are absent) reading only subjects and bodies, a few queries for
// the whole list: a caller that skips unchanged threads need not load them.
func (r *Reader) Hashes(ctx context.Context, ids []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), hashChunk)
		list, _ := json.Marshal(ids[:n])
		ids = ids[n:]
		rows, err := r.db.QueryContext(ctx, `SELECT m.thread_id, m.subject, m.body FROM messages m
			WHERE m.thread_id IN (SELECT value FROM json_each(?)) AND m.deleted_at IS NULL ORDER BY m.thread_id, m.date, m.id`, string(list))
		if err != nil {
			return nil, fmt.Errorf("hash threads: %w", err)
		}
		cur, h := int64(0), hash.Hash(nil)
		for rows.Next() {
			var id int64
			var subject, body string
			if err := rows.Scan(&id, &subject, &body); err != nil {
				rows.Close()
				return nil, fmt.Errorf("hash threads: %w", err)
			}
			if h == nil || id != cur {
				if h != nil {
					out[cur] = hex.EncodeToString(h.Sum(nil))
				}
				cur, h = id, sha256.New()
			}
			hashMessage(h, subject, body)
		}
		if h != nil {
			out[cur] = hex.EncodeToString(h.Sum(nil))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("hash threads: %w", err)
		}
	}
	return out, nil
}

// MessageIDs lists the RFC Message-IDs of the thread's messages in order,
// skipping messages that have none.
func (t *Thread) MessageIDs() []string {
	out := make([]string, 0, len(t.Messages))
	for _, m := range t.Messages {
		if m.MessageID != "" {
			out = append(out, m.MessageID)
		}
	}
	return out
}

// Representative is the newest message the user did not send, the anchor of
// the thread's identity for a reply; nil when the user sent every message.
func (t *Thread) Representative() *Message {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if !t.Messages[i].FromMe {
			return &t.Messages[i]
		}
	}
	return nil
}

// Thread loads thread id with every non-deleted message in date order.
func (r *Reader) Thread(ctx context.Context, id int64) (*Thread, error) {
	t := &Thread{ID: id}
	var first, last int64
	var count int
	err := r.db.QueryRowContext(ctx, `SELECT a.name, t.subject_norm, t.first_at, t.last_at, t.message_count
		FROM threads t JOIN accounts a ON a.id = t.account_id WHERE t.id = ?`, id).Scan(&t.Account, &t.Subject, &first, &last, &count)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && count == 0) {
		return nil, fmt.Errorf("thread %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read thread %d: %w", id, err)
	}
	t.FirstAt, t.LastAt = time.Unix(first, 0), time.Unix(last, 0)
	rows, err := r.db.QueryContext(ctx, `SELECT m.id, m.message_id, a.name, b.name, b.role, m.from_name, m.from_addr, m.to_text, m.cc_text,
		m.subject, m.date, m.body, m.body_state, m.junk, m.from_me, m.seen, `+r.headerCols+`
		FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id JOIN accounts a ON a.id = m.account_id
		WHERE m.thread_id = ? AND m.deleted_at IS NULL ORDER BY m.date, m.id`, id)
	if err != nil {
		return nil, fmt.Errorf("read messages of thread %d: %w", id, err)
	}
	defer rows.Close()
	byID := map[int64]int{}
	for rows.Next() {
		var m Message
		var date int64
		if err := rows.Scan(&m.ID, &m.MessageID, &m.Account, &m.Mailbox, &m.Role, &m.FromName, &m.FromAddr, &m.To, &m.Cc,
			&m.Subject, &date, &m.Body, &m.BodyState, &m.Junk, &m.FromMe, &m.Seen, &m.ListID, &m.Precedence, &m.AutoSubmitted); err != nil {
			return nil, fmt.Errorf("read messages of thread %d: %w", id, err)
		}
		m.Date = time.Unix(date, 0)
		byID[m.ID] = len(t.Messages)
		t.Messages = append(t.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read messages of thread %d: %w", id, err)
	}
	if len(t.Messages) == 0 {
		return nil, fmt.Errorf("thread %d: %w", id, ErrNotFound)
	}
	if err := r.attachments(ctx, t, byID); err != nil {
		return nil, err
	}
	return t, nil
}

func (r *Reader) attachments(ctx context.Context, t *Thread, byID map[int64]int) error {
	rows, err := r.db.QueryContext(ctx, `SELECT x.id, x.message_id, x.part, x.filename, x.content_type, x.size, coalesce(x.sha256, ''), x.inline
		FROM attachments x JOIN messages m ON m.id = x.message_id
		WHERE m.thread_id = ? AND m.deleted_at IS NULL ORDER BY x.message_id, x.id`, t.ID)
	if err != nil {
		return fmt.Errorf("read attachments of thread %d: %w", t.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a Attachment
		var msg int64
		if err := rows.Scan(&a.ID, &msg, &a.Part, &a.Filename, &a.ContentType, &a.Size, &a.SHA256, &a.Inline); err != nil {
			return fmt.Errorf("read attachments of thread %d: %w", t.ID, err)
		}
		if i, ok := byID[msg]; ok {
			t.Messages[i].Attachments = append(t.Messages[i].Attachments, a)
		}
	}
	return rows.Err()
}

// lower folds an address or subject for the prefilter's comparisons.
func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
