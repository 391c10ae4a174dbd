// Package message parses RFC 5322 / MIME messages into the normalised fields
// the mail mirror stores: identity and reply headers, participants, a plain
// text body and attachment metadata. It is built for hostile input: malformed
// MIME, 8-bit or oversized headers, unknown charsets and transfer encodings,
// missing boundaries and huge attachments yield a message with what is usable
// and a list of warnings, never a panic or an unbounded allocation.
package message

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"time"

	gomessage "github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decodes ISO-8859-*, Windows-125x, KOI8, GB18030, Shift-JIS …
	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
	"golang.org/x/text/unicode/norm"
)

// Defaults for Options.
const (
	DefaultMaxHeaderBytes = 256 << 10
	DefaultMaxTextBytes   = 4 << 20
	DefaultMaxParts       = 500
	DefaultMaxDepth       = 16
)

// Address is one mailbox of an address header.
type Address struct {
	Name string `json:"name,omitempty"`
	Addr string `json:"addr"`
}

// String formats the address as "Name <addr>" or just addr.
func (a Address) String() string {
	if a.Name == "" {
		return a.Addr
	}
	if a.Addr == "" {
		return a.Name
	}
	return a.Name + " <" + a.Addr + ">"
}

// Attachment describes one attachment (or inline non-text part).
type Attachment struct {
	// Part is the IMAP-style section number ("2", "1.3"), the key Apple Mail
	// uses for attachments of partial messages.
	Part        string
	Filename    string
	ContentType string
	Inline      bool
	// Size and SHA256 describe the decoded content. Both are zero when the
	// content is missing (a partial message whose file is not on disk).
	Size   int64
	SHA256 string
	// Ref is what Options.Attachment returned for the content (a blob key).
	Ref string
	// DeclaredSize is the size Apple Mail recorded for content it did not download.
	DeclaredSize int64
	// Missing reports content that is not available locally.
	Missing bool
}

// Message is a parsed message.
type Message struct {
	MessageID     string // without angle brackets; "" when absent
	Subject       string
	From          Address
	To, Cc, Bcc   []Address
	ReplyTo       []Address
	Date          time.Time // zero when absent or unreadable
	InReplyTo     []string
	References    []string
	GmailThreadID string // X-GM-THRID
	// ListID, Precedence and AutoSubmitted are the headers that mark list,
	// bulk and machine-generated mail (List-Id, Precedence, Auto-Submitted;
	// the latter two lower-cased), for the promotion and Action Center
	// prefilters.
	ListID, Precedence, AutoSubmitted string
	// Text is the readable body: text/plain parts, else HTML converted to text.
	Text string
	// FromHTML reports that Text came from HTML.
	FromHTML    bool
	Attachments []Attachment
	// Omitted reports parts whose content was not downloaded (Apple Mail
	// partial messages) and could not be found on disk.
	Omitted bool
	// Size is the number of raw bytes read.
	Size int64
	// Warnings describe what was repaired or skipped.
	Warnings []string
}

// Options bound and direct parsing.
type Options struct {
	MaxHeaderBytes int // per header block; default DefaultMaxHeaderBytes
	MaxTextBytes   int // total body text kept; default DefaultMaxTextBytes
	MaxParts       int // MIME parts visited; default DefaultMaxParts
	MaxDepth       int // multipart nesting; default DefaultMaxDepth
	// Attachment receives the decoded content of each attachment and returns
	// a reference to where it was stored. When nil the content is only hashed.
	Attachment func(a Attachment, content io.Reader) (ref string, size int64, sha string, err error)
	// External opens the content of a part that a partial .emlx left out
	// (Apple Mail keeps it under Attachments/<id>/<part>/). It returns
	// fs.ErrNotExist style errors when the content is not on disk.
	External func(part string, filename string) (io.ReadCloser, error)
}

func (o Options) withDefaults() Options {
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	if o.MaxParts <= 0 {
		o.MaxParts = DefaultMaxParts
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	return o
}

// ErrEmpty reports input with no header and no body.
var ErrEmpty = errors.New("message is empty")

// Parse reads one message from r. It returns an error only when nothing
// usable could be read (an I/O error before any byte, or empty input);
// problems inside the message become Warnings.
func Parse(r io.Reader, opts Options) (msg *Message, err error) {
	opts = opts.withDefaults()
	cr := &countingReader{r: r}
	p := &parser{opts: opts, msg: &Message{}}
	defer func() {
		if v := recover(); v != nil {
			// A bug in a decoder must not stop a backfill; keep what was parsed.
			p.warn("parser stopped early: %v", v)
			msg, err = p.finish(cr.n), nil
		}
	}()
	lr := newLineReader(cr)
	if _, peekErr := lr.br.Peek(1); peekErr != nil {
		if peekErr == io.EOF {
			return nil, ErrEmpty
		}
		return nil, fmt.Errorf("read message: %w", peekErr)
	}
	hr := readHeader(lr, opts.MaxHeaderBytes)
	p.msg.Warnings = append(p.msg.Warnings, hr.warnings...)
	p.headerFields(hr.h)
	root := p.entity(hr, lr.br, "", 0, true)
	p.collectText(root)
	// Drain so Size counts the whole message even when parts were skipped.
	io.Copy(io.Discard, lr.br)
	return p.finish(cr.n), nil
}

type parser struct {
	opts      Options
	msg       *Message
	parts     int
	textBytes int
}

func (p *parser) warn(format string, args ...any) {
	if len(p.msg.Warnings) < 50 {
		p.msg.Warnings = append(p.msg.Warnings, fmt.Sprintf(format, args...))
	}
}

func (p *parser) finish(n int64) *Message {
	p.msg.Size = n
	p.msg.Text = strings.TrimSpace(p.msg.Text)
	return p.msg
}

// node is a parsed MIME entity; only text leaves keep content.
type node struct {
	mediaType string
	text      string
	html      bool
	children  []*node
}

// entity parses one entity whose header has been read; body is the rest.
func (p *parser) entity(hr headerResult, body io.Reader, path string, depth int, top bool) *node {
	h := hr.h
	if hr.bodyStart != nil {
		body = io.MultiReader(bytes.NewReader(hr.bodyStart), body)
	}
	p.parts++
	mediaType, params := p.contentType(h, top)
	if strings.HasPrefix(mediaType, "multipart/") {
		boundary := params["boundary"]
		if boundary == "" {
			p.warn("part %s: %s without a boundary; read as text", partName(path), mediaType)
			mediaType = "text/plain"
		} else if depth >= p.opts.MaxDepth {
			p.warn("part %s: nesting deeper than %d; skipped", partName(path), p.opts.MaxDepth)
			return &node{mediaType: mediaType}
		} else {
			return p.multipart(mediaType, boundary, body, path, depth)
		}
	}
	leafPath := path
	if leafPath == "" {
		leafPath = "1"
	}
	disp, dparams := p.disposition(h)
	filename := decodeWord(firstNonEmpty(dparams["filename"], params["name"]))
	isText := mediaType == "text/plain" || mediaType == "text/html" || mediaType == "text/enriched"
	attach := disp == "attachment" || !isText || (filename != "" && disp != "inline")
	if top && isText && disp != "attachment" {
		attach = false
	}

	br := bufio.NewReaderSize(body, 4096)
	var external io.ReadCloser
	if declared := h.Get("X-Apple-Content-Length"); declared != "" && bodyIsBlank(br) {
		n, _ := strconv.ParseInt(strings.TrimSpace(declared), 10, 64)
		if p.opts.External != nil {
			if rc, err := p.opts.External(leafPath, filename); err == nil {
				external = rc
			}
		}
		if external == nil {
			p.msg.Omitted = true
			if attach {
				p.msg.Attachments = append(p.msg.Attachments, Attachment{Part: leafPath, Filename: cleanName(filename), ContentType: mediaType,
					Inline: disp == "inline", DeclaredSize: n, Missing: true})
			}
			return &node{mediaType: mediaType}
		}
		defer external.Close()
	}
	if attach {
		p.attachment(h, br, external, leafPath, mediaType, filename, disp == "inline")
		return &node{mediaType: mediaType}
	}
	text := p.readText(h, br, external, leafPath, mediaType, params["charset"])
	n := &node{mediaType: mediaType, text: text, html: mediaType == "text/html"}
	if n.html {
		n.text = HTMLToText(text)
	}
	return n
}

// multipart walks the parts of a multipart body.
func (p *parser) multipart(mediaType, boundary string, body io.Reader, path string, depth int) *node {
	n := &node{mediaType: mediaType}
	lr := newLineReader(body)
	dash := []byte("--" + boundary)
	// Skip the preamble.
	for {
		chunk, start, err := lr.next()
		if start {
			switch boundaryLine(chunk, dash) {
			case nextBoundary:
				goto parts
			case finalBoundary:
				return n
			}
		}
		if err != nil {
			p.warn("part %s: no %q boundary found; body skipped", partName(path), boundary)
			return n
		}
	}
parts:
	for i := 1; ; i++ {
		pb := &partBody{lr: lr, dash: dash}
		childPath := strconv.Itoa(i)
		if path != "" {
			childPath = path + "." + childPath
		}
		if p.parts >= p.opts.MaxParts {
			p.warn("more than %d MIME parts; the rest were skipped", p.opts.MaxParts)
			pb.drain()
			return n
		}
		plr := newLineReader(pb)
		hr := readHeader(plr, p.opts.MaxHeaderBytes)
		for _, w := range hr.warnings {
			p.warn("part %s: %s", childPath, w)
		}
		if c := p.entity(hr, plr.br, childPath, depth+1, false); c != nil {
			n.children = append(n.children, c)
		}
		io.Copy(io.Discard, plr.br)
		pb.drain()
		if pb.err != nil {
			p.warn("part %s: %v", childPath, pb.err)
			return n
		}
		switch pb.end {
		case finalBoundary:
			return n
		case notBoundary:
			p.warn("part %s: message ends before the closing %q boundary", partName(path), boundary)
			return n
		}
	}
}

func partName(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// bodyIsBlank reports whether the rest of br holds only white space (the
// shape of a part whose content Apple Mail did not download).
func bodyIsBlank(br *bufio.Reader) bool {
	b, _ := br.Peek(256)
	return len(bytes.TrimSpace(b)) == 0 && len(b) < 256
}

func (p *parser) contentType(h textproto.Header, top bool) (string, map[string]string) {
	v := h.Get("Content-Type")
	if strings.TrimSpace(v) == "" {
		return "text/plain", map[string]string{}
	}
	t, params, err := mime.ParseMediaType(v)
	if err != nil {
		t, params = lenientMediaType(v)
		if t == "" || !strings.Contains(t, "/") {
			p.warn("unreadable Content-Type %q; read as text/plain", clip([]byte(v), 60))
			return "text/plain", params
		}
	}
	return strings.ToLower(t), params
}

func (p *parser) disposition(h textproto.Header) (string, map[string]string) {
	v := h.Get("Content-Disposition")
	if strings.TrimSpace(v) == "" {
		return "", map[string]string{}
	}
	d, params, err := mime.ParseMediaType(v)
	if err != nil {
		d, params = lenientMediaType(v)
	}
	return strings.ToLower(d), params
}

var paramRe = regexp.MustCompile(`(?i)([a-z0-9_*.-]+)\s*=\s*("([^"]*)"|[^;\s]+)`)

// lenientMediaType reads "type/sub; a=b" when mime.ParseMediaType refuses it
// (duplicate parameters, unquoted specials, stray semicolons).
func lenientMediaType(v string) (string, map[string]string) {
	params := map[string]string{}
	v = strings.TrimSpace(v)
	end := strings.IndexAny(v, "; \t")
	if end < 0 {
		end = len(v)
	}
	t, rest := v[:end], v[end:]
	for _, m := range paramRe.FindAllStringSubmatch(rest, -1) {
		key := strings.ToLower(strings.TrimSuffix(m[1], "*"))
		val := m[2]
		if m[3] != "" || strings.HasPrefix(val, `"`) {
			val = m[3]
		}
		if _, dup := params[key]; !dup {
			params[key] = val
		}
	}
	return strings.ToLower(strings.TrimSpace(t)), params
}

// decoded returns the transfer-decoded (and, for text, charset-converted)
// content of a leaf. Unknown encodings and charsets fall back to raw bytes
// with a warning.
func (p *parser) decoded(h textproto.Header, body io.Reader, path string, convertCharset bool) io.Reader {
	hh := h.Copy()
	if !convertCharset {
		hh.Del("Content-Type")
	}
	e, err := gomessage.New(gomessage.Header{Header: hh}, body)
	if err != nil {
		switch {
		case gomessage.IsUnknownEncoding(err):
			p.warn("part %s: unknown transfer encoding %q; raw content kept", path, h.Get("Content-Transfer-Encoding"))
		case gomessage.IsUnknownCharset(err):
			// handled by the caller through cleanText
		default:
			p.warn("part %s: %v", path, err)
		}
	}
	if e == nil {
		return body
	}
	return e.Body
}

func (p *parser) readText(h textproto.Header, br *bufio.Reader, external io.Reader, path, mediaType, charset string) string {
	src := io.Reader(br)
	if external != nil {
		src = external
	}
	var r io.Reader
	if external != nil {
		// External files hold decoded bytes; only the charset applies.
		hh := h.Copy()
		hh.Del("Content-Transfer-Encoding")
		r = p.decoded(hh, src, path, true)
	} else {
		r = p.decoded(h, src, path, true)
	}
	budget := p.opts.MaxTextBytes - p.textBytes
	if budget <= 0 {
		p.warn("part %s: body text limit of %d bytes reached; part skipped", path, p.opts.MaxTextBytes)
		return ""
	}
	if mediaType == "text/html" {
		budget *= 4 // markup shrinks on conversion
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(budget)+1))
	if err != nil {
		p.warn("part %s: content damaged (%v); the readable part was kept", path, err)
	}
	if len(data) > budget {
		data = data[:budget]
		p.warn("part %s: text longer than %d bytes was cut", path, budget)
	}
	s, latin := cleanText(string(data))
	if latin {
		if charset != "" && !strings.EqualFold(charset, "utf-8") && !strings.EqualFold(charset, "us-ascii") {
			p.warn("part %s: unknown charset %q; read as Windows-1252", path, charset)
		} else {
			p.warn("part %s: 8-bit text without a valid charset; read as Windows-1252", path)
		}
	}
	s = normalizeNewlines(s)
	p.textBytes += len(s)
	return s
}

func (p *parser) attachment(h textproto.Header, br *bufio.Reader, external io.Reader, path, mediaType, filename string, inline bool) {
	var r io.Reader
	if external != nil {
		r = external
	} else {
		r = p.decoded(h, br, path, false)
	}
	a := Attachment{Part: path, Filename: cleanName(filename), ContentType: mediaType, Inline: inline}
	if a.Filename == "" {
		a.Filename = defaultName(path, mediaType)
	}
	er := &errTrap{r: r}
	if p.opts.Attachment != nil {
		ref, size, sum, err := p.opts.Attachment(a, er)
		if err != nil {
			p.warn("part %s: attachment not stored: %v", path, err)
			a.Missing = true
		} else {
			a.Ref, a.Size, a.SHA256 = ref, size, sum
		}
	} else {
		hsh := sha256.New()
		n, _ := io.Copy(hsh, er)
		a.Size, a.SHA256 = n, hex.EncodeToString(hsh.Sum(nil))
	}
	if er.err != nil {
		p.warn("part %s: attachment content damaged (%v); the readable part was kept", path, er.err)
	}
	p.msg.Attachments = append(p.msg.Attachments, a)
}

// errTrap turns a decoding error into EOF so that a damaged attachment is
// kept up to the damage, and remembers the error.
type errTrap struct {
	r   io.Reader
	err error
}

func (t *errTrap) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if err != nil && err != io.EOF {
		t.err = err
		return n, io.EOF
	}
	return n, err
}

// collectText chooses the body text: inside multipart/alternative the first
// plain-text alternative, else the first HTML one; elsewhere the text of every
// inline part in order.
func (p *parser) collectText(root *node) {
	var parts []string
	html := false
	var walk func(n *node)
	walk = func(n *node) {
		if n.mediaType == "multipart/alternative" && len(n.children) > 0 {
			if c := pickAlternative(n.children); c != nil {
				walk(c)
			}
			return
		}
		if len(n.children) > 0 {
			for _, c := range n.children {
				walk(c)
			}
			return
		}
		if strings.TrimSpace(n.text) != "" {
			parts = append(parts, strings.TrimSpace(n.text))
			html = html || n.html
		}
	}
	walk(root)
	p.msg.Text = strings.Join(parts, "\n\n")
	p.msg.FromHTML = html
}

func pickAlternative(children []*node) *node {
	for _, c := range children {
		if hasText(c, false) {
			return c
		}
	}
	for _, c := range children {
		if hasText(c, true) {
			return c
		}
	}
	return nil
}

func hasText(n *node, allowHTML bool) bool {
	if len(n.children) == 0 {
		return strings.TrimSpace(n.text) != "" && (allowHTML || !n.html)
	}
	for _, c := range n.children {
		if hasText(c, allowHTML) {
			return true
		}
	}
	return false
}

func (p *parser) headerFields(h textproto.Header) {
	mh := gomail.Header{Header: gomessage.Header{Header: h}}
	if s, err := mh.Subject(); err == nil {
		p.msg.Subject = p.clean(s)
	} else {
		p.msg.Subject = p.clean(h.Get("Subject"))
		p.warn("Subject: %v", err)
	}
	p.msg.Subject = strings.Join(strings.Fields(p.msg.Subject), " ")
	if from := p.addresses(mh, "From"); len(from) > 0 {
		p.msg.From = from[0]
	} else if s := p.addresses(mh, "Sender"); len(s) > 0 {
		p.msg.From = s[0]
	}
	p.msg.To = p.addresses(mh, "To")
	p.msg.Cc = p.addresses(mh, "Cc")
	p.msg.Bcc = p.addresses(mh, "Bcc")
	p.msg.ReplyTo = p.addresses(mh, "Reply-To")
	if d, err := mh.Date(); err == nil && !d.IsZero() {
		p.msg.Date = d
	} else if v := h.Get("Date"); v != "" {
		if d, ok := parseDateLenient(v); ok {
			p.msg.Date = d
		} else {
			p.warn("Date %q is not a date; left empty", clip([]byte(v), 60))
		}
	}
	p.msg.MessageID = firstID(h.Get("Message-Id"))
	p.msg.InReplyTo = msgIDs(h.Get("In-Reply-To"))
	p.msg.References = msgIDs(strings.Join(h.Values("References"), " "))
	p.msg.GmailThreadID = strings.TrimSpace(h.Get("X-Gm-Thrid"))
	p.msg.ListID = clipHeader(p.clean(h.Get("List-Id")))
	p.msg.Precedence = clipHeader(strings.ToLower(p.clean(h.Get("Precedence"))))
	p.msg.AutoSubmitted = clipHeader(strings.ToLower(p.clean(h.Get("Auto-Submitted"))))
}

// clipHeader bounds a stored header value: these only classify mail, and a
// hostile message must not grow every row.
func clipHeader(v string) string {
	const maxHeader = 200
	if len(v) <= maxHeader {
		return v
	}
	cut := maxHeader
	for cut > 0 && !isRuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}

func (p *parser) clean(s string) string {
	out, _ := cleanText(s)
	return strings.TrimSpace(out)
}

var addrRe = regexp.MustCompile(`[A-Za-z0-9._%+\-'=/!#$&*?^{|}~]+@[A-Za-z0-9.\-\[\]:]+`)

// addresses reads an address list, falling back to picking out anything
// that looks like an address when the header does not parse.
func (p *parser) addresses(mh gomail.Header, key string) []Address {
	raw := mh.Get(key)
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	list, err := mh.AddressList(key)
	if err == nil && len(list) > 0 {
		out := make([]Address, 0, len(list))
		for _, a := range list {
			out = append(out, Address{Name: p.clean(strings.Trim(a.Name, `"' `)), Addr: strings.ToLower(p.clean(a.Address))})
		}
		return out
	}
	var out []Address
	decoded := decodeWord(raw)
	for _, m := range addrRe.FindAllStringIndex(decoded, 50) {
		name := ""
		if m[0] > 0 {
			prefix := decoded[:m[0]]
			if i := strings.LastIndexAny(prefix, ",;"); i >= 0 {
				prefix = prefix[i+1:]
			}
			name = strings.Trim(prefix, ` "'<`)
		}
		out = append(out, Address{Name: p.clean(name), Addr: strings.ToLower(strings.Trim(decoded[m[0]:m[1]], ".'"))})
	}
	if len(out) == 0 {
		// A name with no address (e.g. "undisclosed-recipients:;") is kept as a name.
		if n := p.clean(decoded); n != "" {
			out = append(out, Address{Name: n})
		}
	}
	return out
}

var wordDecoder = &mime.WordDecoder{CharsetReader: func(cs string, in io.Reader) (io.Reader, error) {
	if gomessage.CharsetReader != nil {
		return gomessage.CharsetReader(strings.ToLower(cs), in)
	}
	return nil, fmt.Errorf("unknown charset %q", cs)
}}

// decodeWord decodes RFC 2047 encoded words, returning s unchanged on error.
func decodeWord(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

var idRe = regexp.MustCompile(`<([^<>\s]+)>`)

func msgIDs(v string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range idRe.FindAllStringSubmatch(v, 200) {
		id := strings.TrimSpace(m[1])
		if id != "" && !seen[id] && len(id) < 500 {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		// Some clients omit the angle brackets.
		for _, f := range strings.Fields(v) {
			if strings.Contains(f, "@") && len(f) < 500 && !seen[f] {
				seen[f] = true
				out = append(out, strings.Trim(f, "<>,"))
			}
		}
	}
	return out
}

func firstID(v string) string {
	ids := msgIDs(v)
	if len(ids) > 0 {
		return ids[0]
	}
	v = strings.TrimSpace(v)
	if len(v) > 0 && len(v) < 500 && !strings.ContainsAny(v, " \t") {
		return v
	}
	return ""
}

var dateLayouts = []string{
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04 -0700",
	"2 Jan 2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 06 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05",
	"Mon Jan 2 15:04:05 2006",
	"Mon Jan 2 15:04:05 MST 2006",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02T15:04:05Z07:00",
	"02 Jan 2006",
}

var tzComment = regexp.MustCompile(`\s*\([^)]*\)\s*$`)

// parseDateLenient reads the dates that net/mail refuses: missing weekday
// commas, comments, two-digit years, ISO forms.
func parseDateLenient(v string) (time.Time, bool) {
	v = strings.Join(strings.Fields(tzComment.ReplaceAllString(v, "")), " ")
	v = strings.Replace(v, ",", ", ", 1)
	v = strings.Join(strings.Fields(v), " ")
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, true
		}
		if i := strings.Index(v, ", "); i >= 0 {
			if t, err := time.Parse(l, v[i+2:]); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// cleanName makes an attachment filename safe to show and to use as the last
// element of a path: no directories, separators, control characters or
// leading dots, at most 200 bytes. It never decides where a file is written.
func cleanName(name string) string {
	name, _ = cleanText(decodeWord(name))
	name = norm.NFC.String(name) // macOS writes decomposed (NFD) names
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		switch {
		case r < 32 || r == 0x7f:
			return -1
		case strings.ContainsRune(`<>:"|?*`, r):
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if len(name) > 200 {
		ext := ""
		if i := strings.LastIndexByte(name, '.'); i > len(name)-12 && i > 0 {
			ext = name[i:]
		}
		cut := 200 - len(ext)
		for cut > 0 && !isRuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + ext
	}
	return name
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// SafeFilename is the exported form of the attachment filename rule, for
// callers that write attachments to disk.
func SafeFilename(name string) string {
	return cleanName(name)
}

func defaultName(path, mediaType string) string {
	ext := ""
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		ext = exts[0]
	}
	return "part-" + path + ext
}
