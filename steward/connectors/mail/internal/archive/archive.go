// Package archive writes synthetic mail stores (Maildir trees in both
// layouts, Apple Mail .emlx and .partial.emlx files) for the mail
// connector's tests and benchmarks.
package archive

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Attachment is a file attached to a Message.
type Attachment struct {
	Name        string
	ContentType string
	Data        []byte
}

// Message is what Render turns into RFC 5322 bytes.
type Message struct {
	ID         string // Message-ID without brackets; "" writes none
	From       string // "Name <addr>" or addr
	To, Cc     []string
	Subject    string
	Body       string
	HTML       bool // send the body as text/html only
	Date       time.Time
	InReplyTo  string
	References []string
	GmThread   string
	Headers    []string // extra raw header lines
	Attach     []Attachment
}

// Render returns the message as CRLF RFC 5322 bytes: text/plain (or
// text/html) quoted-printable, multipart/mixed with base64 parts when it has
// attachments. Non-ASCII subjects are RFC 2047-encoded.
func Render(m Message) []byte {
	var b bytes.Buffer
	h := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if m.ID != "" {
		h("Message-ID", "<"+m.ID+">")
	}
	h("From", m.From)
	h("To", strings.Join(m.To, ", "))
	h("Cc", strings.Join(m.Cc, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	if !m.Date.IsZero() {
		h("Date", m.Date.Format(time.RFC1123Z))
	}
	if m.InReplyTo != "" {
		h("In-Reply-To", "<"+m.InReplyTo+">")
	}
	if len(m.References) > 0 {
		refs := make([]string, len(m.References))
		for i, r := range m.References {
			refs[i] = "<" + r + ">"
		}
		h("References", strings.Join(refs, " "))
	}
	h("X-GM-THRID", m.GmThread)
	for _, l := range m.Headers {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	ctype := "text/plain; charset=utf-8"
	if m.HTML {
		ctype = "text/html; charset=utf-8"
	}
	if len(m.Attach) == 0 {
		fmt.Fprintf(&b, "Content-Type: %s\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", ctype)
		writeQP(&b, m.Body)
		return b.Bytes()
	}
	boundary := fmt.Sprintf("=_b%08x", len(m.Subject)*7919+len(m.Body))
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n", boundary)
	fmt.Fprintf(&b, "--%s\r\nContent-Type: %s\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", boundary, ctype)
	writeQP(&b, m.Body)
	for _, a := range m.Attach {
		ct := a.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		fmt.Fprintf(&b, "\r\n--%s\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n",
			boundary, ct, a.Name, a.Name)
		enc := base64.StdEncoding.EncodeToString(a.Data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes()
}

func writeQP(b *bytes.Buffer, s string) {
	w := quotedprintable.NewWriter(b)
	w.Write([]byte(strings.ReplaceAll(s, "\n", "\r\n")))
	w.Close()
	b.WriteString("\r\n")
}

// Maildir writes messages into a Maildir tree.
type Maildir struct {
	Root string
	// PlusPlus writes sub-folders Maildir++ style (".Sent", ".Work.Project")
	// instead of nested ("Sent/", "Work/Project/").
	PlusPlus bool
	seq      atomic.Int64
}

// Dir returns the folder holding mailbox ("INBOX" is the root).
func (m *Maildir) Dir(mailbox string) string {
	if mailbox == "INBOX" {
		return m.Root
	}
	if m.PlusPlus {
		return filepath.Join(m.Root, "."+strings.ReplaceAll(mailbox, "/", "."))
	}
	return filepath.Join(m.Root, filepath.FromSlash(mailbox))
}

// Add writes msg into mailbox: into new/ when flags is "", else into cur/
// with the flags ("S", "FS") in the name. It returns the file path.
func (m *Maildir) Add(mailbox string, msg Message, flags string) (string, error) {
	dir := m.Dir(mailbox)
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return "", err
		}
	}
	n := m.seq.Add(1)
	ts := msg.Date.Unix()
	if msg.Date.IsZero() {
		ts = time.Now().Unix()
	}
	name := fmt.Sprintf("%d.M%dP1.synthetic", ts, n)
	var path string
	if flags == "" {
		path = filepath.Join(dir, "new", name)
	} else {
		path = filepath.Join(dir, "cur", name+":2,"+flags)
	}
	if err := os.WriteFile(path, Render(msg), 0o644); err != nil {
		return "", err
	}
	if !msg.Date.IsZero() {
		os.Chtimes(path, msg.Date, msg.Date)
	}
	return path, nil
}

// EMLX returns msg framed as Mail's .emlx: the byte count, the message and a
// plist trailer carrying flags.
func EMLX(raw []byte, flags uint64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d      \n", len(raw))
	b.Write(raw)
	fmt.Fprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"+
		"<plist version=\"1.0\">\n<dict>\n\t<key>flags</key>\n\t<integer>%d</integer>\n</dict>\n</plist>\n", flags)
	return b.Bytes()
}

// PartialEMLX returns msg as a .partial.emlx whose attachment bodies were
// left out (as Mail does before download), plus the attachments keyed by
// IMAP part number for the Attachments/<n>/<part>/ folder.
func PartialEMLX(msg Message, flags uint64) ([]byte, map[string]Attachment) {
	raw := string(Render(msg))
	parts := map[string]Attachment{}
	for i, a := range msg.Attach {
		enc := base64.StdEncoding.EncodeToString(a.Data)
		var lines []string
		for len(enc) > 76 {
			lines = append(lines, enc[:76])
			enc = enc[76:]
		}
		lines = append(lines, enc)
		body := strings.Join(lines, "\r\n") + "\r\n"
		header := "Content-Transfer-Encoding: base64\r\n"
		raw = strings.Replace(raw, header+"\r\n"+body, header+fmt.Sprintf("X-Apple-Content-Length: %d\r\n", len(a.Data))+"\r\n\r\n", 1)
		parts[fmt.Sprint(i+2)] = a
	}
	return EMLX([]byte(raw), flags), parts
}

// WriteApple writes msg into an Apple Mail mailbox folder
// (<root>/<Mailbox>.mbox/…/Messages/<n>.emlx), as a partial file with its
// attachments under Attachments/ when partial is set.
func WriteApple(root, mailbox string, n int, msg Message, flags uint64, partial bool) (string, error) {
	var mbox string
	for _, c := range strings.Split(mailbox, "/") {
		mbox = filepath.Join(mbox, c+".mbox")
	}
	data := filepath.Join(root, mbox, "3F2A-UUID", "Data")
	msgs := filepath.Join(data, "Messages")
	if err := os.MkdirAll(msgs, 0o755); err != nil {
		return "", err
	}
	if !partial {
		p := filepath.Join(msgs, fmt.Sprintf("%d.emlx", n))
		return p, os.WriteFile(p, EMLX(Render(msg), flags), 0o644)
	}
	body, parts := PartialEMLX(msg, flags)
	p := filepath.Join(msgs, fmt.Sprintf("%d.partial.emlx", n))
	if err := os.WriteFile(p, body, 0o644); err != nil {
		return "", err
	}
	for part, a := range parts {
		dir := filepath.Join(data, "Attachments", fmt.Sprint(n), part)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, a.Name), a.Data, 0o644); err != nil {
			return "", err
		}
	}
	return p, nil
}
