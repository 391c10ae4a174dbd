package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
)

const fixtures = "../../../../../shared/fixtures/email/emlx"

func needFixtures(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(fixtures); err != nil {
		t.Skipf("shared fixtures absent: %v", err)
	}
}

func readFile(t *testing.T, path string, f Format) *Item {
	t.Helper()
	it, err := Read(Entry{Path: path, Format: f}, message.Options{})
	if err != nil {
		t.Fatalf("Read %s: %v", path, err)
	}
	return it
}

func TestEMLXFixtures(t *testing.T) {
	needFixtures(t)
	tests := []struct {
		file      string
		subject   string
		textHas   string
		flagsOK   bool
		seen      bool
		warnHas   string
		convID    int64
		remoteID  string
		received  int64
		attachOK  int // attachments with content
		attachMis int // attachments missing
	}{
		{file: "terhechte-emlx/2.emlx", subject: "Re: Emlx library", textHas: "You're welcome", flagsOK: true, seen: true, convID: 123456, remoteID: "789", received: 1581000000},
		{file: "terhechte-emlx/3.emlx", subject: "Re: Emlx library", textHas: "Thank you!", flagsOK: true, seen: true},
		{file: "terhechte-emlx/1.emlx", subject: "Fwd: Lorem ipsum", textHas: "Lorem ipsum dolor", flagsOK: true, seen: true, attachMis: 4},
		{file: "terhechte-emlx/4.emlx", subject: "文本➕单照片", textHas: "好看的呀小狗", flagsOK: true, seen: true, attachOK: 1},
		{file: "mikez-emlx/richtext.emlx", textHas: "You're welcome", flagsOK: true, seen: true},
		// Broken files keep their message and say what was wrong.
		{file: "terhechte-emlx/broken1.emlx", subject: "Re: Emlx library", textHas: "You're welcome", warnHas: "runs past the end"},
		{file: "terhechte-emlx/broken2.emlx", textHas: "You're welcome", flagsOK: true, seen: true, warnHas: "no byte-count line"},
		{file: "terhechte-emlx/broken3.emlx", subject: "Re: Emlx library", textHas: "You're welcome", flagsOK: true, seen: true, warnHas: "runs past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			it := readFile(t, filepath.Join(fixtures, tt.file), FormatEMLX)
			m := it.Msg
			if tt.subject != "" && m.Subject != tt.subject {
				t.Errorf("subject %q, want %q", m.Subject, tt.subject)
			}
			if !strings.Contains(m.Text, tt.textHas) {
				t.Errorf("text %q lacks %q", m.Text, tt.textHas)
			}
			if it.FlagsKnown != tt.flagsOK || (tt.flagsOK && it.Flags.Seen != tt.seen) {
				t.Errorf("flags known=%v %+v", it.FlagsKnown, it.Flags)
			}
			if tt.warnHas != "" && !strings.Contains(strings.Join(it.Warnings, "\n"), tt.warnHas) {
				t.Errorf("warnings %q lack %q", it.Warnings, tt.warnHas)
			}
			if tt.convID != 0 && (it.ConversationID != tt.convID || it.RemoteID != tt.remoteID) {
				t.Errorf("conversation %d remote %q", it.ConversationID, it.RemoteID)
			}
			if it.BodyState != BodyFull {
				t.Errorf("body state %q", it.BodyState)
			}
			var ok, mis int
			for _, a := range m.Attachments {
				if a.Missing {
					mis++
				} else {
					ok++
				}
			}
			if ok != tt.attachOK || mis != tt.attachMis {
				t.Errorf("attachments ok=%d missing=%d, want %d/%d", ok, mis, tt.attachOK, tt.attachMis)
			}
		})
	}
}

// The .partial.emlx store: attachments left out of the message are found
// under Attachments/<n>/<part>/ and match the converter's reassembled .eml
// (binary parts byte for byte; text parts up to line endings, which the
// converter's quoted-printable re-encoding turns into CRLF).
func TestPartialEMLXMatchesReassembled(t *testing.T) {
	needFixtures(t)
	dir := filepath.Join(fixtures, "partial-emlx-converter")
	read := func(path string, f Format) (*Item, map[string][]byte) {
		contents := map[string][]byte{}
		it, err := Read(Entry{Path: path, Format: f}, message.Options{Attachment: func(a message.Attachment, r io.Reader) (string, int64, string, error) {
			b, err := io.ReadAll(r)
			contents[a.Part] = b
			return "", int64(len(b)), "", err
		}})
		if err != nil {
			t.Fatal(err)
		}
		return it, contents
	}
	for _, id := range []string{"114892", "114862"} {
		t.Run(id, func(t *testing.T) {
			f := FormatPartialEMLX
			path := filepath.Join(dir, "input/Messages", id+".partial.emlx")
			if _, err := os.Stat(path); err != nil {
				f, path = FormatEMLX, filepath.Join(dir, "input/Messages", id+".emlx")
			}
			got, gotParts := read(path, f)
			want, wantParts := read(filepath.Join(dir, "expected_results", id+".eml"), FormatMaildir)
			if got.Msg.Subject != want.Msg.Subject || got.Msg.MessageID != want.Msg.MessageID {
				t.Errorf("headers differ: %q/%q vs %q/%q", got.Msg.Subject, got.Msg.MessageID, want.Msg.Subject, want.Msg.MessageID)
			}
			if got.Msg.Text != want.Msg.Text {
				t.Errorf("text differs:\n%q\n%q", got.Msg.Text, want.Msg.Text)
			}
			if len(got.Msg.Attachments) != len(want.Msg.Attachments) {
				t.Fatalf("attachments %d vs %d", len(got.Msg.Attachments), len(want.Msg.Attachments))
			}
			for i, a := range got.Msg.Attachments {
				w := want.Msg.Attachments[i]
				if a.Missing || a.Part != w.Part || a.Filename != w.Filename || a.ContentType != w.ContentType {
					t.Errorf("attachment %d: got %+v want %+v", i, a, w)
				}
				g, x := gotParts[a.Part], wantParts[w.Part]
				if strings.HasPrefix(a.ContentType, "text/") {
					crlf := func(b []byte) []byte { return bytes.TrimRight(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), "\n") }
					g, x = crlf(g), crlf(x)
				}
				if len(g) == 0 || !bytes.Equal(g, x) {
					t.Errorf("attachment %s (%s): %d bytes differ from the reassembled %d bytes", a.Part, a.Filename, len(g), len(x))
				}
			}
			if f == FormatPartialEMLX && got.BodyState != BodyPartial {
				t.Errorf("body state %q, want partial", got.BodyState)
			}
		})
	}
}

func TestPartialEMLXStates(t *testing.T) {
	needFixtures(t)
	dir := filepath.Join(fixtures, "partial-emlx-converter/input/Messages")
	tests := []struct {
		id        string
		missing   int
		available int
	}{
		{"114893", 4, 0}, // no Attachments folder: declared sizes only
		{"136153", 0, 1},
		{"207046", 0, 1},
		{"229417", 0, 1},
		{"465622", 0, 1},
	}
	for _, tt := range tests {
		it := readFile(t, filepath.Join(dir, tt.id+".partial.emlx"), FormatPartialEMLX)
		var mis, ok int
		for _, a := range it.Msg.Attachments {
			if a.Missing {
				mis++
				if a.DeclaredSize <= 0 {
					t.Errorf("%s: missing attachment without declared size: %+v", tt.id, a)
				}
			} else {
				ok++
			}
		}
		if mis != tt.missing || ok != tt.available {
			t.Errorf("%s: missing %d available %d, want %d/%d", tt.id, mis, ok, tt.missing, tt.available)
		}
		if it.BodyState != BodyPartial {
			t.Errorf("%s: state %q", tt.id, it.BodyState)
		}
	}
}

// writeFile creates path with content and mtime.
func writeFile(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		os.Chtimes(path, mtime, mtime)
	}
}

func simpleMessage(id, subject string) string {
	return fmt.Sprintf("Message-ID: <%s>\r\nFrom: a@x.org\r\nSubject: %s\r\nDate: Mon, 2 Feb 2026 10:00:00 +0000\r\n\r\nbody of %s\r\n", id, subject, subject)
}

// EMLXBytes builds an .emlx file the way Mail writes it.
func emlxBytes(msg string, flags uint64) string {
	return fmt.Sprintf("%d\n%s<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n\t<key>flags</key>\n\t<integer>%d</integer>\n</dict>\n</plist>\n", len(msg), msg, flags)
}

func collect(t *testing.T, acct *mail.Account) []Entry {
	t.Helper()
	var out []Entry
	var errs []string
	err := Walk(context.Background(), acct, func(e Entry) error { out = append(out, e); return nil }, func(p string, err error) { errs = append(errs, p) })
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func TestWalkMaildirLayouts(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	// Maildir++ (mbsync SubFolders Maildir++ / Dovecot)
	writeFile(t, filepath.Join(root, "pp/new/1700000001.M1P1.host"), simpleMessage("a@x", "new one"), now)
	writeFile(t, filepath.Join(root, "pp/cur/1700000000.M2P1.host,U=7:2,FRS"), simpleMessage("b@x", "seen"), now)
	writeFile(t, filepath.Join(root, "pp/.Sent/cur/1700000002.M3P1.host:2,S"), simpleMessage("c@x", "sent"), now)
	writeFile(t, filepath.Join(root, "pp/.Work.Project/cur/1700000003.M4P1.host:2,"), simpleMessage("d@x", "deep"), now)
	writeFile(t, filepath.Join(root, "pp/.notmuch/xapian/x"), "not mail", now)
	writeFile(t, filepath.Join(root, "pp/tmp/1700000009.M9P9.host"), "incomplete", now)
	writeFile(t, filepath.Join(root, "pp/cur/.hidden"), "x", now)
	// nested (offlineimap sep "/", mbsync SubFolders Verbatim)
	writeFile(t, filepath.Join(root, "nested/INBOX/cur/1600000000.x:2,S"), simpleMessage("e@x", "inbox"), now)
	writeFile(t, filepath.Join(root, "nested/[Gmail]/All Mail/cur/1600000001.y:2,S"), simpleMessage("e@x", "inbox"), now)
	writeFile(t, filepath.Join(root, "nested/[Gmail]/Sent Mail/new/1600000002.z"), simpleMessage("f@x", "sent"), now)
	writeFile(t, filepath.Join(root, "nested/Archivio 2024/cur/1600000003.w!2,T"), simpleMessage("g@x", "archived"), now)

	pp := &mail.Account{Name: "pp", Kind: mail.KindMaildir, Root: filepath.Join(root, "pp"), Layout: mail.LayoutAuto}
	got := collect(t, pp)
	var desc []string
	for _, e := range got {
		desc = append(desc, fmt.Sprintf("%s|%s|%s|seen=%v flagged=%v", e.Mailbox, e.Role, e.Key, e.Flags.Seen, e.Flags.Flagged))
	}
	want := []string{
		"Sent|sent|1700000002.M3P1.host|seen=true flagged=false",
		"Work/Project||1700000003.M4P1.host|seen=false flagged=false",
		"INBOX|inbox|1700000000.M2P1.host,U=7|seen=true flagged=true",
		"INBOX|inbox|1700000001.M1P1.host|seen=false flagged=false",
	}
	if strings.Join(desc, "\n") != strings.Join(want, "\n") {
		t.Errorf("Maildir++ entries:\n%s\nwant\n%s", strings.Join(desc, "\n"), strings.Join(want, "\n"))
	}
	if got[3].Recency != 1700000001 {
		t.Errorf("recency %d, want the delivery time from the name", got[3].Recency)
	}

	nested := &mail.Account{Name: "n", Kind: mail.KindMaildir, Root: filepath.Join(root, "nested"), Layout: mail.LayoutAuto,
		Roles: map[string]string{"archivio 2024": "archive"}}
	desc = nil
	for _, e := range collect(t, nested) {
		desc = append(desc, fmt.Sprintf("%s|%s|%s|deleted=%v", e.Mailbox, e.Role, e.Key, e.Flags.Deleted))
	}
	want = []string{
		"Archivio 2024|archive|1600000003.w|deleted=true",
		"INBOX|inbox|1600000000.x|deleted=false",
		"[Gmail]/All Mail|all|1600000001.y|deleted=false",
		"[Gmail]/Sent Mail|sent|1600000002.z|deleted=false",
	}
	if strings.Join(desc, "\n") != strings.Join(want, "\n") {
		t.Errorf("nested entries:\n%s\nwant\n%s", strings.Join(desc, "\n"), strings.Join(want, "\n"))
	}

	// Forcing maildir++ on the nested tree finds nothing below the root.
	forced := &mail.Account{Name: "f", Kind: mail.KindMaildir, Root: filepath.Join(root, "nested"), Layout: mail.LayoutMaildirPP}
	if n := len(collect(t, forced)); n != 0 {
		t.Errorf("maildir++ layout on a nested tree found %d entries", n)
	}
}

func TestWalkAppleMail(t *testing.T) {
	root := t.TempDir()
	v := filepath.Join(root, "V10", "4F1E-ACCOUNT")
	inbox := filepath.Join(v, "INBOX.mbox", "UUID1", "Data", "1", "Messages")
	all := filepath.Join(v, "[Gmail].mbox", "All Mail.mbox", "UUID2", "Data", "Messages")
	writeFile(t, filepath.Join(inbox, "101.emlx"), emlxBytes(simpleMessage("m1@x", "hello"), 1|1<<4), time.Time{})
	writeFile(t, filepath.Join(all, "101.emlx"), emlxBytes(simpleMessage("m1@x", "hello"), 0), time.Time{})
	partialMsg := "Message-ID: <p@x>\r\nSubject: partial\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nshort text\r\n--B\r\nContent-Type: application/pdf; name=r.pdf\r\nContent-Disposition: attachment; filename=r.pdf\r\nContent-Transfer-Encoding: base64\r\nX-Apple-Content-Length: 5\r\n\r\n\r\n--B--\r\n"
	writeFile(t, filepath.Join(inbox, "102.partial.emlx"), emlxBytes(partialMsg, 0), time.Time{})
	writeFile(t, filepath.Join(inbox, "..", "Attachments", "102", "2", "r.pdf"), "%PDF!", time.Time{})
	writeFile(t, filepath.Join(inbox, "..", "Attachments", "103", "2", "x.emlx"), "not a message", time.Time{})
	noText := "Message-ID: <n@x>\r\nSubject: none\r\nContent-Type: text/plain\r\nX-Apple-Content-Length: 900\r\n\r\n\r\n"
	writeFile(t, filepath.Join(inbox, "104.partial.emlx"), emlxBytes(noText, 0), time.Time{})

	acct := &mail.Account{Name: "apple", Kind: mail.KindAppleMail, Root: filepath.Join(root, "V10")}
	entries := collect(t, acct)
	var desc []string
	for _, e := range entries {
		desc = append(desc, fmt.Sprintf("%s|%s|%s|%s", e.Mailbox, e.Role, e.Key, e.Format))
	}
	want := []string{
		"INBOX|inbox|101|emlx",
		"INBOX|inbox|102|partial-emlx",
		"INBOX|inbox|104|partial-emlx",
		"[Gmail]/All Mail|all|101|emlx",
	}
	sort.Strings(desc)
	if strings.Join(desc, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries:\n%s\nwant\n%s", strings.Join(desc, "\n"), strings.Join(want, "\n"))
	}
	byKey := map[string]*Item{}
	for _, e := range entries {
		if e.Mailbox == "INBOX" {
			it, err := Read(e, message.Options{})
			if err != nil {
				t.Fatal(err)
			}
			byKey[e.Key] = it
		}
	}
	if it := byKey["101"]; !it.Flags.Seen || !it.Flags.Flagged || it.BodyState != BodyFull {
		t.Errorf("101: flags %+v state %s", it.Flags, it.BodyState)
	}
	if it := byKey["102"]; it.BodyState != BodyPartial || len(it.Msg.Attachments) != 1 || it.Msg.Attachments[0].Size != 5 || it.Msg.Attachments[0].Missing {
		t.Errorf("102: state %s attachments %+v", it.BodyState, it.Msg.Attachments)
	}
	if it := byKey["104"]; it.BodyState != BodyNone || !it.Msg.Omitted {
		t.Errorf("104: state %s omitted %v", it.BodyState, it.Msg.Omitted)
	}
}

// Each refused part names a directory that exists and holds a file, so only
// the part check stands between the lookup and an open file.
func TestAppleAttachmentsRefusesTraversal(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "Mailbox", "Attachments", "5")
	lookup := AppleAttachments(filepath.Join(root, "Mailbox", "Messages", "5.partial.emlx"))
	for _, part := range []string{"../../..", "2/../../..", "", "2.a"} {
		writeFile(t, filepath.Join(base, part, "secret"), "s", time.Time{})
		rc, err := lookup(part, "secret")
		if err == nil {
			rc.Close()
			t.Errorf("part %q was accepted", part)
			continue
		}
		// The guard's own error quotes the part; a missing directory would not.
		if want := fmt.Sprintf("attachment part %q of 5", part); !strings.Contains(err.Error(), want) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("part %q: %v, want the guard's error %q", part, err, want)
		}
	}
}

func TestSplitMaildirName(t *testing.T) {
	tests := []struct{ in, key, flags string }{
		{"1.M1.host:2,RS", "1.M1.host", "RS"},
		{"1.M1.host,U=3:2,", "1.M1.host,U=3", ""},
		{"1.M1.host!2,F", "1.M1.host", "F"},
		{"1.M1.host", "1.M1.host", ""},
	}
	for _, tt := range tests {
		k, f := SplitMaildirName(tt.in)
		if k != tt.key || f != tt.flags {
			t.Errorf("SplitMaildirName(%q) = %q, %q", tt.in, k, f)
		}
	}
}

// FuzzEMLX writes arbitrary bytes as an .emlx file and reads it: opening and
// parsing must never panic, and a non-empty file always yields a message.
func FuzzEMLX(f *testing.F) {
	f.Add([]byte(emlxBytes(simpleMessage("a@b", "s"), 1)))
	f.Add([]byte("12\nSubject: x\r\n"))
	f.Add([]byte("not a number\nSubject: y\n\nz\n<?xml version=\"1.0\"?><plist><dict><key>flags</key><string>zz</string></dict></plist>"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "1.partial.emlx")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		it, err := Read(Entry{Path: path, Format: FormatPartialEMLX}, message.Options{MaxParts: 40})
		if len(data) == 0 {
			if err == nil {
				t.Fatal("empty file accepted")
			}
			return
		}
		if err != nil && !strings.Contains(err.Error(), "empty") {
			t.Fatalf("non-empty file refused: %v", err)
		}
		if err == nil && it.BodyState != BodyPartial && it.BodyState != BodyNone {
			t.Fatalf("state %q", it.BodyState)
		}
	})
}

func TestEMLXDamagedTrailer(t *testing.T) {
	dir := t.TempDir()
	msg := simpleMessage("d@x", "damaged")
	cases := []struct {
		name, content, warn string
		flags               bool
	}{
		{"invalid plist", fmt.Sprintf("%d\n%s<?xml version=\"1.0\"?><plist><dict><key>flags</dict>", len(msg), msg), "not a valid property list", false},
		{"no trailer", fmt.Sprintf("%d\n%s", len(msg), msg), "no plist trailer", false},
		{"count too small", fmt.Sprintf("%d\n%s%s", len(msg)-10, msg, "<?xml"), "", false},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name+".emlx")
		writeFile(t, p, c.content, time.Time{})
		it, err := Read(Entry{Path: p, Format: FormatEMLX}, message.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if it.Msg.Subject != "damaged" || it.FlagsKnown != c.flags {
			t.Errorf("%s: subject %q flags known %v", c.name, it.Msg.Subject, it.FlagsKnown)
		}
		if c.warn != "" && !strings.Contains(strings.Join(it.Warnings, "\n"), c.warn) {
			t.Errorf("%s: warnings %q", c.name, it.Warnings)
		}
	}
}
