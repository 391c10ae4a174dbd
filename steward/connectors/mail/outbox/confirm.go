package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/unicode/norm"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/writeops"
)

// Expectation is the observable outcome a send's confirmation looks for.
type Expectation struct {
	Account   string   `json:"account"`
	Mailbox   string   `json:"mailboxRole"`
	From      string   `json:"from"`
	Subject   string   `json:"subject"`
	To        []string `json:"to"`
	Cc        []string `json:"cc,omitempty"`
	InReplyTo string   `json:"inReplyTo,omitempty"`
	MessageID string   `json:"messageId"`
	// BccOnly sends have no recipient evidence in a Sent copy's headers.
	BccOnly bool `json:"bccOnly,omitempty"`
}

// Expect derives m's expectation.
func Expect(m *Message) Expectation {
	return Expectation{Account: m.Account, Mailbox: string(stewardmail.RoleSent), From: m.From, Subject: m.Subject,
		To: normSet(m.To), Cc: normSet(m.Cc), InReplyTo: m.InReplyTo, MessageID: m.MessageID,
		BccOnly: len(m.To)+len(m.Cc) == 0}
}

// MirrorDB reads the mail mirror (mail.db) for replies, mail attachments
// and confirmation. Open it read-only.
type MirrorDB struct {
	DB       *sql.DB
	Accounts []stewardmail.Account

	once    sync.Once
	sentQ   *sql.Stmt
	prepErr error
}

// sentSQL finds the candidates of a send: active messages of the account's
// Sent-role mailboxes with the subject, dated in the window. Mirror ids are
// date-ordered, so the id range keeps the search on messages_mailbox.
const sentSQL = `SELECT m.id, m.message_id, m.from_addr, m.to_text, m.cc_text, m.body, m.in_reply_to, m.refs, b.name, m.date
	FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id JOIN accounts a ON a.id = b.account_id
	WHERE a.name = ? AND b.role = 'sent' AND m.id BETWEEN ? AND ? AND m.date BETWEEN ? AND ?
	AND m.subject = ? AND m.deleted_at IS NULL`

// Confirmation window (spec): one minute before the attempt to 24 h after.
const (
	windowBefore = time.Minute
	windowAfter  = 24 * time.Hour
	idShift      = 20 // mirror ids are unix seconds << 20 | n
)

// Evidence is what a confirmation found.
type Evidence struct {
	MirrorID  string `json:"mirrorId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	Mailbox   string `json:"mailbox,omitempty"`
	Date      string `json:"date,omitempty"`
	// Candidates counts Sent messages with the expected subject in the window.
	Candidates int `json:"candidates"`
	// Mismatches says why candidates were rejected.
	Mismatches []string `json:"mismatches,omitempty"`
}

// Confirm is the journal's confirmer for mail.send and mail.reply (the
// spec's evidence rules): exactly one active message in the account's
// Sent-role mailboxes, dated within the window around the actual attempt,
// from an owned address equal to the message's from, with the expected
// subject, exactly the expected To and Cc sets, the full normalised body
// and, for replies, the link to the original. Several matches are
// ambiguous; BCC-only sends are never confirmed.
func (d *MirrorDB) Confirm(ctx context.Context, op writeops.Operation) (writeops.Check, error) {
	var m Message
	if err := op.Decode(&m); err != nil {
		return writeops.Check{}, fmt.Errorf("journaled message is unreadable: %w", err)
	}
	ev := Evidence{}
	if op.AttemptedAt.IsZero() {
		return writeops.Check{Note: "never attempted", Evidence: ev}, nil
	}
	if len(m.To)+len(m.Cc) == 0 {
		return writeops.Check{Note: "BCC-only send: a Sent copy carries no recipient evidence; review it by hand", Evidence: ev}, nil
	}
	var acct *stewardmail.Account
	for i := range d.Accounts {
		if d.Accounts[i].Name == m.Account {
			acct = &d.Accounts[i]
		}
	}
	if acct == nil {
		return writeops.Check{}, fmt.Errorf("account %s is not configured", m.Account)
	}
	lo := op.AttemptedAt.Add(-windowBefore).Unix()
	hi := op.AttemptedAt.Add(windowAfter).Unix()
	// Prepared once: a pass asks this for every row it checks.
	d.once.Do(func() { d.sentQ, d.prepErr = d.DB.PrepareContext(context.WithoutCancel(ctx), sentSQL) })
	if d.prepErr != nil {
		return writeops.Check{}, fmt.Errorf("search the Sent mailboxes: %w", d.prepErr)
	}
	rows, err := d.sentQ.QueryContext(ctx,
		m.Account, lo<<idShift, (hi+1)<<idShift-1, lo, hi, m.Subject)
	if err != nil {
		return writeops.Check{}, fmt.Errorf("search the Sent mailboxes: %w", err)
	}
	defer rows.Close()
	wantTo, wantCc, wantBody := normSet(m.To), normSet(m.Cc), normBody(m.Body)
	var match []Evidence
	for rows.Next() {
		var id, date int64
		var msgID, from, to, cc, body, irt, refs, mailbox string
		if err := rows.Scan(&id, &msgID, &from, &to, &cc, &body, &irt, &refs, &mailbox, &date); err != nil {
			return writeops.Check{}, err
		}
		ev.Candidates++
		var why string
		switch {
		case !acct.Owns(from) || !strings.EqualFold(from, m.From):
			why = "sender " + from
		case !slices.Equal(normSet(addrsIn(to)), wantTo):
			why = "To differs"
		case !slices.Equal(normSet(addrsIn(cc)), wantCc):
			why = "Cc differs"
		case normBody(body) != wantBody:
			why = "body differs"
		case m.InReplyTo != "" && !slices.Contains(strings.Fields(irt), m.InReplyTo) && !slices.Contains(strings.Fields(refs), m.InReplyTo):
			why = "not linked to the original"
		}
		if why != "" {
			ev.Mismatches = append(ev.Mismatches, fmt.Sprintf("%d: %s", id, why))
			continue
		}
		match = append(match, Evidence{MirrorID: strconv.FormatInt(id, 10), MessageID: msgID, Mailbox: mailbox,
			Date: time.Unix(date, 0).UTC().Format(time.RFC3339)})
	}
	if err := rows.Err(); err != nil {
		return writeops.Check{}, err
	}
	switch len(match) {
	case 1:
		found := match[0]
		found.Candidates, found.Mismatches = ev.Candidates, ev.Mismatches
		return writeops.Check{Confirmed: true, Evidence: found}, nil
	case 0:
		note := "no matching message in the Sent mailbox yet"
		if ev.Candidates > 0 {
			note = fmt.Sprintf("%d Sent message(s) with this subject, none matching", ev.Candidates)
		}
		return writeops.Check{Note: note, Evidence: ev}, nil
	default:
		for _, x := range match {
			ev.Mismatches = append(ev.Mismatches, x.MirrorID+": also matches")
		}
		return writeops.Check{Note: fmt.Sprintf("%d Sent messages match: ambiguous", len(match)), Evidence: ev}, nil
	}
}

var addrRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^\s<>,;"'()]+@[^\s<>,;"'()]+`) })

// addrsIn extracts the addresses of a mirrored "Name <addr>, addr" list.
func addrsIn(s string) []string { return addrRE().FindAllString(s, -1) }

func normSet(list []string) []string {
	out := make([]string, 0, len(list))
	for _, a := range list {
		a = strings.ToLower(strings.TrimSpace(a))
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// normBody compares bodies by content: NFC, LF line ends, trailing spaces
// on each line and trailing blank lines removed.
func normBody(s string) string {
	s = norm.NFC.String(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"))
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// Original reads the message a reply answers.
func (d *MirrorDB) Original(ctx context.Context, id string) (Original, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return Original{}, inputErr("messageId %q is not a message id from search_mail", id)
	}
	var o Original
	var refs, to, cc string
	var date int64
	var deleted sql.NullInt64
	err = d.DB.QueryRowContext(ctx, `SELECT a.name, m.message_id, m.refs, m.subject, m.from_addr, m.from_name, m.to_text, m.cc_text,
		m.date, m.body, m.deleted_at FROM messages m JOIN accounts a ON a.id = m.account_id WHERE m.id = ?`, n).
		Scan(&o.Account, &o.MessageID, &refs, &o.Subject, &o.From, &o.FromName, &to, &cc, &date, &o.Body, &deleted)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && deleted.Valid) {
		return Original{}, inputErr("message %s was not found in the mirror (or was deleted)", id)
	}
	if err != nil {
		return Original{}, fmt.Errorf("read message %s: %w", id, err)
	}
	if o.MessageID == "" {
		return Original{}, inputErr("message %s has no Message-ID, so a reply cannot be linked to it", id)
	}
	o.ID, o.References, o.To, o.Cc, o.Date = id, strings.Fields(refs), addrsIn(to), addrsIn(cc), time.Unix(date, 0)
	o.ReplyTo = d.replyTo(ctx, n)
	return o, nil
}

// replyTo reads Reply-To from the message's file, when it is a plain
// RFC 5322 file (Maildir); other stores answer to From.
func (d *MirrorDB) replyTo(ctx context.Context, id int64) []string {
	var path string
	if d.DB.QueryRowContext(ctx, `SELECT path FROM message_paths WHERE message_id = ? LIMIT 1`, id).Scan(&path) != nil ||
		strings.HasSuffix(path, ".emlx") {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	msg, err := mail.ReadMessage(f)
	if err != nil {
		return nil
	}
	list, err := msg.Header.AddressList("Reply-To")
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range list {
		out = append(out, strings.ToLower(a.Address))
	}
	return out
}

// Attachment looks up a mirrored attachment of an active message.
func (d *MirrorDB) Attachment(ctx context.Context, id string) (MirrorAttachment, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return MirrorAttachment{}, inputErr("attachmentId %q is not an attachment id from read_message", id)
	}
	var a MirrorAttachment
	var sha sql.NullString
	err = d.DB.QueryRowContext(ctx, `SELECT a.filename, a.content_type, a.size, a.sha256 FROM attachments a JOIN messages m ON m.id = a.message_id
		WHERE a.id = ? AND m.deleted_at IS NULL`, n).Scan(&a.Filename, &a.ContentType, &a.Size, &sha)
	if errors.Is(err, sql.ErrNoRows) {
		return a, inputErr("attachment %s was not found in the mirror", id)
	}
	a.SHA256 = sha.String
	return a, err
}
