package message

import (
	"bytes"
	"fmt"
	"io"

	"github.com/emersion/go-message/textproto"
)

// headerResult is a header block read leniently.
type headerResult struct {
	h        textproto.Header
	warnings []string
	// bodyStart is a line that was not a header field and therefore begins
	// the body (a message without the blank separator line).
	bodyStart []byte
}

// headerBuilder accumulates fields within a byte budget.
type headerBuilder struct {
	res     headerResult
	key     string
	val     bytes.Buffer
	have    bool
	total   int
	max     int
	dropped bool
}

func (b *headerBuilder) flush() {
	if b.have {
		b.res.h.Add(b.key, string(bytes.TrimSpace(b.val.Bytes())))
	}
	b.have = false
	b.val.Reset()
}

func (b *headerBuilder) fits(n int) bool {
	if b.total+n > b.max {
		b.dropped = true
		return false
	}
	b.total += n
	return true
}

func (b *headerBuilder) continueField(body []byte) {
	if b.fits(len(body)) {
		b.val.WriteByte(' ')
		b.val.Write(bytes.TrimSpace(body))
	}
}

// line handles one header line; it returns false when the line is not part
// of the header and starts the body instead.
func (b *headerBuilder) line(body []byte, first bool) bool {
	if first && (body[0] == ' ' || body[0] == '\t') {
		b.res.warnings = append(b.res.warnings, "header starts with white space; it was trimmed")
		body = bytes.TrimLeft(body, " \t")
		if len(body) == 0 {
			return true
		}
	}
	if first && bytes.HasPrefix(body, []byte("From ")) {
		return true // an mbox "From " separator line, not a field
	}
	if body[0] == ' ' || body[0] == '\t' {
		if b.have {
			b.continueField(body)
		}
		return true
	}
	k, v, ok := splitField(body)
	if !ok {
		if !b.have {
			return false
		}
		// A folded line that lost its leading white space.
		b.res.warnings = append(b.res.warnings, fmt.Sprintf("header line %q is not a field; joined to %s", clip(body, 40), b.key))
		b.continueField(body)
		return true
	}
	b.flush()
	if b.fits(len(body)) {
		b.key, b.have = k, true
		b.val.Write(v)
	}
	return true
}

// readHeader reads a header block from lr, repairing what real mail gets
// wrong instead of failing: a first line indented by mistake, a folded line
// that lost its indentation, 8-bit bytes, fields past maxBytes (dropped with
// a warning so that a 1 MiB header cannot exhaust memory), and a missing
// blank line (the first line that is not a field then starts the body).
func readHeader(lr *lineReader, maxBytes int) headerResult {
	b := &headerBuilder{max: maxBytes}
	var line []byte
	first := true
	for {
		chunk, _, err := lr.next()
		line = append(line[:0], chunk...)
		// Gather one whole line; pieces beyond the budget are discarded.
		for last := chunk; err == nil && len(last) > 0 && last[len(last)-1] != '\n'; {
			last, _, err = lr.next()
			if len(line) < maxBytes {
				line = append(line, last...)
			} else {
				b.dropped = true
			}
		}
		body, _ := splitNL(line)
		if len(body) == 0 && (len(line) > 0 || err == nil) {
			break // the blank line that ends the header
		}
		if len(body) > 0 {
			if !b.line(body, first) {
				b.res.bodyStart = append([]byte(nil), line...)
				break
			}
			first = false
		}
		if err != nil {
			if err != io.EOF {
				b.res.warnings = append(b.res.warnings, "read header: "+err.Error())
			}
			break
		}
	}
	b.flush()
	if b.dropped {
		b.res.warnings = append(b.res.warnings, fmt.Sprintf("header exceeds %d bytes; the excess was dropped", maxBytes))
	}
	return b.res
}

// splitField splits "Key: value", accepting only RFC 5322 field-name bytes in the key.
func splitField(line []byte) (string, []byte, bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return "", nil, false
	}
	k := bytes.TrimRight(line[:i], " \t")
	if len(k) == 0 {
		return "", nil, false
	}
	for _, c := range k {
		if c <= 32 || c >= 127 {
			return "", nil, false
		}
	}
	return string(k), line[i+1:], true
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
