package calendar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// BenchmarkCreateEvent measures create_event end to end: resolving the
// calendar, journaling (SQLite, synced), writing the .ics atomically and
// recording the outcome. BenchmarkAtomicWrite is the same file published
// without the journal, for the journal's share.
func BenchmarkCreateEvent(b *testing.B) {
	e := newWriteEnv(b)
	ctx := context.Background()
	start := time.Date(2026, 5, 4, 9, 0, 0, 0, rome)
	b.ResetTimer()
	for i := range b.N {
		s := start.Add(time.Duration(i) * time.Hour)
		if _, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "personal", Title: fmt.Sprintf("Event %d", i),
			Start: s.Format(time.RFC3339), End: s.Add(30 * time.Minute).Format(time.RFC3339), Recurrence: "FREQ=WEEKLY;COUNT=4"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAtomicWrite(b *testing.B) {
	dir := b.TempDir()
	data := []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260101T000000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
	b.ResetTimer()
	for i := range b.N {
		if err := localsource.WriteFileAtomic(filepath.Join(dir, fmt.Sprintf("%d.ics", i)), data, localsource.WriteOptions{NoClobber: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConfirmEvent measures one confirmation check of a create against
// an index of 694 events (the spec's calendar) plus the written one.
func BenchmarkConfirmEvent(b *testing.B) {
	e := newWriteEnv(b)
	ctx := context.Background()
	bench := filepath.Join(e.root, "work", "bench.ics")
	var body []byte
	body = append(body, "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\n"...)
	for i := range 694 {
		s := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Hour)
		body = fmt.Appendf(body, "BEGIN:VEVENT\r\nUID:b-%d\r\nSUMMARY:Meeting %d\r\nDTSTART:%s\r\nDTEND:%s\r\nEND:VEVENT\r\n", i, i,
			s.Format("20060102T150405Z"), s.Add(time.Hour).Format("20060102T150405Z"))
	}
	body = append(body, "END:VCALENDAR\r\n"...)
	os.WriteFile(bench, body, 0o644)
	res, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "personal", Title: "Dentist", Start: "2026-05-04T09:00:00+02:00",
		End: "2026-05-04T10:00:00+02:00", Recurrence: "FREQ=WEEKLY;BYDAY=MO", Alarms: []int{10}})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := e.idx.Sync(ctx, e.cfg, SyncOptions{}); err != nil {
		b.Fatal(err)
	}
	op, _ := e.journal.Get(ctx, res.OperationID)
	b.ResetTimer()
	for range b.N {
		chk, err := e.conf.Confirm(ctx, op)
		if err != nil || !chk.Confirmed {
			b.Fatalf("%+v %v", chk, err)
		}
	}
}
