package calendar

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzParseICS feeds arbitrary bytes to the iCalendar reader: it must not
// panic, every event it accepts must end no earlier than it starts, and a
// file it cannot parse must come with an error.
func FuzzParseICS(f *testing.F) {
	f.Add([]byte("BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:a\nDTSTART:20260101T090000Z\nEND:VEVENT\nEND:VCALENDAR\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &icsReader{src: SourceConfig{Name: "f", Account: "f"}, zone: time.UTC, zones: newZoneResolver(), res: &SourceResult{}}
		r.parseFile("fuzz.ics", data, "cal", "", true)
		for _, it := range r.res.Items {
			if it.End.Before(it.Start) || it.UID == "" {
				t.Fatalf("accepted a malformed event: %+v", it)
			}
			if it.RRule != "" {
				derive(&it) // must not panic or hang on any rule text
			}
		}
		if len(r.res.FailedPaths) > len(r.res.ItemErrors) {
			t.Fatalf("a failed file without an error: %v", r.res.FailedPaths)
		}
	})
}

// FuzzFoldLines: folded content lines are at most 75 octets, never split a
// UTF-8 sequence, and unfold back to the original.
func FuzzFoldLines(f *testing.F) {
	f.Add("DESCRIPTION:" + strings.Repeat("àbc ", 40))
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") {
			return
		}
		out := foldLines([]byte(line + "\r\n"))
		for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\r\n")), []byte("\r\n")) {
			if len(l) > 75 {
				t.Fatalf("line of %d octets", len(l))
			}
		}
		if got := string(unfold(out)); got != line+"\r\n" {
			t.Fatalf("unfolds to %q, want %q", got, line)
		}
	})
}
