package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/writeops"
)

// evalLiteral evaluates an AppleScript expression made only of string
// literals joined with & and the constants linefeed, return and tab, and
// fails on anything else: what asString produces must never contain code.
func evalLiteral(t *testing.T, expr string) string {
	t.Helper()
	var out strings.Builder
	i := 0
	for {
		switch {
		case strings.HasPrefix(expr[i:], `"`):
			i++
			for {
				if i >= len(expr) {
					t.Fatalf("unterminated literal in %q", expr)
				}
				c := expr[i]
				if c == '\\' {
					out.WriteByte(expr[i+1])
					i += 2
					continue
				}
				i++
				if c == '"' {
					break
				}
				out.WriteByte(c)
			}
		case strings.HasPrefix(expr[i:], "linefeed"):
			out.WriteByte('\n')
			i += len("linefeed")
		case strings.HasPrefix(expr[i:], "return"):
			out.WriteByte('\r')
			i += len("return")
		case strings.HasPrefix(expr[i:], "tab"):
			out.WriteByte('\t')
			i += len("tab")
		default:
			t.Fatalf("unexpected token at %d in %q", i, expr)
		}
		if i == len(expr) {
			return out.String()
		}
		if !strings.HasPrefix(expr[i:], " & ") {
			t.Fatalf("expected & at %d in %q", i, expr)
		}
		i += 3
	}
}

func TestAppleScriptQuoting(t *testing.T) {
	cases := []struct{ in, lit string }{
		{`plain`, `"plain"`},
		{`say "hi"`, `"say \"hi\""`},
		{`C:\path`, `"C:\\path"`},
		{"two\nlines", `"two" & linefeed & "lines"`},
		{"crlf\r\nend", `"crlf" & return & "" & linefeed & "end"`},
		{"bell\x07gone", `"bellgone"`},
		{`"; do shell script "rm -rf ~"; "`, `"\"; do shell script \"rm -rf ~\"; \""`},
		{`\"` + "\n" + `end tell`, `"\\\"" & linefeed & "end tell"`},
		{"àèì 日本", `"àèì 日本"`},
	}
	for _, tc := range cases {
		got := asString(tc.in)
		if got != tc.lit {
			t.Errorf("asString(%q) = %s, want %s", tc.in, got, tc.lit)
		}
		want := strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
				return -1
			}
			return r
		}, tc.in)
		if back := evalLiteral(t, got); back != want {
			t.Errorf("asString(%q) evaluates to %q", tc.in, back)
		}
	}
}

type recordRunner struct {
	script string
	out    string
	err    error
}

func (r *recordRunner) Run(_ context.Context, s string) (string, error) {
	r.script = s
	return r.out, r.err
}

func TestAppleMailScript(t *testing.T) {
	m := &Message{From: "me@example.com", To: []string{"bob@example.org"}, Cc: []string{"c@example.net"}, Bcc: []string{"h@example.org"},
		Subject: `He said "ok"`, Body: "line1\nline2", Attachments: []Attachment{{Filename: "a.pdf", SHA256: strings.Repeat("a", 64)}}}
	r := &recordRunner{out: "sent"}
	a := &AppleMail{Runner: r, AttachmentPath: func(sha string) string { return "/blobs/" + sha[:4] }}
	if err := a.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`make new outgoing message with properties {subject:"He said \"ok\"", content:"line1" & linefeed & "line2", visible:false}`,
		`set sender of msg to "me@example.com"`,
		`make new to recipient at end of to recipients with properties {address:"bob@example.org"}`,
		`make new cc recipient at end of cc recipients with properties {address:"c@example.net"}`,
		`make new bcc recipient at end of bcc recipients with properties {address:"h@example.org"}`,
		`make new attachment with properties {file name:(POSIX file "/blobs/aaaa")} at after last paragraph`,
		"send msg\nreturn \"sent\"",
	} {
		if !strings.Contains(r.script, want) {
			t.Errorf("script lacks %q:\n%s", want, r.script)
		}
	}
	// A failure before send is certain: nothing went out.
	r.out, r.err = "steward:not-sent Mail got an error", errors.New("exit 1")
	if err := a.Send(context.Background(), m); !writeops.IsNotDone(err) {
		t.Fatalf("pre-send failure %v is not NotDone", err)
	}
	// Any other failure may have happened after send: unknown.
	r.out, r.err = "Mail got an error: timeout", errors.New("exit 1")
	if err := a.Send(context.Background(), m); err == nil || writeops.IsNotDone(err) {
		t.Fatalf("post-send failure %v must be unknown", err)
	}
}
