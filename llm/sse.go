package llm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// SSEEvent is one server-sent event: its event name ("" when the server sent
// none) and its data lines joined with newlines.
type SSEEvent struct {
	Event string
	Data  []byte
}

// SSEReader reads server-sent events one at a time. Comments, id and retry
// fields are ignored; a line without a colon is a field with an empty value.
type SSEReader struct {
	sc    *bufio.Scanner
	event string
	data  []byte
	have  bool
	done  bool
}

// NewSSEReader reads events from r. Lines may be up to 16 MiB long.
func NewSSEReader(r io.Reader) *SSEReader {
	sc := bufio.NewScanner(r)
	// Events are small: start with 4 KiB (it grows for long lines up to
	// 16 MiB) rather than allocate 64 KiB for every stream.
	sc.Buffer(make([]byte, 4<<10), 16<<20)
	return &SSEReader{sc: sc}
}

// Next returns the next event with data. Its Data is valid until the next
// call. At the end of the body it returns io.EOF; an event still pending
// when the body ends (no blank line after it) is returned first.
func (r *SSEReader) Next() (SSEEvent, error) {
	if r.done {
		return SSEEvent{}, io.EOF
	}
	if r.have {
		// The previous event has been consumed.
		r.event, r.data, r.have = "", r.data[:0], false
	}
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if r.have {
				return SSEEvent{Event: r.event, Data: r.data}, nil
			}
			r.event = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if r.have {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.have = true
		case "event":
			r.event = string(value)
		}
	}
	r.done = true
	if err := r.sc.Err(); err != nil {
		return SSEEvent{}, fmt.Errorf("read event stream: %w", err)
	}
	if r.have {
		return SSEEvent{Event: r.event, Data: r.data}, nil
	}
	return SSEEvent{}, io.EOF
}

// ErrStreamTruncated reports a stream that ended without [DONE].
var ErrStreamTruncated = errors.New("model stream ended before [DONE]")

// ReadSSE calls fn with the data of each server-sent event until [DONE].
// Multi-line data fields are joined with newlines; comments and other fields
// are ignored. A body that ends before [DONE] gives ErrStreamTruncated.
func ReadSSE(r io.Reader, fn func(data []byte) error) error {
	sr := NewSSEReader(r)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return ErrStreamTruncated
		}
		if err != nil {
			return fmt.Errorf("read model stream: %w", err)
		}
		if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			return nil
		}
		if err := fn(ev.Data); err != nil {
			return err
		}
	}
}
