package search

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// LiveRef identifies a message for the mail client.
type LiveRef struct {
	// MailID is Mail's own numeric id (the .emlx file number), 0 when unknown.
	MailID int64
	// MessageID is the RFC Message-ID without brackets.
	MessageID string
	Account   string
	Mailbox   string
}

// LiveMailReader reads a message body straight from the mail client, for
// messages whose mirrored body is missing or too short. On macOS it asks
// Mail.app through AppleScript; there is none on Linux.
type LiveMailReader interface {
	ReadBody(ctx context.Context, ref LiveRef) (string, error)
}

// minUsableBody is the trimmed length under which a non-full mirrored body
// triggers a live read.
const minUsableBody = 20

// AppleScriptForBody builds the script that fetches a message body from
// Mail: by numeric id first (cheap and exact), then by Message-ID across all
// mailboxes. Values are embedded as AppleScript string literals with quotes
// and backslashes escaped, so a hostile Message-ID cannot inject script.
func AppleScriptForBody(ref LiveRef) string {
	var b strings.Builder
	b.WriteString("tell application \"Mail\"\n")
	if ref.MailID > 0 {
		fmt.Fprintf(&b, "  try\n    repeat with acc in every account\n      repeat with mb in every mailbox of acc\n"+
			"        set hits to (every message of mb whose id is %s)\n        if (count of hits) > 0 then return content of item 1 of hits\n"+
			"      end repeat\n    end repeat\n  end try\n", strconv.FormatInt(ref.MailID, 10))
	}
	if ref.MessageID != "" {
		fmt.Fprintf(&b, "  repeat with acc in every account\n    repeat with mb in every mailbox of acc\n"+
			"      set hits to (every message of mb whose message id is %s)\n      if (count of hits) > 0 then return content of item 1 of hits\n"+
			"    end repeat\n  end repeat\n", appleString(ref.MessageID))
	}
	b.WriteString("  error \"message not found in Mail\"\nend tell\n")
	return b.String()
}

// appleString quotes s as an AppleScript string literal.
func appleString(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 32 {
			return -1
		}
		return r
	}, s)
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}
