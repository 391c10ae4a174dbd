// Package outbox sends mail for Steward: it turns an approved draft into a
// complete, journaled message (steward/writeops), submits it through the
// account's SMTP server (or Mail.app on macOS), files a copy in the Maildir
// Sent folder, and confirms the send later against the mail mirror with the
// spec's evidence rules ("Confirmation Evidence And Retry Boundaries").
package outbox

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/emersion/go-message/mail"
)

// Attachment is one file of an outgoing message. Its content is kept in the
// outbox's blob folder under its SHA-256 from the moment the message is
// journaled, so a file changed or deleted after approval cannot change
// what is sent.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	// Source says where it came from: a path or "mail attachment <id>".
	Source string `json:"source"`
}

// Message is the complete executable input of a send: everything needed to
// build the same RFC 5322 message at any later time. It is what the journal
// stores.
type Message struct {
	Account     string       `json:"account"`
	From        string       `json:"from"`
	FromName    string       `json:"fromName,omitempty"`
	To          []string     `json:"to"`
	Cc          []string     `json:"cc,omitempty"`
	Bcc         []string     `json:"bcc,omitempty"`
	Subject     string       `json:"subject"`
	Body        string       `json:"body"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// MessageID is generated when the message is journaled (without angle
	// brackets) so that every build of it carries the same one.
	MessageID string `json:"messageId"`
	// InReplyTo and References link a reply to its original.
	InReplyTo  string   `json:"inReplyTo,omitempty"`
	References []string `json:"references,omitempty"`
	// ReplyToID is the mirror id of the original message of a reply.
	ReplyToID string `json:"replyToId,omitempty"`
	// SendAt is set on scheduled sends (RFC 3339).
	SendAt string `json:"sendAt,omitempty"`
}

// Recipients returns the envelope recipients: To, Cc and Bcc.
func (m *Message) Recipients() []string {
	out := make([]string, 0, len(m.To)+len(m.Cc)+len(m.Bcc))
	out = append(out, m.To...)
	out = append(out, m.Cc...)
	return append(out, m.Bcc...)
}

// newMessageID returns a random Message-ID under the sender's domain.
func newMessageID(from string) string {
	domain := "steward.local"
	if _, d, ok := strings.Cut(from, "@"); ok && d != "" {
		domain = d
	}
	var b [12]byte
	rand.Read(b[:])
	return "steward." + hex.EncodeToString(b[:]) + "@" + domain
}

// BlobOpener opens attachment content by SHA-256.
type BlobOpener interface {
	Open(sha string) (io.ReadCloser, error)
}

// Build renders m as an RFC 5322 message dated date: RFC 2047 encoded
// headers, a quoted-printable text part, base64 attachments. Bcc is not
// written into the header (it only reaches the envelope).
func Build(m *Message, date time.Time, blobs BlobOpener) ([]byte, error) {
	var h gomail.Header
	h.SetDate(date)
	h.SetAddressList("From", []*gomail.Address{{Name: m.FromName, Address: m.From}})
	h.SetAddressList("To", addrList(m.To))
	if len(m.Cc) > 0 {
		h.SetAddressList("Cc", addrList(m.Cc))
	}
	if strings.Contains(m.Subject, "=?") {
		// Text that looks like an encoded word would be decoded by every
		// reader; encoding the whole subject keeps it literal.
		h.Set("Subject", encodeWords(m.Subject))
	} else {
		h.SetSubject(m.Subject)
	}
	h.SetMessageID(m.MessageID)
	if m.InReplyTo != "" {
		h.SetMsgIDList("In-Reply-To", []string{m.InReplyTo})
	}
	if len(m.References) > 0 {
		h.SetMsgIDList("References", m.References)
	}
	h.Set("MIME-Version", "1.0")
	h.Set("User-Agent", "Steward")
	body := toCRLF(m.Body)
	var buf bytes.Buffer
	if len(m.Attachments) == 0 {
		h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
		h.Set("Content-Transfer-Encoding", "quoted-printable")
		w, err := gomail.CreateSingleInlineWriter(&buf, h)
		if err != nil {
			return nil, fmt.Errorf("build message: %w", err)
		}
		if _, err := io.WriteString(w, body); err != nil {
			return nil, fmt.Errorf("build message: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("build message: %w", err)
		}
		return buf.Bytes(), nil
	}
	mw, err := gomail.CreateWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("build message: %w", err)
	}
	var ih gomail.InlineHeader
	ih.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	ih.Set("Content-Transfer-Encoding", "quoted-printable")
	tw, err := mw.CreateSingleInline(ih)
	if err != nil {
		return nil, fmt.Errorf("build message: %w", err)
	}
	if _, err := io.WriteString(tw, body); err != nil {
		return nil, fmt.Errorf("build message: %w", err)
	}
	tw.Close()
	for _, a := range m.Attachments {
		if err := writeAttachment(mw, a, blobs); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("build message: %w", err)
	}
	return buf.Bytes(), nil
}

func writeAttachment(mw *gomail.Writer, a Attachment, blobs BlobOpener) error {
	if blobs == nil {
		return fmt.Errorf("build message: attachment %s: no blob store", a.Filename)
	}
	src, err := blobs.Open(a.SHA256)
	if err != nil {
		return fmt.Errorf("build message: attachment %s: %w", a.Filename, err)
	}
	defer src.Close()
	var ah gomail.AttachmentHeader
	ah.SetContentType(a.ContentType, nil)
	ah.SetFilename(a.Filename)
	ah.Set("Content-Transfer-Encoding", "base64")
	w, err := mw.CreateAttachment(ah)
	if err != nil {
		return fmt.Errorf("build message: attachment %s: %w", a.Filename, err)
	}
	if _, err := io.Copy(w, src); err != nil {
		return fmt.Errorf("build message: attachment %s: %w", a.Filename, err)
	}
	return w.Close()
}

func addrList(list []string) []*gomail.Address {
	out := make([]*gomail.Address, 0, len(list))
	for _, a := range list {
		out = append(out, &gomail.Address{Address: a})
	}
	return out
}

func toCRLF(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// encodeWords encodes s as RFC 2047 B encoded words of at most 75
// characters each, split between runes.
func encodeWords(s string) string {
	const maxRaw = 45 // 45 bytes → 60 base64 characters + 12 of "=?utf-8?b??="
	var words []string
	for len(s) > 0 {
		n := min(len(s), maxRaw)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, " ")
}

// contentTypeOf guesses an attachment's media type from its name.
func contentTypeOf(name string) string {
	if t := mime.TypeByExtension(strings.ToLower(filepath.Ext(name))); t != "" {
		return t
	}
	return "application/octet-stream"
}
