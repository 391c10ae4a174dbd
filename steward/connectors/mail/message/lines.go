package message

import (
	"bufio"
	"bytes"
	"io"
)

// lineBufSize bounds how much of one line is held at once; longer lines are
// delivered in pieces, which the boundary scanner treats as content.
const lineBufSize = 32 << 10

// lineReader yields a stream as line pieces, remembering whether each piece
// starts a line so that only real line starts are tested for MIME boundaries.
type lineReader struct {
	br      *bufio.Reader
	atStart bool
}

func newLineReader(r io.Reader) *lineReader {
	if br, ok := r.(*bufio.Reader); ok && br.Size() >= lineBufSize {
		return &lineReader{br: br, atStart: true}
	}
	return &lineReader{br: bufio.NewReaderSize(r, lineBufSize), atStart: true}
}

// next returns the next piece (valid until the following call), whether it
// begins a line, and the read error (io.EOF after the last piece).
func (l *lineReader) next() ([]byte, bool, error) {
	start := l.atStart
	b, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.atStart = false
		return b, start, nil
	}
	l.atStart = true
	return b, start, err
}

// splitNL separates a trailing "\n" or "\r\n" from a line piece.
func splitNL(b []byte) (body, nl []byte) {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		if n > 1 && b[n-2] == '\r' {
			return b[:n-2], b[n-2:]
		}
		return b[:n-1], b[n-1:]
	}
	return b, nil
}

type boundaryKind int

const (
	notBoundary boundaryKind = iota
	nextBoundary
	finalBoundary
)

// boundaryLine classifies a line against "--boundary". Trailing white space is
// tolerated (RFC 2046 allows it and real mail adds it).
func boundaryLine(line, dash []byte) boundaryKind {
	if !bytes.HasPrefix(line, dash) {
		return notBoundary
	}
	rest := line[len(dash):]
	final := false
	if bytes.HasPrefix(rest, []byte("--")) {
		final = true
		rest = rest[2:]
	}
	for _, c := range rest {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return notBoundary
		}
	}
	if final {
		return finalBoundary
	}
	return nextBoundary
}

// partBody reads one part of a multipart body: everything up to (not
// including) the line break before the next boundary line.
type partBody struct {
	lr      *lineReader
	dash    []byte
	pending []byte // line break held back: it belongs to a following boundary
	out     []byte
	outOff  int
	done    bool
	end     boundaryKind // what ended the part; notBoundary means end of input
	err     error
}

func (p *partBody) Read(b []byte) (int, error) {
	for p.outOff >= len(p.out) {
		if p.done {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		p.fill()
	}
	n := copy(b, p.out[p.outOff:])
	p.outOff += n
	return n, nil
}

func (p *partBody) fill() {
	p.out, p.outOff = p.out[:0], 0
	chunk, start, err := p.lr.next()
	if len(chunk) > 0 {
		if start {
			if k := boundaryLine(chunk, p.dash); k != notBoundary {
				p.done, p.end = true, k
				return
			}
		}
		body, nl := splitNL(chunk)
		p.out = append(p.out, p.pending...)
		p.out = append(p.out, body...)
		p.pending = append(p.pending[:0], nl...)
	}
	if err != nil {
		p.done = true
		if err != io.EOF {
			p.err = err
		}
	}
}

// drain consumes the rest of the part so that the shared reader sits at the next boundary.
func (p *partBody) drain() {
	for !p.done {
		p.fill()
	}
	p.out, p.outOff = p.out[:0], 0
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
