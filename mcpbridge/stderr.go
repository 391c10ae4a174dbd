package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
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
// bounded) and keeps the last few lines to explain a crash. A line that is
// a log record itself (slog's text or JSON form, as Steward's connectors
// write) is logged as a record of the host at its own level, its message
// prefixed by the server's name, instead of as an escaped string inside
// another record; a record already shown is not shown again.
type stderrSink struct {
	log   *slog.Logger
	mask  func(string) string
	name  string
	shown *shownLines

	mu         sync.Mutex
	partial    []byte
	overlong   bool // the current line passed maxStderrLine; drop until newline
	logged     int
	suppressed int
	tail       []string
}

func newStderrSink(log *slog.Logger, mask func(string) string, name string, shown *shownLines) *stderrSink {
	return &stderrSink{log: log, mask: mask, name: name, shown: shown}
}

// shownLines is what the servers of one bridge have already put in the log,
// so that a warning every connector prints at start-up (a problem in a file
// they all read) appears once, not once per connector.
type shownLines struct {
	mu   sync.Mutex
	seen map[string]bool
}

// newShownLines starts with the messages the host logged itself.
func newShownLines(alreadyLogged []string) *shownLines {
	s := &shownLines{seen: map[string]bool{}}
	for _, m := range alreadyLogged {
		s.seen[m] = true
	}
	return s
}

// first reports whether none of keys has been shown, and marks them all.
func (s *shownLines) first(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := true
	for _, k := range keys {
		fresh = fresh && !s.seen[k]
	}
	for _, k := range keys {
		s.seen[k] = true
	}
	return fresh
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
		w.log.Warn(w.name+": further lines of stderr not logged", "lines", w.suppressed)
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
	level, msg, attrs, isRecord := parseLogRecord(line)
	if !isRecord {
		level, msg = slog.LevelInfo, line
	}
	// The message alone matches what the host logged itself; message and
	// attributes match another server's copy.
	if !w.shown.first(msg, fmt.Sprint(level, msg, attrs)) {
		return
	}
	w.logged++
	w.log.Log(context.Background(), level, w.name+": "+msg, attrs...)
}

// parseLogRecord reads a line written by slog's text handler
// (time=… level=WARN msg="…" key=value…) or JSON handler. It returns the
// level, the message and the other attributes except the time.
func parseLogRecord(line string) (level slog.Level, msg string, attrs []any, ok bool) {
	fields := map[string]string{}
	var keys []string
	if strings.HasPrefix(line, "{") {
		var obj map[string]any
		if json.Unmarshal([]byte(line), &obj) != nil {
			return 0, "", nil, false
		}
		for k, v := range obj {
			if s, isString := v.(string); isString {
				fields[k] = s
			} else {
				b, _ := json.Marshal(v)
				fields[k] = string(b)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
	} else {
		rest := line
		for rest != "" {
			key, after, found := strings.Cut(rest, "=")
			if !found || key == "" || strings.ContainsAny(key, " \"") {
				return 0, "", nil, false
			}
			val := after
			if strings.HasPrefix(after, `"`) {
				q, err := strconv.QuotedPrefix(after)
				if err != nil {
					return 0, "", nil, false
				}
				val, _ = strconv.Unquote(q)
				after = after[len(q):]
			} else {
				i := strings.IndexByte(after, ' ')
				if i < 0 {
					i = len(after)
				}
				val, after = after[:i], after[i:]
			}
			if after != "" && after[0] != ' ' {
				return 0, "", nil, false
			}
			fields[key] = val
			keys = append(keys, key)
			rest = strings.TrimLeft(after, " ")
		}
	}
	lv, hasLevel := fields["level"]
	msg, hasMsg := fields["msg"]
	if !hasLevel || !hasMsg || level.UnmarshalText([]byte(lv)) != nil {
		return 0, "", nil, false
	}
	for _, k := range keys {
		if k != "time" && k != "level" && k != "msg" {
			attrs = append(attrs, k, fields[k])
		}
	}
	return level, msg, attrs, true
}

// Tail returns the last lines the process wrote, joined, for error messages.
func (w *stderrSink) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, " | ")
}
