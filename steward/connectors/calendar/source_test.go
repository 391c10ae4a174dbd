package calendar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Skip("no tz database:", err)
	}
	return l
}

func TestReadAppleRealFixture(t *testing.T) {
	path := localsourcetest.CopyFile(t, localsourcetest.Fixture(t, "calendar-contacts/apple-calendar-sqlitedb/Calendar.sqlitedb"), t.TempDir())
	res, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Kind: KindApple, Path: path, Account: "mac"}, ReadOptions{Zone: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 13 || len(res.ItemErrors) != 0 {
		t.Fatalf("got %d items and errors %v, want the fixture's 13 events", len(res.Items), res.ItemErrors)
	}
	var kev *Item
	titled := 0
	for i := range res.Items {
		switch res.Items[i].Title {
		case "Kev event":
			kev = &res.Items[i]
		case "EVENT TITLE":
			titled++
		}
	}
	if titled != 10 || kev == nil {
		t.Fatalf("want 10 'EVENT TITLE' items and 'Kev event', got %d and %v", titled, kev)
	}
	want := Item{Account: "Default", Calendar: "DEFAULT_CALENDAR_NAME", CalendarID: "087D11B3-850E-49C0-93CC-D6C315F39EC0",
		UID: "31B8CA14-36FF-4794-B2DB-5A3857464312", Location: "Here", TZID: "Europe/London"}
	if kev.Account != want.Account || kev.Calendar != want.Calendar || kev.CalendarID != want.CalendarID ||
		kev.UID != want.UID || kev.Location != want.Location || kev.TZID != want.TZID {
		t.Errorf("Kev event = %+v", kev)
	}
	if got := kev.Start.UTC().Format(time.RFC3339); got != "2013-03-28T12:00:00Z" {
		t.Errorf("start %s, want 2013-03-28T12:00:00Z", got)
	}
	if got := kev.End.Sub(kev.Start); got != 24*time.Hour {
		t.Errorf("duration %s, want 24h", got)
	}
	if kev.LastModified.Year() != 2013 {
		t.Errorf("last modified %s", kev.LastModified)
	}
}

func TestReadAppleGeneratedRecurrencesExceptionsAlarms(t *testing.T) {
	rome := mustLoad(t, "Europe/Rome")
	a := newAppleDB(t)
	standup := a.event(appleEvent{Summary: "Standup", TZ: "Europe/Rome", UID: "standup@x", ExternalID: "standup.ics", Location: "Room 4",
		Start: time.Date(2026, 3, 23, 9, 30, 0, 0, rome), End: time.Date(2026, 3, 23, 10, 0, 0, 0, rome)})
	a.recurrence(standup, 2, 1, 0, time.Time{}, "D=0MO,0WE")
	a.exec(`INSERT INTO ExceptionDate (owner_id, date) VALUES (?, ?)`, standup, appleSec(time.Date(2026, 3, 25, 9, 30, 0, 0, rome)))
	a.exec(`INSERT INTO Alarm (owner_id, trigger_interval) VALUES (?, -900)`, standup)
	a.event(appleEvent{Summary: "Standup (moved)", TZ: "Europe/Rome", UID: "", OrigItem: standup,
		OrigDate: time.Date(2026, 3, 30, 9, 30, 0, 0, rome),
		Start:    time.Date(2026, 3, 30, 11, 0, 0, 0, rome), End: time.Date(2026, 3, 30, 11, 30, 0, 0, rome)})
	bday := a.event(appleEvent{Summary: "Anna's birthday", TZ: "_float", UID: "bday@x", AllDay: true,
		Start: time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 29, 23, 59, 59, 0, time.UTC), Availability: 1})
	a.recurrence(bday, 4, 1, 0, time.Time{}, "")
	last := a.event(appleEvent{Summary: "Invoices", TZ: "Europe/Rome", UID: "inv@x", Calendar: 2,
		Start: time.Date(2026, 1, 30, 15, 0, 0, 0, rome), End: time.Date(2026, 1, 30, 16, 0, 0, 0, rome)})
	a.recurrence(last, 3, 1, 5, time.Time{}, "D=-1FR")
	a.event(appleEvent{Summary: "Breakfast", TZ: "_float", UID: "float@x",
		Start: time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)})
	odd := a.event(appleEvent{Summary: "Odd rule", TZ: "Europe/Rome", UID: "odd@x",
		Start: time.Date(2026, 2, 2, 9, 0, 0, 0, rome), End: time.Date(2026, 2, 2, 10, 0, 0, 0, rome)})
	a.recurrence(odd, 2, 1, 0, time.Time{}, "D=0MO;Q=7")
	a.event(appleEvent{Summary: "A reminder", TZ: "Europe/Rome", UID: "todo@x", EntityType: 3,
		Start: time.Date(2026, 2, 2, 9, 0, 0, 0, rome), End: time.Date(2026, 2, 2, 9, 0, 0, 0, rome)})
	a.event(appleEvent{Summary: "Hidden", TZ: "Europe/Rome", UID: "hidden@x", Hidden: 1,
		Start: time.Date(2026, 2, 2, 9, 0, 0, 0, rome), End: time.Date(2026, 2, 2, 9, 0, 0, 0, rome)})
	a.event(appleEvent{Summary: "Mars meeting", TZ: "Mars/Olympus_Mons", UID: "mars@x",
		Start: time.Date(2026, 2, 2, 9, 0, 0, 0, rome), End: time.Date(2026, 2, 2, 9, 0, 0, 0, rome)})

	res, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Kind: KindApple, Path: a.Path, Account: "mac"}, ReadOptions{Zone: rome})
	if err != nil {
		t.Fatal(err)
	}
	byTitle := map[string]Item{}
	for _, it := range res.Items {
		byTitle[it.Title] = it
	}
	if len(res.Items) != 6 {
		t.Errorf("got %d items (%v), want 6: reminders, hidden and the unknown zone are not events", len(res.Items), keys(byTitle))
	}
	if len(res.ItemErrors) != 1 || !strings.Contains(res.ItemErrors[0].Error(), "unknown time zone") || res.ItemErrors[0].UID != "mars@x" {
		t.Errorf("item errors %v, want one naming the unknown zone of mars@x", res.ItemErrors)
	}
	s := byTitle["Standup"]
	if s.RRule != "FREQ=WEEKLY;BYDAY=MO,WE" || s.Account != "iCloud" || s.Calendar != "Home" || s.Location != "Room 4" {
		t.Errorf("standup = %+v", s)
	}
	if !slices.Equal(s.ExDates, []string{"2026-03-25T08:30:00Z"}) {
		t.Errorf("standup exdates %v", s.ExDates)
	}
	if len(s.Alarms) != 1 || s.Alarms[0].OffsetMinutes == nil || *s.Alarms[0].OffsetMinutes != -15 {
		t.Errorf("standup alarms %+v", s.Alarms)
	}
	moved := byTitle["Standup (moved)"]
	if moved.UID != "standup@x" || !moved.RecurrenceID.Equal(time.Date(2026, 3, 30, 9, 30, 0, 0, rome)) || moved.RRule != "" {
		t.Errorf("detached occurrence = %+v", moved)
	}
	b := byTitle["Anna's birthday"]
	if !b.AllDay || b.StartDate != "2026-03-29" || b.EndDate != "2026-03-30" || b.RRule != "FREQ=YEARLY" || !b.Transparent {
		t.Errorf("birthday = %+v", b)
	}
	if got := b.End.Sub(b.Start); got != 23*time.Hour {
		t.Errorf("all-day on the spring-forward day lasts %s in Rome, want 23h", got)
	}
	if got := byTitle["Invoices"].RRule; got != "FREQ=MONTHLY;COUNT=5;BYDAY=-1FR" {
		t.Errorf("invoices rule %q", got)
	}
	if got := byTitle["Invoices"].Account; got != "Work Exchange" {
		t.Errorf("invoices account %q", got)
	}
	f := byTitle["Breakfast"]
	if !f.Floating || !f.Start.Equal(time.Date(2026, 4, 1, 8, 0, 0, 0, rome)) {
		t.Errorf("floating event = %+v", f)
	}
	if got := byTitle["Odd rule"].RRule; got != "FREQ=WEEKLY;BYDAY=MO;APPLE-Q=7" {
		t.Errorf("unknown specifier part must be kept visibly, got %q", got)
	}
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestReadAppleLockedAndMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Calendar.sqlitedb")
	// A rollback-journal database with an exclusive writer blocks readers,
	// as Calendar.app does while it rewrites its store.
	w, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, q := range []string{"PRAGMA journal_mode=DELETE", "CREATE TABLE CalendarItem (summary TEXT)", "BEGIN EXCLUSIVE", "INSERT INTO CalendarItem VALUES ('x')"} {
		if _, err := w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, err = ReadApple(context.Background(), SourceConfig{Name: "mac", Path: path}, ReadOptions{BusyTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "try again") {
		t.Errorf("locked store: got %v, want ErrLocked with advice", err)
	}
	w.Exec("ROLLBACK")

	_, err = ReadApple(context.Background(), SourceConfig{Name: "mac", Path: filepath.Join(dir, "nope.sqlitedb")}, ReadOptions{})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "check the path") {
		t.Errorf("missing store: got %v", err)
	}
	junk := filepath.Join(dir, "junk.sqlitedb")
	os.WriteFile(junk, []byte("this is not a database, just text long enough to have a header......................................................."), 0o600)
	if _, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Path: junk}, ReadOptions{}); err == nil {
		t.Error("a file that is not SQLite must fail")
	}
}

func TestSourceErrorPermissionIsActionable(t *testing.T) {
	for _, cause := range []error{
		&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES},
		&fs.PathError{Op: "open", Path: "/x", Err: syscall.EPERM},
		errors.New("sqlite: authorization denied"),
	} {
		err := sourceError("read Apple calendar", "/x/Calendar.sqlitedb", cause)
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "Full Disk Access") {
			t.Errorf("%v → %v, want ErrPermission naming Full Disk Access", cause, err)
		}
	}
}

// An unreadable store is reported as a permission problem. Root reads any
// file, so as root (as CI runs) the read runs as the unprivileged user nobody
// in a copy of this test binary, given the path in unreadableStoreEnv.
func TestReadAppleUnreadableStore(t *testing.T) {
	path := os.Getenv(unreadableStoreEnv)
	if path == "" {
		dir := t.TempDir()
		path = localsourcetest.CopyFile(t, localsourcetest.Fixture(t, "calendar-contacts/apple-calendar-sqlitedb/Calendar.sqlitedb"), dir)
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			// t.TempDir and its parent are private to root: let nobody reach the file.
			for _, d := range []string{dir, filepath.Dir(dir)} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			runAsNobody(t, unreadableStoreEnv+"="+path)
			return
		}
	}
	_, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Path: path}, ReadOptions{})
	if !errors.Is(err, ErrPermission) {
		t.Errorf("unreadable store: got %v, want ErrPermission", err)
	}
}

const unreadableStoreEnv = "CALENDAR_TEST_UNREADABLE_STORE"

// runAsNobody reruns the calling test as uid/gid 65534 with env added and
// fails unless it passed there (a skip does not count).
func runAsNobody(t *testing.T, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "calendar-test-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "calendar.test")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s as nobody: %v\n%s", t.Name(), err, out)
	}
}

func TestReadICSRealFixtures(t *testing.T) {
	base := localsourcetest.Fixture(t, "calendar-contacts/biweekly")
	ny := mustLoad(t, "America/New_York")
	read := func(rel string) *SourceResult {
		t.Helper()
		res, err := ReadICS(context.Background(), SourceConfig{Name: "f", Kind: KindICS, Path: filepath.Join(base, rel), Account: "me"}, ReadOptions{Zone: ny})
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		return res
	}
	tests := []struct {
		file, title, start, tzid, rrule string
		items                           int
	}{
		{"io/text/outlook-2010.ics", "Team Meeting", "2013-06-10T16:00:00Z", "America/New_York", "", 1},
		{"io/text/rfc5545-example1.ics", "Networld+Interop Conference", "1996-09-18T14:30:00Z", "", "", 1},
		{"io/text/rfc5545-example2.ics", "XYZ Project Review", "1998-03-12T13:30:00Z", "America/New_York", "", 1},
		{"issues/issue126.ics", "", "2023-11-22T08:30:00Z", "Europe/Berlin", "", 2},
		{"issues/issue85.ics", "Meeting in Berlin", "2018-07-22T10:00:00Z", "Europe/Berlin", "", 1},
		{"issues/pr63.ics", "Daily Until 12/23", "2016-12-19T14:00:00Z", "America/New_York", "FREQ=DAILY;UNTIL=20161223T140000Z", 1},
		{"issues/issue101.ics", "Repeating", "2020-10-04T15:00:00Z", "Europe/Berlin", "FREQ=DAILY;UNTIL=20201010T145800Z", 1},
		{"issues/issue115-1.ics", "29.10. 8-8:30", "2022-10-29T06:00:00Z", "Europe/Berlin", "", 1},
		{"io/text/vcal-example1.vcs", "Your Proposal Review", "1996-04-01T03:30:00Z", "", "", 1},
		{"io/text/vcal-example3.vcs", "Steve's Proposal Review", "1996-04-01T07:30:00Z", "", "", 1},
		{"io/text/rfc5545-example4.ics", "", "", "", "", 0}, // a VTODO only
		{"io/text/vcal-example2.vcs", "", "", "", "", 0},
	}
	for _, tt := range tests {
		res := read(tt.file)
		if len(res.Items) != tt.items || len(res.ItemErrors) != 0 {
			t.Errorf("%s: %d items, errors %v; want %d", tt.file, len(res.Items), res.ItemErrors, tt.items)
			continue
		}
		if tt.items == 0 {
			continue
		}
		it := res.Items[0]
		if it.Title != tt.title || it.Start.UTC().Format(time.RFC3339) != tt.start || it.TZID != tt.tzid || it.RRule != tt.rrule {
			t.Errorf("%s: got title %q start %s tz %q rule %q", tt.file, it.Title, it.Start.UTC().Format(time.RFC3339), it.TZID, it.RRule)
		}
		if it.Account != "me" || it.UID == "" {
			t.Errorf("%s: account %q uid %q", tt.file, it.Account, it.UID)
		}
	}
	two := read("issues/issue126.ics")
	if two.Items[0].UID == two.Items[1].UID || !strings.HasPrefix(two.Items[0].UID, "synthetic-") {
		t.Errorf("events without UID need distinct synthetic UIDs, got %q and %q", two.Items[0].UID, two.Items[1].UID)
	}
	if again := read("issues/issue126.ics"); again.Items[0].UID != two.Items[0].UID {
		t.Error("synthetic UIDs must be stable across reads")
	}
	outlook := read("io/text/outlook-2010.ics").Items[0]
	if outlook.Location != "Auditorium 16" || !strings.Contains(outlook.Notes, "objectives for next project.\nWill include") {
		t.Errorf("outlook text fields: %q / %q", outlook.Location, outlook.Notes)
	}
}

const goodICS = `BEGIN:VCALENDAR
VERSION:2.0
BEGIN:VEVENT
UID:%s
SUMMARY:%s
DTSTART;TZID=Europe/Rome:20260323T093000
DTEND;TZID=Europe/Rome:20260323T100000
RRULE:FREQ=WEEKLY;BYDAY=MO
EXDATE;TZID=Europe/Rome:20260330T093000,20260406T093000
BEGIN:VALARM
ACTION:DISPLAY
TRIGGER:-PT10M
END:VALARM
END:VEVENT
END:VCALENDAR
`

func TestReadICSVdirAndBadInput(t *testing.T) {
	root := t.TempDir()
	localsourcetest.WriteFile(t, filepath.Join(root, "work", "displayname"), "Work calendar\n")
	localsourcetest.WriteFile(t, filepath.Join(root, "work", "a.ics"), fmt.Sprintf(goodICS, "a@x", "Weekly sync"))
	localsourcetest.WriteFile(t, filepath.Join(root, "work", "broken.ics"), "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:b@x\nSUMMARY:cut off\n")
	localsourcetest.WriteFile(t, filepath.Join(root, "work", "mars.ics"), strings.ReplaceAll(fmt.Sprintf(goodICS, "m@x", "Mars"), "Europe/Rome", "Mars/Olympus"))
	localsourcetest.WriteFile(t, filepath.Join(root, "home", "c.ics"), fmt.Sprintf(goodICS, "c@x", "Piano lesson"))
	localsourcetest.WriteFile(t, filepath.Join(root, "home", "notes.txt"), "not a calendar")
	localsourcetest.WriteFile(t, filepath.Join(root, ".git", "x.ics"), fmt.Sprintf(goodICS, "git@x", "hidden"))
	big := filepath.Join(root, "home", "huge.ics")
	localsourcetest.WriteFile(t, big, "")
	if err := os.Truncate(big, MaxICSFileBytes+1); err != nil {
		t.Fatal(err)
	}
	rome := mustLoad(t, "Europe/Rome")
	res, err := ReadICS(context.Background(), SourceConfig{Name: "dav", Kind: KindICS, Path: root, Account: "me@dav"}, ReadOptions{Zone: rome})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Item{}
	for _, it := range res.Items {
		got[it.UID] = it
	}
	if len(got) != 2 || got["a@x"].Calendar != "Work calendar" || got["a@x"].CalendarID != "work" || got["c@x"].Calendar != "home" {
		t.Fatalf("items %+v", res.Items)
	}
	a := got["a@x"]
	if a.ExternalID != "a.ics" || a.RRule != "FREQ=WEEKLY;BYDAY=MO" || !slices.Equal(a.ExDates, []string{"2026-03-30T07:30:00Z", "2026-04-06T07:30:00Z"}) {
		t.Errorf("vdir item = %+v", a)
	}
	if len(a.Alarms) != 1 || *a.Alarms[0].OffsetMinutes != -10 || a.Alarms[0].Action != "display" {
		t.Errorf("alarms %+v", a.Alarms)
	}
	var msgs []string
	for _, e := range res.ItemErrors {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"broken.ics: not a valid iCalendar file", "mars.ics: event m@x: DTSTART: unknown time zone \"Mars/Olympus\"", "huge.ics: read:"} {
		if !strings.Contains(joined, want) {
			t.Errorf("item errors lack %q:\n%s", want, joined)
		}
	}
	if len(res.FailedPaths) != 2 {
		t.Errorf("failed paths %v, want broken.ics and huge.ics", res.FailedPaths)
	}
	if _, err := ReadICS(context.Background(), SourceConfig{Name: "x", Path: filepath.Join(root, "absent")}, ReadOptions{}); !errors.Is(err, ErrMissing) {
		t.Errorf("missing folder: %v", err)
	}
}
