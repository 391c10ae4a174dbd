package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/writeops"
)

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
		`make new outgoing message with properties {subject:"He said \"ok\"", content:"line1\nline2", visible:false}`,
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
	// A failure caught before send is certain: nothing went out.
	r.out, r.err = "steward:not-sent Mail got an error", nil
	if err := a.Send(context.Background(), m); !writeops.IsNotDone(err) {
		t.Fatalf("pre-send failure %v is not NotDone", err)
	}
	// Any other failure may have happened after send: unknown.
	r.out, r.err = "Mail got an error: timeout", errors.New("exit 1")
	if err := a.Send(context.Background(), m); err == nil || writeops.IsNotDone(err) {
		t.Fatalf("post-send failure %v must be unknown", err)
	}
}
