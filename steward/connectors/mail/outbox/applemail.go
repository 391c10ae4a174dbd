package outbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// AppleMail sends through Mail.app, which files the Sent copy itself. It
// cannot set the Message-ID, so confirmation relies on the other evidence.
type AppleMail struct {
	Runner osascript.Runner
	// AttachmentPath returns a file path for an attachment's stored content.
	AttachmentPath func(sha string) string
}

// Send asks Mail.app to send m. A script that fails before "send" ran
// reports NotDone; Mail.app errors after that are unknown.
func (a *AppleMail) Send(ctx context.Context, m *Message) error {
	script, err := a.Script(m)
	if err != nil {
		return writeops.NotDone(err)
	}
	out, err := a.Runner.Run(ctx, script)
	switch {
	case err != nil:
		return fmt.Errorf("Mail.app: %w", err) // send may have run: unknown
	case out == "sent":
		return nil
	case strings.HasPrefix(out, "steward:not-sent"):
		return writeops.NotDone(fmt.Errorf("Mail.app refused the message before sending: %s", strings.TrimPrefix(out, "steward:not-sent ")))
	default:
		return fmt.Errorf("Mail.app answered %q instead of sent", out)
	}
}

// Script builds the AppleScript program that sends m. Every value is an
// AppleScript string literal built by asString, never spliced raw.
func (a *AppleMail) Script(m *Message) (string, error) {
	var b strings.Builder
	b.WriteString("tell application \"Mail\"\n")
	b.WriteString("try\n")
	if m.ReplyToID != "" && m.InReplyTo != "" {
		// Mail.app's reply keeps the thread headers; the quoted original
		// is already in Body, so the reply's own content is replaced.
		fmt.Fprintf(&b, "set orig to first message of every mailbox of every account whose message id is %s\n", osascript.Quote(m.InReplyTo))
		b.WriteString("set msg to reply orig opening window false\n")
		fmt.Fprintf(&b, "set content of msg to %s\n", osascript.Quote(m.Body))
		fmt.Fprintf(&b, "set subject of msg to %s\n", osascript.Quote(m.Subject))
		b.WriteString("delete every to recipient of msg\n")
	} else {
		fmt.Fprintf(&b, "set msg to make new outgoing message with properties {subject:%s, content:%s, visible:false}\n",
			osascript.Quote(m.Subject), osascript.Quote(m.Body))
	}
	fmt.Fprintf(&b, "set sender of msg to %s\n", osascript.Quote(m.From))
	b.WriteString("tell msg\n")
	for _, list := range []struct {
		kind  string
		addrs []string
	}{{"to recipient", m.To}, {"cc recipient", m.Cc}, {"bcc recipient", m.Bcc}} {
		for _, addr := range list.addrs {
			fmt.Fprintf(&b, "make new %s at end of %ss with properties {address:%s}\n", list.kind, list.kind, osascript.Quote(addr))
		}
	}
	for _, at := range m.Attachments {
		if a.AttachmentPath == nil {
			return "", fmt.Errorf("no attachment store for %s", at.Filename)
		}
		fmt.Fprintf(&b, "make new attachment with properties {file name:(POSIX file %s)} at after last paragraph\n", osascript.Quote(a.AttachmentPath(at.SHA256)))
	}
	b.WriteString("end tell\n")
	b.WriteString("on error errMsg\nreturn \"steward:not-sent \" & errMsg\nend try\n")
	b.WriteString("send msg\n")
	b.WriteString("return \"sent\"\n")
	b.WriteString("end tell\n")
	return b.String(), nil
}
