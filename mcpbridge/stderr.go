package mcpbridge

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits on what one server process's stderr may put into the host's log.
const (
	maxStderrLine  = 1024 // bytes kept of one line
	maxStderrLines = 1000 // lines logged per process; the rest are counted only
	stderrTail     = 8    // last lines kept for the error shown when it dies
)

// stderrSink receives a child's stderr, logs it line by line (masked and
// bounded) and keeps the last few lines to explain a crash.
type stderrSink struct {
	log  *slog.Logger
	mask func(string) string

	mu         sync.Mutex
	partial    []byte
	overlong   bool // the current line passed maxStderrLine; drop until newline
	logged     int
	suppressed int
	tail       []string
}

func newStderrSink(log *slog.Logger, mask func(string) string) *stderrSink {
	return &stderrSink{log: log, mask: mask}
}

// Write implements io.Writer; it never fails, so a chatty server cannot
// break its own pipe.
func (w *stderrSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.overlong {
			room := maxStderrLine - len(w.partial)
			if len(chunk) > room {
				w.partial = append(w.partial, chunk[:room]...)
				w.overlong = true
			} else {
				w.partial = append(w.partial, chunk...)
			}
		}
		if i < 0 {
			break
		}
		w.emitLocked()
		p = p[i+1:]
	}
	return n, nil
}

// Close flushes an unterminated last line.
func (w *stderrSink) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 || w.overlong {
		w.emitLocked()
	}
	if w.suppressed > 0 {
		w.log.Warn("mcp server stderr: further lines not logged", "lines", w.suppressed)
		w.suppressed = 0
	}
	return nil
}

func (w *stderrSink) emitLocked() {
	line := strings.ToValidUTF8(string(w.partial), string(utf8.RuneError))
	line = strings.TrimRight(line, "\r")
	if w.overlong {
		line += " …[truncated]"
	}
	w.partial, w.overlong = w.partial[:0], false
	if strings.TrimSpace(line) == "" {
		return
	}
	line = w.mask(line)
	w.tail = append(w.tail, line)
	if len(w.tail) > stderrTail {
		w.tail = w.tail[1:]
	}
	if w.logged >= maxStderrLines {
		w.suppressed++
		return
	}
	w.logged++
	w.log.Info("mcp server stderr", "line", line)
}

// Tail returns the last lines the process wrote, joined, for error messages.
func (w *stderrSink) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, " | ")
}
