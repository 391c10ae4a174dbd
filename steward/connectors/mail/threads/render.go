package threads

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Render defaults.
const (
	DefaultRenderChars     = 24000
	DefaultPerMessageChars = 6000
)

// RenderOptions bound Render.
type RenderOptions struct {
	// MaxChars caps the whole rendering (default 24,000 characters).
	MaxChars int
	// MaxPerMessage caps each body (default 6,000 characters).
	MaxPerMessage int
	// Location formats dates (default the local zone).
	Location *time.Location
}

// Render is the thread as chronological plain text for a model prompt: a
// header line per message (index, date, sender, recipients, attachments with
// their ids) and its body between markers, so that the mail's own text can be
// told apart from the instructions around it. When the thread is too long the
// first message and the newest ones are kept and the omission is stated.
func Render(t *Thread, opts RenderOptions) string {
	if opts.MaxChars <= 0 {
		opts.MaxChars = DefaultRenderChars
	}
	if opts.MaxPerMessage <= 0 {
		opts.MaxPerMessage = DefaultPerMessageChars
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	n := len(t.Messages)
	parts := make([]string, n)
	for i := range t.Messages {
		parts[i] = renderMessage(&t.Messages[i], i+1, n, opts)
	}
	head := fmt.Sprintf("Thread %s (account %s, %d messages): %s\n", t.Key(), t.Account, n, t.Subject)
	// Room for the omission marker is kept whether or not it is needed.
	budget := opts.MaxChars - utf8.RuneCountInString(head) - len("[99999 earlier messages omitted]\n")
	// Keep the newest messages that fit, then the first if it still fits.
	var tail []string
	used, first := 0, 0
	for i := n - 1; i >= 0; i-- {
		c := utf8.RuneCountInString(parts[i])
		if used+c > budget && len(tail) > 0 {
			break
		}
		used += c
		tail = append(tail, parts[i])
		first = i
	}
	var b strings.Builder
	b.WriteString(head)
	if first > 0 {
		omitted := first
		if c := utf8.RuneCountInString(parts[0]); used+c <= budget {
			b.WriteString(parts[0])
			omitted--
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "[%d earlier messages omitted]\n", omitted)
		}
	}
	for i := len(tail) - 1; i >= 0; i-- {
		b.WriteString(tail[i])
	}
	return b.String()
}

func renderMessage(m *Message, i, n int, opts RenderOptions) string {
	var b strings.Builder
	from := m.FromAddr
	if m.FromName != "" {
		from = fmt.Sprintf("%s <%s>", m.FromName, m.FromAddr)
	}
	if m.FromMe {
		from += " (the user)"
	}
	fmt.Fprintf(&b, "\n--- message %d/%d · id %d · %s · from %s\n", i, n, m.ID, m.Date.In(opts.Location).Format("2006-01-02 15:04 MST"), from)
	if m.To != "" {
		fmt.Fprintf(&b, "To: %s\n", m.To)
	}
	if m.Cc != "" {
		fmt.Fprintf(&b, "Cc: %s\n", m.Cc)
	}
	fmt.Fprintf(&b, "Subject: %s\n", m.Subject)
	for _, a := range m.Attachments {
		fmt.Fprintf(&b, "Attachment %d: %s (%s, %d bytes)\n", a.ID, a.Filename, a.ContentType, a.Size)
	}
	body := strings.TrimSpace(m.Body)
	switch {
	case body == "":
		b.WriteString("[no readable body]\n")
	default:
		if utf8.RuneCountInString(body) > opts.MaxPerMessage {
			body = string([]rune(body)[:opts.MaxPerMessage]) + " […]"
		}
		b.WriteString("<<<mail body\n")
		// A body cannot close its own fence and pass text off as ours.
		b.WriteString(strings.ReplaceAll(body, ">>>", "> > >"))
		b.WriteString("\n>>>\n")
	}
	return b.String()
}
