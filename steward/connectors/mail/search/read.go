package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Read bounds.
const (
	DefaultBodyChars   = 6000
	MaxBodyChars       = 20000
	DefaultThreadLimit = 5
	MaxThreadLimit     = 10
	threadBodyChars    = 1500
)

// ErrNotFound reports an unknown or soft-deleted message, thread or attachment.
var ErrNotFound = errors.New("not found")

// ReadRequest selects a message and a range of its body.
type ReadRequest struct {
	ID       string `json:"id" jsonschema:"message id from search_mail"`
	Offset   int    `json:"offset,omitempty" jsonschema:"first body character to return (from nextOffset)"`
	MaxChars int    `json:"maxChars,omitempty" jsonschema:"body characters to return, default 6000, at most 20000"`
}

// AttachmentView is attachment metadata.
type AttachmentView struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	Inline      bool   `json:"inline,omitempty"`
	// Available is false when Mail has not downloaded the content.
	Available bool `json:"available"`
}

// MessageView is a read message.
type MessageView struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Subject  string `json:"subject"`
	Sender   string `json:"sender"`
	To       string `json:"to,omitempty"`
	Cc       string `json:"cc,omitempty"`
	Date     string `json:"date"`
	Account  string `json:"account"`
	Mailbox  string `json:"mailbox"`
	Role     string `json:"role,omitempty"`
	ThreadID string `json:"threadId,omitempty"`
	Unread   bool   `json:"unread"`
	Flagged  bool   `json:"flagged"`
	// Body is the requested range of the best body available.
	Body string `json:"body"`
	// BodyState is full, partial or none (the mirror's), or full when the
	// body came from the mail client live.
	BodyState   string           `json:"bodyState"`
	BodySource  string           `json:"bodySource"` // mirror or live
	Offset      int              `json:"offset"`
	NextOffset  *int             `json:"nextOffset,omitempty"`
	TotalChars  int              `json:"totalChars"`
	Attachments []AttachmentView `json:"attachments"`
	MailURL     string           `json:"mailUrl"`
	Notice      string           `json:"notice,omitempty"`
}

func parseID(kind, s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id <= 0 {
		return 0, argErr("%s id %q is not a number from a search result", kind, s)
	}
	return id, nil
}

// Read returns one message with a page of its body, its attachments and
// deep link. A soft-deleted message is refused. A body that is not full and
// shorter than 20 characters is asked from the mail client; the live text is
// used only when it is longer, and a failed or poorer live read keeps the
// mirrored body and state.
func (e *Engine) Read(ctx context.Context, req ReadRequest) (*MessageView, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	id, err := parseID("message", req.ID)
	if err != nil {
		return nil, err
	}
	var v MessageView
	var date int64
	var thread sql.NullInt64
	var deleted sql.NullInt64
	var seen bool
	var fromName, fromAddr, msgID, body string
	var remoteKey sql.NullString
	err = e.db.QueryRowContext(ctx, `SELECT m.subject, m.from_name, m.from_addr, m.to_text, m.cc_text, m.date, a.name, b.name, b.role,
		m.thread_id, m.seen, m.flagged, m.body, m.body_state, m.message_id, m.deleted_at,
		(SELECT file_key FROM message_paths p WHERE p.message_id = m.id ORDER BY p.mailbox_id = m.mailbox_id DESC LIMIT 1)
		FROM messages m JOIN accounts a ON a.id = m.account_id JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.id = ?`, id).
		Scan(&v.Subject, &fromName, &fromAddr, &v.To, &v.Cc, &date, &v.Account, &v.Mailbox, &v.Role, &thread, &seen, &v.Flagged,
			&body, &v.BodyState, &msgID, &deleted, &remoteKey)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read message %d: %w", id, err)
	}
	if deleted.Valid {
		return nil, fmt.Errorf("message %d was deleted from the mail store: %w", id, ErrNotFound)
	}
	v.ID, v.Sender, v.Unread = req.ID, formatSender(fromName, fromAddr), !seen
	v.Date = time.Unix(date, 0).In(time.Local).Format(time.RFC3339)
	if thread.Valid {
		v.ThreadID = strconv.FormatInt(thread.Int64, 10)
	}
	path, _ := e.messagePath(ctx, id)
	v.MailURL = MailURL(msgID, path)
	v.BodySource = "mirror"
	if v.BodyState != "full" && utf8.RuneCountInString(strings.TrimSpace(body)) < minUsableBody && e.live != nil {
		mailID, _ := strconv.ParseInt(remoteKey.String, 10, 64)
		live, err := e.live.ReadBody(ctx, LiveRef{MailID: mailID, MessageID: msgID, Account: v.Account, Mailbox: v.Mailbox})
		switch {
		case err != nil:
			v.Notice = "the mirror has no complete body and Mail could not be asked (" + err.Error() + "); the mirrored body is shown"
		case utf8.RuneCountInString(strings.TrimSpace(live)) > utf8.RuneCountInString(strings.TrimSpace(body)):
			body, v.BodyState, v.BodySource = live, "full", "live"
		}
	}
	v.Body, v.Offset, v.NextOffset, v.TotalChars = page(body, req.Offset, clampChars(req.MaxChars))
	v.Attachments, err = e.attachments(ctx, id)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func clampChars(n int) int {
	if n <= 0 {
		return DefaultBodyChars
	}
	return min(n, MaxBodyChars)
}

// page cuts [offset, offset+n) characters out of s.
func page(s string, offset, n int) (string, int, *int, int) {
	runes := []rune(s)
	total := len(runes)
	offset = max(0, min(offset, total))
	end := min(total, offset+n)
	var next *int
	if end < total {
		e := end
		next = &e
	}
	return string(runes[offset:end]), offset, next, total
}

func (e *Engine) messagePath(ctx context.Context, id int64) (string, error) {
	var p string
	err := e.db.QueryRowContext(ctx, `SELECT p.path FROM message_paths p JOIN messages m ON m.id = p.message_id
		WHERE p.message_id = ? ORDER BY p.mailbox_id = m.mailbox_id DESC LIMIT 1`, id).Scan(&p)
	return p, err
}

func (e *Engine) attachments(ctx context.Context, id int64) ([]AttachmentView, error) {
	rows, err := e.db.QueryContext(ctx, "SELECT id, filename, content_type, size, coalesce(declared_size, 0), inline, sha256 IS NOT NULL FROM attachments WHERE message_id = ? ORDER BY id", id)
	if err != nil {
		return nil, fmt.Errorf("list attachments: %w", err)
	}
	defer rows.Close()
	out := []AttachmentView{}
	for rows.Next() {
		var a AttachmentView
		var aid, declared int64
		if err := rows.Scan(&aid, &a.Filename, &a.ContentType, &a.Size, &declared, &a.Inline, &a.Available); err != nil {
			return nil, err
		}
		if !a.Available && a.Size == 0 {
			a.Size = declared
		}
		a.ID = strconv.FormatInt(aid, 10)
		out = append(out, a)
	}
	return out, rows.Err()
}

// ThreadRequest selects a page of a thread, newest messages first.
type ThreadRequest struct {
	ThreadID string `json:"threadId" jsonschema:"thread id from search_mail"`
	Offset   int    `json:"offset,omitempty" jsonschema:"messages to skip, newest first (from nextOffset)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"messages per page, default 5, at most 10"`
}

// ThreadMessage is one message of a thread page.
type ThreadMessage struct {
	ID        string `json:"id"`
	Sender    string `json:"sender"`
	Date      string `json:"date"`
	Mailbox   string `json:"mailbox"`
	Subject   string `json:"subject"`
	Body      string `json:"body"`
	BodyState string `json:"bodyState"`
	// Truncated says the body was cut; read_message returns the rest.
	Truncated   bool `json:"truncated,omitempty"`
	Attachments int  `json:"attachments,omitempty"`
}

// ThreadView is a page of a thread.
type ThreadView struct {
	ThreadID     string          `json:"threadId"`
	Subject      string          `json:"subject"`
	Participants string          `json:"participants"`
	MessageCount int             `json:"messageCount"`
	FirstAt      string          `json:"firstAt"`
	LastAt       string          `json:"lastAt"`
	Messages     []ThreadMessage `json:"messages"`
	Offset       int             `json:"offset"`
	NextOffset   *int            `json:"nextOffset,omitempty"`
}

// ReadThread returns a thread's newest messages first (the context most
// likely to answer), bodies cut to 1,500 characters, with the offset of
// older history.
func (e *Engine) ReadThread(ctx context.Context, req ThreadRequest) (*ThreadView, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	id, err := parseID("thread", req.ThreadID)
	if err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultThreadLimit
	}
	limit = min(limit, MaxThreadLimit)
	offset := max(0, req.Offset)
	v := ThreadView{ThreadID: req.ThreadID, Offset: offset, Messages: []ThreadMessage{}}
	var first, last int64
	err = e.db.QueryRowContext(ctx, "SELECT subject_norm, participants, message_count, first_at, last_at FROM threads WHERE id = ?", id).
		Scan(&v.Subject, &v.Participants, &v.MessageCount, &first, &last)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && v.MessageCount == 0) {
		return nil, fmt.Errorf("thread %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read thread %d: %w", id, err)
	}
	v.FirstAt = time.Unix(first, 0).In(time.Local).Format(time.RFC3339)
	v.LastAt = time.Unix(last, 0).In(time.Local).Format(time.RFC3339)
	rows, err := e.db.QueryContext(ctx, `SELECT m.id, m.from_name, m.from_addr, m.date, b.name, m.subject, substr(m.body, 1, ?), length(m.body) > ?, m.body_state,
		(SELECT count(*) FROM attachments a WHERE a.message_id = m.id)
		FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.thread_id = ? AND m.deleted_at IS NULL
		ORDER BY m.date DESC, m.id DESC LIMIT ? OFFSET ?`, threadBodyChars, threadBodyChars, id, limit+1, offset)
	if err != nil {
		return nil, fmt.Errorf("read thread %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m ThreadMessage
		var mid, date int64
		var name, addr string
		if err := rows.Scan(&mid, &name, &addr, &date, &m.Mailbox, &m.Subject, &m.Body, &m.Truncated, &m.BodyState, &m.Attachments); err != nil {
			return nil, err
		}
		m.ID, m.Sender = strconv.FormatInt(mid, 10), formatSender(name, addr)
		m.Date = time.Unix(date, 0).In(time.Local).Format(time.RFC3339)
		v.Messages = append(v.Messages, m)
	}
	if len(v.Messages) > limit {
		v.Messages = v.Messages[:limit]
		next := offset + limit
		v.NextOffset = &next
	}
	return &v, rows.Err()
}

// MailboxView is one mailbox with its counts.
type MailboxView struct {
	Name     string `json:"name"`
	Role     string `json:"role,omitempty"`
	Messages int    `json:"messages"`
	Unread   int    `json:"unread"`
}

// AccountView is an account and its mailboxes.
type AccountView struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Mailboxes []MailboxView `json:"mailboxes"`
}

// Mailboxes lists accounts and mailboxes with active and unread counts.
func (e *Engine) Mailboxes(ctx context.Context) ([]AccountView, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT a.name, a.kind, b.name, b.role,
		(SELECT count(*) FROM messages m WHERE m.mailbox_id = b.id AND m.deleted_at IS NULL),
		(SELECT count(*) FROM messages m WHERE m.mailbox_id = b.id AND m.deleted_at IS NULL AND m.seen = 0)
		FROM accounts a LEFT JOIN mailboxes b ON b.account_id = a.id ORDER BY a.name, b.role = '', b.name`)
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	defer rows.Close()
	var out []AccountView
	for rows.Next() {
		var acct, kind string
		var name, role sql.NullString
		var n, unread int
		if err := rows.Scan(&acct, &kind, &name, &role, &n, &unread); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Name != acct {
			out = append(out, AccountView{Name: acct, Kind: kind, Mailboxes: []MailboxView{}})
		}
		if name.Valid {
			a := &out[len(out)-1]
			a.Mailboxes = append(a.Mailboxes, MailboxView{Name: name.String, Role: role.String, Messages: n, Unread: unread})
		}
	}
	return out, rows.Err()
}

// AttachmentInfo locates an attachment's content.
type AttachmentInfo struct {
	Filename    string
	ContentType string
	Size        int64
	SHA256      string // "" when the content is not available
}

// Attachment looks up an attachment of an active message.
func (e *Engine) Attachment(ctx context.Context, attachmentID string) (AttachmentInfo, error) {
	id, err := parseID("attachment", attachmentID)
	if err != nil {
		return AttachmentInfo{}, err
	}
	var a AttachmentInfo
	var sha sql.NullString
	err = e.db.QueryRowContext(ctx, `SELECT a.filename, a.content_type, a.size, a.sha256 FROM attachments a JOIN messages m ON m.id = a.message_id
		WHERE a.id = ? AND m.deleted_at IS NULL`, id).Scan(&a.Filename, &a.ContentType, &a.Size, &sha)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("attachment %d: %w", id, ErrNotFound)
	}
	a.SHA256 = sha.String
	return a, err
}

// Locate returns a message's deep link and the path of its file.
func (e *Engine) Locate(ctx context.Context, messageID string) (mailURL, path string, err error) {
	id, err := parseID("message", messageID)
	if err != nil {
		return "", "", err
	}
	var msgID string
	var deleted sql.NullInt64
	err = e.db.QueryRowContext(ctx, "SELECT message_id, deleted_at FROM messages WHERE id = ?", id).Scan(&msgID, &deleted)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && deleted.Valid) {
		return "", "", fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", "", err
	}
	path, _ = e.messagePath(ctx, id)
	return MailURL(msgID, path), path, nil
}
