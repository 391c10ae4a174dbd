package outbox

import (
	"bytes"
	"context"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
)

// FuzzDraft feeds arbitrary recipients, subjects, bodies and send times to
// the resolver: it never panics, and whatever it accepts builds into a
// message whose headers parse back to the same recipients and subject (no
// header injection through a subject or an address).
func FuzzDraft(f *testing.F) {
	f.Add("bob@example.org", "Hello", "body", "")
	f.Add("Bob <bob@example.org>, x@y.z", "Pranzo à Milano =?utf-8?q?x?=", "line\r\n.\r\nBcc: evil@example.org", "2030-01-02T03:04:05+01:00")
	f.Add("a@b.c\r\nBcc: evil@example.org", "s\nBcc: evil@example.org", "b", "not a time")
	f.Add(`"quoted, name" <q@example.org>`, strings.Repeat("long subject ", 20), "", "2030-01-02T03:04:05Z")
	accounts := []stewardmail.Account{{Name: "personal", Kind: stewardmail.KindMaildir, Root: "/nonexistent", Addresses: []string{"me@example.com"}}}
	r := &Resolver{Accounts: accounts, Now: func() time.Time { return time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC) }}
	f.Fuzz(func(t *testing.T, to, subject, body, sendAt string) {
		tool := ToolSend
		if sendAt != "" {
			tool = ToolSchedule
		}
		res, err := r.Resolve(context.Background(), tool, Draft{To: strings.Split(to, ","), Subject: subject, Body: body, SendAt: sendAt})
		if err != nil {
			return
		}
		for _, a := range res.Draft.To {
			if a != strings.ToLower(a) || strings.ContainsAny(a, "\r\n <>,") {
				t.Fatalf("recipient %q not normalised", a)
			}
		}
		m := &Message{From: "me@example.com", To: res.Draft.To, Subject: res.Subject, Body: res.Body, MessageID: "f@example.com"}
		raw, err := Build(m, time.Unix(0, 0), nil)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("the built message does not parse: %v", err)
		}
		if bcc := msg.Header.Get("Bcc"); bcc != "" {
			t.Fatalf("a Bcc header appeared: %q", bcc)
		}
		got, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil || strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(res.Subject), " ") {
			t.Fatalf("subject %q came back as %q (%v)", res.Subject, got, err)
		}
		list, err := msg.Header.AddressList("To")
		if err != nil || len(list) != len(res.Draft.To) {
			t.Fatalf("To %v came back as %v (%v)", res.Draft.To, list, err)
		}
	})
}
