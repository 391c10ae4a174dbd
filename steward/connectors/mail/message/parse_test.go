package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const fixtures = "../../../../../shared/fixtures/email"

func fixture(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, rel))
	if os.IsNotExist(err) {
		t.Skipf("fixture %s is absent (the shared fixtures folder is not checked out)", rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parseBytes(t *testing.T, data []byte) *Message {
	t.Helper()
	m, err := Parse(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func attachmentNames(m *Message) []string {
	var out []string
	for _, a := range m.Attachments {
		out = append(out, a.Filename)
	}
	return out
}

func TestParseRealFixtures(t *testing.T) {
	tests := []struct {
		file        string
		subject     string
		from        string
		textHas     string
		textLacks   string
		attachments []string
		warnHas     string
	}{
		{file: "enmime-testdata/mail/qp-utf8-header.raw", subject: "MIME UTF8 Test ¢ More Text", from: "jamehi03@jamehi03lx.noa.com", textHas: "Lorem ipsum"},
		{file: "enmime-testdata/mail/mime-alternative.raw", subject: "Multipart Mixed", textHas: "Section one", textLacks: "<"},
		{file: "enmime-testdata/mail/html-only-inline.raw", textHas: "Test of HTML section", textLacks: "<html", attachments: []string{"favicon.png"}},
		{file: "enmime-testdata/mail/mime-bad-8bit-filename.raw", attachments: []string{"管理.doc"}},
		{file: "enmime-testdata/mail/mime-unquoted-tspecials-param.raw", attachments: []string{"Invoice_(302232133150612).pdf"}},
		{file: "enmime-testdata/mail/mime-bad-content-type.raw", attachments: []string{"Invoice_302232133150612.pdf"}},
		{file: "enmime-testdata/mail/non-mime-missing-charset.raw", textHas: "Euro Sign"},
		{file: "enmime-testdata/mail/multipart-wo-boundary.raw", textHas: "without boundary", warnHas: "without a boundary"},
		{file: "enmime-testdata/mail/erroneous.raw", textHas: "Not an RFC-822 Document"},
		{file: "enmime-testdata/low-quality/bad-header-start.raw", subject: "plain text", from: "james@makita.skynet", warnHas: "white space"},
		{file: "enmime-testdata/low-quality/bad-header-wrap.raw", attachments: []string{"7DDA4_foo_9E5D72.zip"}, warnHas: "not a field"},
		{file: "enmime-testdata/low-quality/bad-final-boundary.raw", textHas: "A text section", attachments: []string{"foo_9E5D72.zip"}, warnHas: "closing"},
		{file: "enmime-testdata/low-quality/malformed-base64-attach.raw", attachments: []string{"some.doc"}, warnHas: "damaged"},
		{file: "enmime-testdata/low-quality/unk-encoding-part.raw", warnHas: "unknown transfer encoding"},
		{file: "enmime-testdata/low-quality/unk-charset-html-only.raw", textHas: "Hello World!"},
		{file: "enmime-testdata/mail/header-only.raw", subject: "Attachment", warnHas: "boundary"},
		{file: "nodemailer-mailparser/nodemailer.eml", subject: "Nodemailer is unicode friendly ✔ (1476358788189)", textHas: "Hello to myself!",
			attachments: []string{"part-1.2", "image.png", "nyan cat ✔.gif", "notes.txt"}},
		{file: "nodemailer-mailparser/base64encodedroot.eml", attachments: []string{"screenshot.png"}},
		{file: "emlx/terhechte-emlx/4.emlx", subject: "文本➕单照片", textHas: "好看的呀小狗"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			data := fixture(t, tt.file)
			if strings.HasSuffix(tt.file, ".emlx") {
				data = data[bytes.IndexByte(data, '\n')+1:]
			}
			m := parseBytes(t, data)
			if tt.subject != "" && m.Subject != tt.subject {
				t.Errorf("subject = %q, want %q", m.Subject, tt.subject)
			}
			if tt.from != "" && m.From.Addr != tt.from {
				t.Errorf("from = %q, want %q", m.From.Addr, tt.from)
			}
			if tt.textHas != "" && !strings.Contains(m.Text, tt.textHas) {
				t.Errorf("text %q lacks %q", m.Text, tt.textHas)
			}
			if tt.textLacks != "" && strings.Contains(m.Text, tt.textLacks) {
				t.Errorf("text %q contains %q", m.Text, tt.textLacks)
			}
			if tt.attachments != nil && strings.Join(attachmentNames(m), "|") != strings.Join(tt.attachments, "|") {
				t.Errorf("attachments = %q, want %q", attachmentNames(m), tt.attachments)
			}
			if tt.warnHas != "" && !strings.Contains(strings.Join(m.Warnings, "\n"), tt.warnHas) {
				t.Errorf("warnings %q lack %q", m.Warnings, tt.warnHas)
			}
		})
	}
}

// Every fixture parses without error and yields valid, printable text.
func TestParseEveryFixture(t *testing.T) {
	var n int
	err := filepath.Walk(fixtures, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.Contains(p, "Attachments") {
			return err
		}
		n++
		data, _ := os.ReadFile(p)
		m, err := Parse(bytes.NewReader(data), Options{})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		for _, s := range append([]string{m.Subject, m.Text, m.From.Name}, attachmentNames(m)...) {
			if strings.ContainsRune(s, 0) || !isValidText(s) {
				t.Errorf("%s: invalid text %q", p, s)
			}
		}
		if m.Size != int64(len(data)) {
			t.Errorf("%s: size %d, want %d", p, m.Size, len(data))
		}
		return nil
	})
	if os.IsNotExist(err) {
		t.Skip("shared fixtures are absent")
	}
	if n < 50 {
		t.Fatalf("only %d fixtures found", n)
	}
}

func isValidText(s string) bool {
	return strings.ToValidUTF8(s, "\x00") == s
}

func TestParseHeaders(t *testing.T) {
	raw := "From: =?ISO-8859-1?Q?Andr=E9_P=E9rez?= <Andre@Example.COM>\r\n" +
		"To: a@x.org, \"B, Bee\" <b@x.org>\r\n" +
		"Cc: undisclosed-recipients:;\r\n" +
		"Subject: =?utf-8?B?w4ggdW4gdGVzdA==?=\r\n" +
		"Date: Tue, 3 Feb 2026 10:00:00 +0100 (CET)\r\n" +
		"Message-ID: <abc@x>\r\n" +
		"In-Reply-To: <parent@x> (comment)\r\n" +
		"References: <root@x>\r\n <parent@x>\r\n" +
		"X-GM-THRID: 1234567890\r\n" +
		"\r\nbody\r\n"
	m := parseBytes(t, []byte(raw))
	if m.From.Name != "André Pérez" || m.From.Addr != "andre@example.com" {
		t.Errorf("from = %+v", m.From)
	}
	if len(m.To) != 2 || m.To[1].Name != "B, Bee" || m.To[1].Addr != "b@x.org" {
		t.Errorf("to = %+v", m.To)
	}
	if m.Subject != "È un test" {
		t.Errorf("subject = %q", m.Subject)
	}
	want := time.Date(2026, 2, 3, 9, 0, 0, 0, time.UTC)
	if !m.Date.Equal(want) {
		t.Errorf("date = %v, want %v", m.Date, want)
	}
	if m.MessageID != "abc@x" || strings.Join(m.InReplyTo, ",") != "parent@x" || strings.Join(m.References, ",") != "root@x,parent@x" {
		t.Errorf("ids = %q %q %q", m.MessageID, m.InReplyTo, m.References)
	}
	if m.GmailThreadID != "1234567890" {
		t.Errorf("gm thread = %q", m.GmailThreadID)
	}
	if m.Text != "body" {
		t.Errorf("text = %q", m.Text)
	}
}

func TestParseHostile(t *testing.T) {
	bigHeader := "Subject: kept\r\nX-Junk: " + strings.Repeat("a", 1<<20) + "\r\n" + strings.Repeat("X-More: b\r\n", 20000) + "\r\nthe body survives\r\n"
	latin := "Subject: caf\xe9 cr\xe8me\r\nFrom: J\xfcrgen <j@x.de>\r\n\r\nna\xefve body\r\n"
	unknownCharset := "Subject: x\r\nContent-Type: text/plain; charset=x-no-such-charset\r\n\r\nr\xe9sum\xe9\r\n"
	script := "Content-Type: text/html\r\n\r\n<html><head><title>t</title><style>p{}</style></head><body><script>alert('x')</script><p>Hello &amp; welcome</p><!-- hidden --><div>bye</div></body></html>"
	deep := "Content-Type: multipart/mixed; boundary=b0\r\n\r\n"
	for i := 0; i < 40; i++ {
		deep += fmt.Sprintf("--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n", i, i+1)
	}
	deep += "--b40\r\nContent-Type: text/plain\r\n\r\ndeep text\r\n"
	var many strings.Builder
	many.WriteString("Content-Type: multipart/mixed; boundary=zz\r\n\r\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&many, "--zz\r\nContent-Type: text/plain\r\n\r\npart %d\r\n", i)
	}
	many.WriteString("--zz--\r\n")

	tests := []struct {
		name    string
		raw     string
		check   func(*Message) string
		warnHas string
	}{
		{"1 MiB header", bigHeader, func(m *Message) string {
			if m.Subject != "kept" || m.Text != "the body survives" {
				return fmt.Sprintf("subject %q text %q", m.Subject, m.Text)
			}
			return ""
		}, "header exceeds"},
		{"8-bit headers", latin, func(m *Message) string {
			if m.Subject != "café crème" || m.From.Name != "Jürgen" || m.Text != "naïve body" {
				return fmt.Sprintf("subject %q from %q text %q", m.Subject, m.From.Name, m.Text)
			}
			return ""
		}, "Windows-1252"},
		{"unknown charset", unknownCharset, func(m *Message) string {
			if m.Text != "résumé" {
				return fmt.Sprintf("text %q", m.Text)
			}
			return ""
		}, "unknown charset"},
		{"html with script", script, func(m *Message) string {
			if m.Text != "Hello & welcome\n\nbye" {
				return fmt.Sprintf("text %q", m.Text)
			}
			return ""
		}, ""},
		{"deep nesting", deep, func(m *Message) string {
			if strings.Contains(m.Text, "deep text") {
				return "text below the depth limit was read"
			}
			return ""
		}, "nesting deeper"},
		{"many parts", many.String(), func(m *Message) string {
			if !strings.Contains(m.Text, "part 0") || strings.Contains(m.Text, "part 1999") {
				return "part limit not applied"
			}
			return ""
		}, "MIME parts"},
		{"empty body", "Subject: only\r\n", func(m *Message) string {
			if m.Subject != "only" || m.Text != "" {
				return fmt.Sprintf("subject %q text %q", m.Subject, m.Text)
			}
			return ""
		}, ""},
		{"nul bytes", "Subject: a\x00b\r\n\r\nx\x00y\r\n", func(m *Message) string {
			if m.Subject != "ab" || m.Text != "xy" {
				return fmt.Sprintf("subject %q text %q", m.Subject, m.Text)
			}
			return ""
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parseBytes(t, []byte(tt.raw))
			if msg := tt.check(m); msg != "" {
				t.Error(msg)
			}
			if tt.warnHas != "" && !strings.Contains(strings.Join(m.Warnings, "\n"), tt.warnHas) {
				t.Errorf("warnings %q lack %q", m.Warnings, tt.warnHas)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	if _, err := Parse(strings.NewReader(""), Options{}); err != ErrEmpty {
		t.Fatalf("err = %v, want ErrEmpty", err)
	}
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(b []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > z.n {
		b = b[:z.n]
	}
	clear(b)
	z.n -= int64(len(b))
	return len(b), nil
}

// A 100 MiB attachment streams through the parser to the attachment sink
// with its size and hash intact.
func TestParseHugeAttachmentStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 137 MB")
	}
	const size = 100 << 20
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprint(pw, "Subject: big\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n--XX\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"+
			"--XX\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"../../etc/passwd\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.NewEncoder(base64.StdEncoding, &lineWrapper{w: pw})
		io.Copy(enc, &zeroReader{n: size})
		enc.Close()
		fmt.Fprint(pw, "\r\n--XX--\r\n")
		pw.Close()
	}()
	var got int64
	h := sha256.New()
	m, err := Parse(pr, Options{Attachment: func(a Attachment, r io.Reader) (string, int64, string, error) {
		n, err := io.Copy(h, r)
		got = n
		return "blob", n, hex.EncodeToString(h.Sum(nil)), err
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	io.Copy(want, &zeroReader{n: size})
	if got != size || len(m.Attachments) != 1 || m.Attachments[0].SHA256 != hex.EncodeToString(want.Sum(nil)) {
		t.Fatalf("attachment size %d, attachments %+v", got, m.Attachments)
	}
	if m.Attachments[0].Filename != "passwd" {
		t.Errorf("filename %q was not reduced to a base name", m.Attachments[0].Filename)
	}
	if m.Text != "see attached" {
		t.Errorf("text = %q", m.Text)
	}
}

type lineWrapper struct {
	w   io.Writer
	col int
}

func (l *lineWrapper) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(76-l.col, len(b))
		if _, err := l.w.Write(b[:k]); err != nil {
			return n, err
		}
		n += k
		b = b[k:]
		l.col += k
		if l.col == 76 {
			l.w.Write([]byte("\r\n"))
			l.col = 0
		}
	}
	return n, nil
}

func TestHTMLToText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<p>a</p><p>b</p>", "a\n\nb"},
		{"x<br>y<br/>z", "x\ny\nz"},
		{"<table><tr><td>1</td><td>2</td></tr></table>", "1\t2"},
		{`<a href="x>y">link</a> &euro;5 &#233;`, "link €5 é"},
		{"<script>var a = '<p>no</p>';</script>yes", "yes"},
		{"<style>p{}</style><STYLE>x</STYLE>ok", "ok"},
		{"unterminated <b", "unterminated <b"},
		{"<!-- never closed", ""},
		{"a   b\n\n\n\nc", "a b\n\nc"},
	}
	for _, tt := range tests {
		if got := HTMLToText(tt.in); got != tt.want {
			t.Errorf("HTMLToText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSafeFilename(t *testing.T) {
	tests := []struct{ in, want string }{
		{"../../etc/passwd", "passwd"},
		{`C:\Windows\evil.exe`, "evil.exe"},
		{".bashrc", "bashrc"},
		{"a\x00b\nc.txt", "abc.txt"},
		{"what?.pdf", "what_.pdf"},
		{"=?utf-8?q?r=C3=A9sum=C3=A9.pdf?=", "résumé.pdf"},
		{strings.Repeat("é", 300) + ".pdf", strings.Repeat("é", 98) + ".pdf"},
	}
	for _, tt := range tests {
		if got := SafeFilename(tt.in); got != tt.want {
			t.Errorf("SafeFilename(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParse feeds arbitrary bytes to the parser: it must never panic, must
// return valid UTF-8 text, and must account for every byte it read. The seed
// corpus in testdata/fuzz/FuzzParse holds real messages from the fixtures
// and hand-made malformed ones.
func FuzzParse(f *testing.F) {
	f.Add([]byte("Subject: x\r\n\r\nbody"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--a--"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(bytes.NewReader(data), Options{MaxParts: 50, MaxTextBytes: 1 << 16})
		if err != nil {
			if len(data) != 0 {
				t.Fatalf("error on non-empty input: %v", err)
			}
			return
		}
		if m.Size != int64(len(data)) {
			t.Fatalf("size %d, read %d", m.Size, len(data))
		}
		for _, s := range append([]string{m.Subject, m.Text, m.From.Name, m.From.Addr}, attachmentNames(m)...) {
			if !isValidText(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("invalid text %q", s)
			}
		}
		for _, a := range m.Attachments {
			if strings.ContainsAny(a.Filename, `/\`) || strings.HasPrefix(a.Filename, ".") {
				t.Fatalf("unsafe attachment name %q", a.Filename)
			}
		}
	})
}
