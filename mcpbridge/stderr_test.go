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
	w := newStderrSink(slog.New(slog.NewTextHandler(logs, nil)), mask, "srv", newShownLines(nil))

	// Lines split across writes are joined; CRLF and blank lines handled.
	fmt.Fprint(w, "first li")
	fmt.Fprint(w, "ne\r\n\nsecond password=hunter22\n")
	fmt.Fprint(w, strings.Repeat("y", 3*maxStderrLine)+"\n")
	fmt.Fprint(w, "unterminated")
	_ = w.Close()

	text := logs.String()
	for _, want := range []string{`msg="srv: first line"`, `msg="srv: second password=[redacted]"`, `…[truncated]`, `msg="srv: unterminated"`} {
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
	w := newStderrSink(slog.New(slog.NewTextHandler(logs, nil)), func(s string) string { return s }, "srv", newShownLines(nil))
	for i := range maxStderrLines + 50 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	_ = w.Close()
	text := logs.String()
	if n := strings.Count(text, "msg=\"srv: line "); n != maxStderrLines {
		t.Errorf("%d lines logged, want %d", n, maxStderrLines)
	}
	if !strings.Contains(text, "further lines of stderr not logged") || !strings.Contains(text, "lines=50") {
		t.Errorf("suppression not reported:\n%s", text[len(text)-300:])
	}
	tail := w.Tail()
	if strings.Count(tail, "|") != stderrTail-1 || !strings.HasSuffix(tail, fmt.Sprintf("line %d", maxStderrLines+49)) {
		t.Errorf("tail = %q", tail)
	}
}

func TestParseLogRecord(t *testing.T) {
	for _, tc := range []struct {
		line  string
		ok    bool
		level slog.Level
		msg   string
		attrs []any
	}{
		{`time=2026-12-02T01:24:09Z level=WARN msg="a b" err="x \"y\"" n=3`, true, slog.LevelWarn, "a b", []any{"err", `x "y"`, "n", "3"}},
		{`level=INFO msg=stopped`, true, slog.LevelInfo, "stopped", nil},
		{`{"time":"t","level":"ERROR","msg":"boom","n":3}`, true, slog.LevelError, "boom", []any{"n", "3"}},
		{`plain text from a server`, false, 0, "", nil},
		{`password=x`, false, 0, "", nil},
		{`level=LOUD msg=x`, false, 0, "", nil},
		{`level=WARN msg="unterminated`, false, 0, "", nil},
		{`{"msg":"no level"}`, false, 0, "", nil},
	} {
		level, msg, attrs, ok := parseLogRecord(tc.line)
		if ok != tc.ok || level != tc.level || msg != tc.msg || fmt.Sprint(attrs) != fmt.Sprint(tc.attrs) {
			t.Errorf("parseLogRecord(%q) = %v %q %v %v; want %v %q %v %v", tc.line, level, msg, attrs, ok, tc.level, tc.msg, tc.attrs, tc.ok)
		}
	}
}
