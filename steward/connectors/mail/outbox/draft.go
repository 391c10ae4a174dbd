package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/pathguard"
)

// DefaultMaxBytes bounds the attachments of one message (MAIL_SEND_MAX_BYTES).
const DefaultMaxBytes = 25 << 20

// AttachmentRef names a file to attach: a local path or a mirrored mail
// attachment id (from read_message).
type AttachmentRef struct {
	Path         string `json:"path,omitempty" jsonschema:"absolute path of a local file"`
	AttachmentID string `json:"attachmentId,omitempty" jsonschema:"attachment id from read_message"`
	// Filename and Size are filled in by Steward for the approval card.
	Filename string `json:"filename,omitempty" jsonschema:"filled in by Steward"`
	Size     int64  `json:"size,omitempty" jsonschema:"filled in by Steward"`
}

// Draft is the input of send_email and schedule_email, and (with
// ReplyToID) of reply_email.
type Draft struct {
	Account     string          `json:"account,omitempty" jsonschema:"account name (list_mailboxes); default: the account that owns from, or the only account that can send"`
	From        string          `json:"from,omitempty" jsonschema:"sender address; one of the account's own addresses"`
	To          []string        `json:"to,omitempty" jsonschema:"recipient addresses (use mcp__contacts__resolve_recipient for names first)"`
	Cc          []string        `json:"cc,omitempty"`
	Bcc         []string        `json:"bcc,omitempty"`
	Subject     string          `json:"subject,omitempty" jsonschema:"subject; for a reply default Re: of the original"`
	Body        string          `json:"body" jsonschema:"plain-text body"`
	Attachments []AttachmentRef `json:"attachments,omitempty"`
	// ReplyToID is the mirror id of the message replied to (reply_email).
	ReplyToID string `json:"messageId,omitempty" jsonschema:"reply_email: id of the message to answer, from search_mail or read_message"`
	// ReplyAll adds the original's other recipients to Cc (reply_email).
	ReplyAll bool `json:"replyAll,omitempty" jsonschema:"reply_email: also answer the original's other recipients"`
	// Quote appends the original as a quoted block (reply_email; default true).
	Quote *bool `json:"quote,omitempty" jsonschema:"reply_email: append the quoted original (default true)"`
	// SendAt is schedule_email's instant: RFC 3339 with an explicit offset.
	SendAt string `json:"sendAt,omitempty" jsonschema:"schedule_email: RFC 3339 instant with an explicit UTC offset, e.g. 2026-05-04T09:00:00+02:00"`
	// Preview is filled in by preflight: exactly what will be sent. It is
	// ignored on input.
	Preview *Preview `json:"preview,omitempty" jsonschema:"filled in by Steward: exactly what will be sent; ignored on input"`
}

// Preview shows the approval card exactly what will be sent.
type Preview struct {
	Account     string   `json:"account"`
	From        string   `json:"from"`
	To          []string `json:"to"`
	Cc          []string `json:"cc,omitempty"`
	Bcc         []string `json:"bcc,omitempty"`
	Subject     string   `json:"subject"`
	Body        string   `json:"body"`
	Attachments []string `json:"attachments,omitempty"`
	InReplyTo   string   `json:"inReplyTo,omitempty"`
	SendAtLocal string   `json:"sendAtLocal,omitempty"`
	Via         string   `json:"via"`
}

// Original is the message a reply answers, as the mirror knows it.
type Original struct {
	ID         string
	Account    string
	MessageID  string
	References []string
	Subject    string
	From       string
	FromName   string
	ReplyTo    []string
	To, Cc     []string
	Date       time.Time
	Body       string
}

// MirrorAttachment is a mirrored mail attachment.
type MirrorAttachment struct {
	Filename, ContentType, SHA256 string
	Size                          int64
}

// Mirror is what drafts need from the mail mirror.
type Mirror interface {
	Original(ctx context.Context, id string) (Original, error)
	Attachment(ctx context.Context, id string) (MirrorAttachment, error)
}

// ReadGuard is the sensitive-path policy for files to attach;
// *pathguard.Guard implements it.
type ReadGuard interface {
	Check(path string) (string, error)
}

// InputError is a draft the user or model must fix; nothing was sent.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErr(format string, args ...any) error { return &InputError{fmt.Sprintf(format, args...)} }

// Resolver validates and normalises drafts.
type Resolver struct {
	Accounts []stewardmail.Account
	Mirror   Mirror    // replies and mail attachments; nil refuses both
	Guard    ReadGuard // required for path attachments
	MaxBytes int64     // attachments total; DefaultMaxBytes when 0
	// CanSend reports how an account sends ("smtp host:port", "Mail.app"),
	// or an error saying why it cannot.
	CanSend func(a *stewardmail.Account) (string, error)
	Now     func() time.Time
	Local   *time.Location
}

// Resolved is a validated draft with its account and original.
type Resolved struct {
	Draft    Draft
	Account  *stewardmail.Account
	Original *Original
	SendAt   time.Time
	Body     string // the body as sent (with the quoted original)
	Subject  string
	Via      string
}

// Resolve validates d for the tool (send, reply or schedule) and returns it
// normalised, with the Preview filled in.
func (r *Resolver) Resolve(ctx context.Context, tool string, d Draft) (*Resolved, error) {
	d.Preview = nil
	res := &Resolved{}
	var err error
	if tool == ToolReply {
		if strings.TrimSpace(d.ReplyToID) == "" {
			return nil, inputErr("messageId is required: the id of the message to answer")
		}
		if r.Mirror == nil {
			return nil, inputErr("replies need the mail mirror, which is not available")
		}
		o, err := r.Mirror.Original(ctx, strings.TrimSpace(d.ReplyToID))
		if err != nil {
			return nil, err
		}
		res.Original = &o
		if d.Account == "" {
			d.Account = o.Account
		}
	} else if d.ReplyToID != "" || d.ReplyAll || d.Quote != nil {
		return nil, inputErr("messageId, replyAll and quote belong to reply_email")
	}
	if res.Account, err = r.account(d.Account, d.From); err != nil {
		return nil, err
	}
	d.Account = res.Account.Name
	if d.From == "" {
		d.From = res.Account.Sender()
	}
	d.From = strings.ToLower(strings.TrimSpace(d.From))
	if !res.Account.Owns(d.From) {
		return nil, inputErr("from %q is not an address of account %s (%s)", d.From, res.Account.Name, strings.Join(res.Account.Addresses, ", "))
	}
	if r.CanSend != nil {
		if res.Via, err = r.CanSend(res.Account); err != nil {
			return nil, inputErr("account %s cannot send: %v", res.Account.Name, err)
		}
	}
	if o := res.Original; o != nil {
		if len(d.To) == 0 {
			d.To = o.ReplyTo
			if len(d.To) == 0 {
				d.To = []string{o.From}
			}
		}
		if d.ReplyAll {
			d.Cc = append(d.Cc, o.To...)
			d.Cc = append(d.Cc, o.Cc...)
		}
		if d.Subject == "" {
			d.Subject = o.Subject
			if !hasRePrefix(d.Subject) {
				d.Subject = "Re: " + d.Subject
			}
		}
	}
	own := func(a string) bool { return res.Account.Owns(a) }
	if d.To, err = addresses("to", d.To, nil); err != nil {
		return nil, err
	}
	drop := own
	if res.Original == nil || !d.ReplyAll {
		drop = nil
	}
	seen := map[string]bool{}
	for _, a := range d.To {
		seen[a] = true
	}
	if d.Cc, err = addresses("cc", d.Cc, func(a string) bool { return seen[a] || (drop != nil && drop(a)) }); err != nil {
		return nil, err
	}
	for _, a := range d.Cc {
		seen[a] = true
	}
	if d.Bcc, err = addresses("bcc", d.Bcc, func(a string) bool { return seen[a] }); err != nil {
		return nil, err
	}
	if len(d.To)+len(d.Cc)+len(d.Bcc) == 0 {
		return nil, inputErr("at least one recipient is required (to, cc or bcc)")
	}
	d.Subject = strings.TrimSpace(d.Subject)
	if strings.ContainsAny(d.Subject, "\r\n") {
		return nil, inputErr("subject must be one line")
	}
	if d.Subject == "" {
		return nil, inputErr("subject is required")
	}
	if strings.TrimSpace(d.Body) == "" {
		return nil, inputErr("body is required")
	}
	res.Subject, res.Body = d.Subject, d.Body
	if o := res.Original; o != nil && (d.Quote == nil || *d.Quote) {
		res.Body = strings.TrimRight(d.Body, "\n") + "\n\n" + quote(o, r.loc())
	}
	if tool == ToolSchedule {
		if res.SendAt, err = r.sendAt(d.SendAt); err != nil {
			return nil, err
		}
	} else if d.SendAt != "" {
		return nil, inputErr("sendAt belongs to schedule_email")
	}
	if d.Attachments, err = r.attachments(ctx, d.Attachments); err != nil {
		return nil, err
	}
	res.Draft = d
	p := &Preview{Account: d.Account, From: d.From, To: d.To, Cc: d.Cc, Bcc: d.Bcc, Subject: d.Subject, Body: res.Body, Via: res.Via}
	for _, a := range d.Attachments {
		p.Attachments = append(p.Attachments, fmt.Sprintf("%s (%d bytes)", a.Filename, a.Size))
	}
	if res.Original != nil {
		p.InReplyTo = "<" + res.Original.MessageID + ">"
	}
	if !res.SendAt.IsZero() {
		p.SendAtLocal = res.SendAt.In(r.loc()).Format("Mon 2 Jan 2006 15:04 MST (-07:00)")
	}
	res.Draft.Preview = p
	return res, nil
}

func (r *Resolver) loc() *time.Location {
	if r.Local != nil {
		return r.Local
	}
	return time.Local
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resolver) account(name, from string) (*stewardmail.Account, error) {
	var names []string
	for i := range r.Accounts {
		names = append(names, r.Accounts[i].Name)
	}
	if name != "" {
		for i := range r.Accounts {
			if strings.EqualFold(r.Accounts[i].Name, name) {
				return &r.Accounts[i], nil
			}
		}
		return nil, inputErr("unknown account %q (have: %s)", name, strings.Join(names, ", "))
	}
	if from != "" {
		for i := range r.Accounts {
			if r.Accounts[i].Owns(from) {
				return &r.Accounts[i], nil
			}
		}
		return nil, inputErr("from %q is not an address of any account", from)
	}
	var able []*stewardmail.Account
	for i := range r.Accounts {
		a := &r.Accounts[i]
		if r.CanSend == nil {
			able = append(able, a)
		} else if _, err := r.CanSend(a); err == nil {
			able = append(able, a)
		}
	}
	if len(able) == 1 {
		return able[0], nil
	}
	if len(able) == 0 && len(r.Accounts) == 1 {
		return &r.Accounts[0], nil // its CanSend error says what is missing
	}
	return nil, inputErr("name the account to send from (have: %s)", strings.Join(names, ", "))
}

// addresses validates a recipient list: each entry one address, lower-cased,
// duplicates and entries skip says to drop removed.
func addresses(field string, list []string, skip func(string) bool) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range list {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		a, err := mail.ParseAddress(raw)
		if err != nil || !strings.Contains(a.Address, "@") {
			if !strings.Contains(raw, "@") {
				return nil, inputErr("%s: %q is not an email address; look the person up with mcp__contacts__resolve_recipient and use one of its candidates", field, raw)
			}
			return nil, inputErr("%s: %q is not a valid email address", field, raw)
		}
		addr := strings.ToLower(a.Address)
		if _, domain, _ := strings.Cut(addr, "@"); !strings.Contains(domain, ".") && domain != "localhost" {
			return nil, inputErr("%s: %q has no domain", field, raw)
		}
		if seen[addr] || (skip != nil && skip(addr)) {
			continue
		}
		seen[addr] = true
		out = append(out, addr)
	}
	return out, nil
}

func (r *Resolver) sendAt(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, inputErr("sendAt is required: an RFC 3339 instant with an explicit offset, e.g. 2026-05-04T09:00:00+02:00")
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, inputErr("sendAt %q is not an RFC 3339 instant with an explicit offset (e.g. 2026-05-04T09:00:00+02:00)", v)
	}
	if t.Before(r.now().Add(-time.Minute)) {
		return time.Time{}, inputErr("sendAt %s is in the past", v)
	}
	return t.UTC(), nil
}

func (r *Resolver) attachments(ctx context.Context, refs []AttachmentRef) ([]AttachmentRef, error) {
	limit := r.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	var total int64
	out := make([]AttachmentRef, 0, len(refs))
	for i, a := range refs {
		where := fmt.Sprintf("attachments[%d]", i)
		switch {
		case a.Path != "" && a.AttachmentID != "":
			return nil, inputErr("%s: give either path or attachmentId, not both", where)
		case a.Path != "":
			if r.Guard == nil {
				return nil, inputErr("%s: local files cannot be attached here", where)
			}
			p, err := r.Guard.Check(a.Path)
			if err != nil {
				if errors.Is(err, pathguard.ErrBlocked) {
					return nil, inputErr("%s: %s is a protected location and cannot be attached: %v", where, a.Path, err)
				}
				return nil, inputErr("%s: %v", where, err)
			}
			st, err := os.Stat(p)
			if err != nil {
				return nil, inputErr("%s: %v", where, err)
			}
			if !st.Mode().IsRegular() {
				return nil, inputErr("%s: %s is not a regular file", where, a.Path)
			}
			a.Path, a.Filename, a.Size = p, filepath.Base(p), st.Size()
		case a.AttachmentID != "":
			if r.Mirror == nil {
				return nil, inputErr("%s: mail attachments need the mail mirror", where)
			}
			m, err := r.Mirror.Attachment(ctx, a.AttachmentID)
			if err != nil {
				return nil, err
			}
			if m.SHA256 == "" {
				return nil, inputErr("%s: attachment %s (%s) was not downloaded by the mail client", where, a.AttachmentID, m.Filename)
			}
			a.Filename, a.Size = m.Filename, m.Size
		default:
			return nil, inputErr("%s: path or attachmentId is required", where)
		}
		total += a.Size
		if total > limit {
			return nil, inputErr("attachments total %d bytes, over the limit of %d bytes (MAIL_SEND_MAX_BYTES)", total, limit)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func hasRePrefix(s string) bool {
	l := strings.ToLower(strings.TrimSpace(s))
	return strings.HasPrefix(l, "re:") || strings.HasPrefix(l, "r:") || strings.HasPrefix(l, "aw:")
}

// quote renders the original as the quoted thread under a reply.
func quote(o *Original, loc *time.Location) string {
	who := o.From
	if o.FromName != "" {
		who = o.FromName + " <" + o.From + ">"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "On %s, %s wrote:\n", o.Date.In(loc).Format("Mon, 2 Jan 2006 at 15:04"), who)
	for _, line := range strings.Split(strings.TrimRight(o.Body, "\n"), "\n") {
		if line == "" || strings.HasPrefix(line, ">") {
			b.WriteString(">" + line + "\n")
		} else {
			b.WriteString("> " + line + "\n")
		}
	}
	return b.String()
}
