// Package osascript builds and runs AppleScript for the macOS compatibility
// paths of Steward's writes (Calendar.app, Contacts.app, Mail.app). Scripts
// are assembled from fixed text and values quoted by Quote, never by pasting
// user text into code, and run through a Runner so that what a write sends
// to osascript is tested on every OS.
package osascript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Quote returns s as an AppleScript string literal. Backslash and double
// quote are escaped, line breaks and tabs become their escapes, and other
// control characters (which AppleScript cannot spell) are dropped.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SetDate returns statements that set the variable name to the wall clock of
// t in loc (AppleScript dates have no zone: they are the Mac's local time).
// The date is built field by field, day 1 first, so no locale-dependent
// date parsing is involved and no month overflows on the way.
func SetDate(name string, t time.Time, loc *time.Location) string {
	t = t.In(loc)
	sec := t.Hour()*3600 + t.Minute()*60 + t.Second()
	return fmt.Sprintf("set %[1]s to current date\nset day of %[1]s to 1\nset year of %[1]s to %[2]d\nset month of %[1]s to %[3]d\n"+
		"set day of %[1]s to %[4]d\nset time of %[1]s to %[5]d\n", name, t.Year(), int(t.Month()), t.Day(), sec)
}

// Runner runs a script and returns what it printed (its result).
type Runner interface {
	Run(ctx context.Context, script string) (string, error)
}

// Exec runs scripts with /usr/bin/osascript, the script on standard input
// (so nothing of it appears in the process list).
type Exec struct {
	// Path replaces /usr/bin/osascript.
	Path string
}

// Error is a script that osascript ran and that failed: its message and
// AppleScript error number, as osascript printed them.
type Error struct {
	Message string
	Number  int
}

func (e *Error) Error() string {
	if e.Number != 0 {
		return fmt.Sprintf("AppleScript error %d: %s", e.Number, e.Message)
	}
	return "AppleScript error: " + e.Message
}

// Run runs script and returns its trimmed output. A failed script is an
// *Error; a failure to start osascript is returned as it is.
func (x Exec) Run(ctx context.Context, script string) (string, error) {
	path := x.Path
	if path == "" {
		path = "/usr/bin/osascript"
	}
	cmd := exec.CommandContext(ctx, path, "-")
	cmd.Stdin = strings.NewReader(script)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", ParseError(errOut.String())
	}
	if err != nil {
		return "", fmt.Errorf("run osascript: %w", err)
	}
	return strings.TrimSpace(out.String()), nil
}

// ParseError reads osascript's error line, such as
// "0:12: execution error: Calendar got an error: … (-1728)".
func ParseError(stderr string) *Error {
	msg := strings.TrimSpace(stderr)
	if i := strings.Index(msg, "execution error: "); i >= 0 {
		msg = msg[i+len("execution error: "):]
	}
	e := &Error{Message: msg}
	if j := strings.LastIndex(msg, " ("); j >= 0 && strings.HasSuffix(msg, ")") {
		if n, err := strconv.Atoi(msg[j+2 : len(msg)-1]); err == nil {
			e.Number, e.Message = n, msg[:j]
		}
	}
	return e
}
