package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// Tool names (without the mcp__mail__ prefix).
const (
	ToolSend     = "send_email"
	ToolReply    = "reply_email"
	ToolSchedule = "schedule_email"
)

// Options configures a Service.
type Options struct {
	Accounts []stewardmail.Account
	Journal  *writeops.Store
	// Blobs holds attachment content once a message is journaled.
	Blobs *Blobs
	// MirrorBlobs opens mirrored mail attachments (attachmentId).
	MirrorBlobs interface {
		Open(sha string) (*os.File, error)
	}
	Mirror   Mirror
	Guard    ReadGuard
	MaxBytes int64
	SMTP     *SMTPSender
	// Apple sends through Mail.app for applemail accounts without smtp
	// settings (macOS only; nil elsewhere).
	Apple *AppleMail
	Now   func() time.Time
	Local *time.Location
}

// Service prepares, journals and sends mail.
type Service struct {
	opts     Options
	Resolver *Resolver
}

// New builds a Service.
func New(opts Options) (*Service, error) {
	if opts.Journal == nil || opts.Blobs == nil {
		return nil, errors.New("outbox: journal and blob store are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SMTP == nil {
		opts.SMTP = &SMTPSender{Lookup: func(string) (string, bool) { return "", false }}
	}
	if opts.Apple == nil && runtime.GOOS == "darwin" {
		opts.Apple = &AppleMail{Runner: osascript.Exec{}, AttachmentPath: opts.Blobs.path}
	}
	s := &Service{opts: opts}
	s.Resolver = &Resolver{Accounts: opts.Accounts, Mirror: opts.Mirror, Guard: opts.Guard, MaxBytes: opts.MaxBytes,
		CanSend: s.via, Now: opts.Now, Local: opts.Local}
	return s, nil
}

// via says how an account sends, or why it cannot.
func (s *Service) via(a *stewardmail.Account) (string, error) {
	if a.SMTP != nil {
		return s.opts.SMTP.Describe(a)
	}
	if a.Kind == stewardmail.KindAppleMail && s.opts.Apple != nil {
		return "Mail.app", nil
	}
	return "", fmt.Errorf("no smtp settings in mail.yaml for account %s (see docs/writes.md)", a.Name)
}

// Preflight validates a draft for tool and returns it normalised with its
// preview, for the approval card.
func (s *Service) Preflight(ctx context.Context, tool string, d Draft) (Draft, error) {
	res, err := s.Resolver.Resolve(ctx, tool, d)
	if err != nil {
		return Draft{}, err
	}
	return res.Draft, nil
}

// ResultKind is the rich-result kind of a journaled write.
const ResultKind = "write_operation"

// Result is what the tools return after journaling (and sending).
type Result struct {
	// Kind is "write_operation", the rich card clients show with a link
	// to the journal (docs/protocol.md).
	Kind        string `json:"kind"`
	Summary     string `json:"summary"`
	OperationID string `json:"operationId"`
	State       string `json:"state"`
	MessageID   string `json:"messageId"`
	// ScheduledFor is set on scheduled sends (RFC 3339 in local time).
	ScheduledFor string `json:"scheduledFor,omitempty"`
	Error        string `json:"error,omitempty"`
	Note         string `json:"note"`
}

// Submit validates d, stores its attachments, journals it and sends it now
// (send, reply) or leaves it for send-due (schedule).
func (s *Service) Submit(ctx context.Context, tool, origin string, d Draft) (Result, error) {
	res, err := s.Resolver.Resolve(ctx, tool, d)
	if err != nil {
		return Result{}, err
	}
	m, err := s.materialize(ctx, res)
	if err != nil {
		return Result{}, err
	}
	kind := writeops.KindMailSend
	if m.InReplyTo != "" {
		kind = writeops.KindMailReply
	}
	n := writeops.NewOperation{Kind: kind, Summary: summary(m), Input: m, Expected: Expect(m), Origin: origin, Tool: "mcp__mail__" + tool}
	if tool == ToolSchedule {
		op, err := s.opts.Journal.Schedule(ctx, n, res.SendAt)
		if err != nil {
			return Result{}, err
		}
		return Result{Kind: ResultKind, Summary: op.Summary, OperationID: op.ID, State: string(op.State), MessageID: m.MessageID,
			ScheduledFor: res.SendAt.In(s.Resolver.loc()).Format(time.RFC3339),
			Note:         "Scheduled; it is sent by the send-due job at that time. Nothing has been sent yet."}, nil
	}
	op, err := s.opts.Journal.Execute(ctx, n, s)
	out := Result{Kind: ResultKind, Summary: op.Summary, OperationID: op.ID, State: string(op.State), MessageID: m.MessageID, Error: op.Error}
	switch op.State {
	case writeops.StateReturned:
		out.Note = "The server accepted the message; it is confirmed once the Sent copy is seen in the mail mirror."
	case writeops.StateFailed:
		out.Note = "NOT SENT: " + op.Error
	case writeops.StateUnknown:
		out.Note = "It is not known whether the message was sent; do not send it again. The confirmation job will look for it, and read_write_operation shows the outcome."
	}
	if op.ID == "" && err != nil {
		return out, err
	}
	return out, nil
}

func summary(m *Message) string {
	to := strings.Join(m.To, ", ")
	if to == "" {
		to = strings.Join(m.Cc, ", ")
	}
	return fmt.Sprintf("mail to %s: %s", to, m.Subject)
}

// materialize turns a resolved draft into the journaled message: the
// attachments' content is copied into the blob store and a Message-ID made.
func (s *Service) materialize(ctx context.Context, res *Resolved) (*Message, error) {
	d := res.Draft
	m := &Message{Account: res.Account.Name, From: d.From, To: d.To, Cc: d.Cc, Bcc: d.Bcc, Subject: res.Subject,
		Body: res.Body, MessageID: newMessageID(d.From)}
	if o := res.Original; o != nil {
		m.ReplyToID, m.InReplyTo = o.ID, o.MessageID
		m.References = append(append([]string{}, o.References...), o.MessageID)
	}
	if !res.SendAt.IsZero() {
		m.SendAt = res.SendAt.Format(time.RFC3339)
	}
	for _, a := range d.Attachments {
		var src io.ReadCloser
		var err error
		at := Attachment{Filename: a.Filename}
		if a.Path != "" {
			src, err = os.Open(a.Path)
			at.Source, at.ContentType = a.Path, contentTypeOf(a.Filename)
		} else {
			var info MirrorAttachment
			if info, err = s.opts.Mirror.Attachment(ctx, a.AttachmentID); err == nil {
				if s.opts.MirrorBlobs == nil {
					err = errors.New("mirror attachment store unavailable")
				} else {
					src, err = s.opts.MirrorBlobs.Open(info.SHA256)
				}
			}
			at.Source, at.ContentType = "mail attachment "+a.AttachmentID, info.ContentType
		}
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", a.Filename, err)
		}
		at.SHA256, at.Size, err = s.opts.Blobs.Put(src)
		src.Close()
		if err != nil {
			return nil, err
		}
		if at.ContentType == "" {
			at.ContentType = contentTypeOf(a.Filename)
		}
		m.Attachments = append(m.Attachments, at)
	}
	return m, nil
}

// Receipt is the journaled result of a send.
type Receipt struct {
	MessageID string `json:"messageId"`
	Via       string `json:"via"`
	SentCopy  string `json:"sentCopy,omitempty"`
	FccError  string `json:"fccError,omitempty"`
}

// Execute is the journal's executor for mail.send and mail.reply: it
// builds the message dated at the attempt, submits it and files the copy.
func (s *Service) Execute(ctx context.Context, op writeops.Operation) (any, error) {
	var m Message
	if err := op.Decode(&m); err != nil {
		return nil, writeops.NotDone(fmt.Errorf("journaled message is unreadable: %w", err))
	}
	var acct *stewardmail.Account
	for i := range s.opts.Accounts {
		if s.opts.Accounts[i].Name == m.Account {
			acct = &s.opts.Accounts[i]
		}
	}
	if acct == nil {
		return nil, writeops.NotDone(fmt.Errorf("account %s is no longer in mail.yaml", m.Account))
	}
	date := op.AttemptedAt
	if date.IsZero() {
		date = s.opts.Now()
	}
	if acct.SMTP == nil && acct.Kind == stewardmail.KindAppleMail && s.opts.Apple != nil {
		if err := s.opts.Apple.Send(ctx, &m); err != nil {
			return nil, err
		}
		return Receipt{MessageID: m.MessageID, Via: "Mail.app"}, nil
	}
	raw, err := Build(&m, date.Local(), s.opts.Blobs)
	if err != nil {
		return nil, writeops.NotDone(err)
	}
	if err := s.opts.SMTP.Submit(ctx, acct, m.From, m.Recipients(), raw); err != nil {
		return nil, err
	}
	rec := Receipt{MessageID: m.MessageID, Via: fmt.Sprintf("smtp %s:%d", acct.SMTP.Host, acct.SMTP.Port)}
	if acct.Kind == stewardmail.KindMaildir && acct.FccEnabled() {
		if rec.SentCopy, err = FileSent(acct, raw, s.opts.Now()); err != nil {
			rec.FccError = err.Error()
		}
	}
	return rec, nil
}

// Executors returns the journal executors of the mail kinds.
func (s *Service) Executors() map[writeops.Kind]writeops.Executor {
	return map[writeops.Kind]writeops.Executor{writeops.KindMailSend: s, writeops.KindMailReply: s}
}
