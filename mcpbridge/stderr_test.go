package mcpbridge

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestStderrSink(t *testing.T) {
	logs := &logBuffer{}
	mask := func(s string) string { return strings.ReplaceAll(s, "hunter22", "[redacted]") }
	w := newStderrSink(slog.New(slog.NewTextHandler(logs, nil)), mask)

	// Lines split across writes are joined; CRLF and blank lines handled.
	fmt.Fprint(w, "first li")
	fmt.Fprint(w, "ne\r\n\nsecond password=hunter22\n")
	fmt.Fprint(w, strings.Repeat("y", 3*maxStderrLine)+"\n")
	fmt.Fprint(w, "unterminated")
	_ = w.Close()

	text := logs.String()
	for _, want := range []string{`line="first line"`, `line="second password=[redacted]"`, `…[truncated]`, `line=unterminated`} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "hunter22") || strings.Contains(text, strings.Repeat("y", maxStderrLine+1)) {
		t.Errorf("secret or overlong line logged:\n%s", text)
	}
	if got := w.Tail(); !strings.HasPrefix(got, "first line | second password=[redacted] | yyy") || !strings.HasSuffix(got, "| unterminated") {
		t.Errorf("tail = %q", got)
	}
}

func TestStderrSinkBounded(t *testing.T) {
	logs := &logBuffer{}
	w := newStderrSink(slog.New(slog.NewTextHandler(logs, nil)), func(s string) string { return s })
	for i := range maxStderrLines + 50 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	_ = w.Close()
	text := logs.String()
	if n := strings.Count(text, "mcp server stderr\" line="); n != maxStderrLines {
		t.Errorf("%d lines logged, want %d", n, maxStderrLines)
	}
	if !strings.Contains(text, "further lines not logged") || !strings.Contains(text, "lines=50") {
		t.Errorf("suppression not reported:\n%s", text[len(text)-300:])
	}
	tail := w.Tail()
	if strings.Count(tail, "|") != stderrTail-1 || !strings.HasSuffix(tail, fmt.Sprintf("line %d", maxStderrLines+49)) {
		t.Errorf("tail = %q", tail)
	}
}
