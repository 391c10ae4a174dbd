package mcpbridge

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// MessageTooLargeError is a server message over Options.MaxMessageBytes. The
// connection that carried it is closed: a stream cannot be resynchronised
// after a message is refused part way, and a prefix is never passed on.
type MessageTooLargeError struct{ Limit int }

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("the MCP server sent a message over the %d-byte limit", e.Limit)
}

// lineLimiter fails a stream once one line — one JSON-RPC message on stdio,
// one line of an SSE stream — exceeds max bytes. What was read of the
// offending line before the limit is passed on, but its end never is, so
// the decoder never completes that message.
type lineLimiter struct {
	r     io.ReadCloser
	max   int
	cur   int
	onHit func()
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for off := 0; off < n; {
		i := bytes.IndexByte(p[off:n], '\n')
		seg := n - off
		if i >= 0 {
			seg = i
		}
		if l.cur+seg > l.max {
			l.onHit()
			return off, &MessageTooLargeError{Limit: l.max}
		}
		if i < 0 {
			l.cur += seg
			break
		}
		l.cur, off = 0, off+i+1
	}
	return n, err
}

func (l *lineLimiter) Close() error { return l.r.Close() }

// bodyLimiter fails a whole (non-streamed) response body over max bytes.
type bodyLimiter struct {
	r     io.ReadCloser
	left  int
	max   int
	onHit func()
}

func (b *bodyLimiter) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.left -= n; b.left < 0 {
		b.onHit()
		return 0, &MessageTooLargeError{Limit: b.max}
	}
	return n, err
}

func (b *bodyLimiter) Close() error { return b.r.Close() }

// limitBody bounds an HTTP response of an MCP server: an SSE stream per
// line, any other body as a whole.
func limitBody(resp *http.Response, max int, onHit func()) {
	if max <= 0 || resp.Body == nil {
		return
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &lineLimiter{r: resp.Body, max: max, onHit: onHit}
		return
	}
	resp.Body = &bodyLimiter{r: resp.Body, left: max, max: max, onHit: onHit}
}
