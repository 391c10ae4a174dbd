package outbox

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/agentstack/agentstack/steward/writeops"
)

// ScriptRunner runs an AppleScript program and returns its output;
// OSAScript runs osascript. Tests substitute a recorder.
type ScriptRunner interface {
	Run(ctx context.Context, script string) (string, error)
}

// OSAScript runs scripts with /usr/bin/osascript (macOS only).
type OSAScript struct{}

// Run passes the script on stdin, so nothing of it appears in the process list.
func (OSAScript) Run(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "/usr/bin/osascript", "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("osascript: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// AppleMail sends through Mail.app, which files the Sent copy itself. It
// cannot set the Message-ID, so confirmation relies on the other evidence.
type AppleMail struct {
	Runner ScriptRunner
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
	case err == nil && out == "sent":
		return nil
	case err == nil:
		return fmt.Errorf("Mail.app answered %q instead of sent", out)
	case strings.Contains(out, "steward:not-sent"):
		return writeops.NotDone(err)
	default:
		return err
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
		fmt.Fprintf(&b, "set orig to first message of every mailbox of every account whose message id is %s\n", asString(m.InReplyTo))
		b.WriteString("set msg to reply orig opening window false\n")
		fmt.Fprintf(&b, "set content of msg to %s\n", asString(m.Body))
		fmt.Fprintf(&b, "set subject of msg to %s\n", asString(m.Subject))
		b.WriteString("delete every to recipient of msg\n")
	} else {
		fmt.Fprintf(&b, "set msg to make new outgoing message with properties {subject:%s, content:%s, visible:false}\n",
			asString(m.Subject), asString(m.Body))
	}
	fmt.Fprintf(&b, "set sender of msg to %s\n", asString(m.From))
	b.WriteString("tell msg\n")
	for _, list := range []struct {
		kind  string
		addrs []string
	}{{"to recipient", m.To}, {"cc recipient", m.Cc}, {"bcc recipient", m.Bcc}} {
		for _, addr := range list.addrs {
			fmt.Fprintf(&b, "make new %s at end of %ss with properties {address:%s}\n", list.kind, list.kind, asString(addr))
		}
	}
	for _, at := range m.Attachments {
		if a.AttachmentPath == nil {
			return "", fmt.Errorf("no attachment store for %s", at.Filename)
		}
		fmt.Fprintf(&b, "make new attachment with properties {file name:(POSIX file %s)} at after last paragraph\n", asString(a.AttachmentPath(at.SHA256)))
	}
	b.WriteString("end tell\n")
	b.WriteString("on error errMsg\nreturn \"steward:not-sent \" & errMsg\nend try\n")
	b.WriteString("send msg\n")
	b.WriteString("return \"sent\"\n")
	b.WriteString("end tell\n")
	return b.String(), nil
}

// asString returns s as an AppleScript string literal. Backslashes and
// quotes are escaped; line breaks are joined with linefeed/return so that a
// value can never end the literal and continue as code.
func asString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`" & linefeed & "`)
		case '\r':
			b.WriteString(`" & return & "`)
		case '\t':
			b.WriteString(`" & tab & "`)
		default:
			if r < 0x20 || r == 0x7f {
				continue // other control characters have no place in mail text
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
