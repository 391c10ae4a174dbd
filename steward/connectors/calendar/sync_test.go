package calendar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/search/vecindex/vecindextest"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
)

// vevent renders a minimal VEVENT; extra lines are appended verbatim.
func vevent(uid, summary, start, end string, extra ...string) string {
	var b strings.Builder
	b.WriteString("BEGIN:VEVENT\n")
	if uid != "" {
		b.WriteString("UID:" + uid + "\n")
	}
	b.WriteString("SUMMARY:" + summary + "\n")
	b.WriteString("DTSTART;TZID=Europe/Rome:" + start + "\n")
	b.WriteString("DTEND;TZID=Europe/Rome:" + end + "\n")
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	b.WriteString("END:VEVENT\n")
	return b.String()
}

func vcalendar(events ...string) string {
	return "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\n" + strings.Join(events, "") + "END:VCALENDAR\n"
}

type testEnv struct {
	t     *testing.T
	idx   *Index
	cfg   *Config
	root  string
	clock time.Time
}

func newTestEnv(t *testing.T, sources ...SourceConfig) *testEnv {
	t.Helper()
	mustLoad(t, "Europe/Rome")
	dir := t.TempDir()
	idx, err := OpenIndex(context.Background(), filepath.Join(dir, "calendar-index.sqlitedb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	cfg := &Config{Timezone: "Europe/Rome", Sources: sources}
	for i := range cfg.Sources {
		if cfg.Sources[i].Account == "" {
			cfg.Sources[i].Account = cfg.Sources[i].Name
		}
	}
	return &testEnv{t: t, idx: idx, cfg: cfg, root: dir, clock: time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)}
}

func (e *testEnv) sync(opts SyncOptions) *SyncReport {
	e.t.Helper()
	opts.Now = func() time.Time { return e.clock }
	rep, err := e.idx.Sync(context.Background(), e.cfg, opts)
	if err != nil {
		e.t.Fatalf("sync: %v", err)
	}
	return rep
}

func (e *testEnv) service(emb Embedder) *Service {
	return NewService(context.Background(), e.idx, ServiceOptions{Embedder: emb, Now: func() time.Time { return e.clock }})
}

// refs returns uid → ref of the indexed masters and single events.
func (e *testEnv) refs() map[string][]string {
	e.t.Helper()
	rows, err := e.idx.db.Query(`SELECT uid, ref_id FROM events WHERE recurrence_id IS NULL ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var uid, ref string
		rows.Scan(&uid, &ref)
		out[uid] = append(out[uid], ref)
	}
	return out
}

func (e *testEnv) count() int {
	var n int
	e.idx.db.QueryRow(`SELECT count(*) FROM events`).Scan(&n)
	return n
}

func TestSyncIdentityUIDChangeBecomesAlias(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "dav", Kind: KindICS})
	dir := filepath.Join(env.root, "vdir", "home")
	env.cfg.Sources[0].Path = filepath.Join(env.root, "vdir")
	file := filepath.Join(dir, "lunch.ics")
	localsourcetest.WriteFile(t, file, vcalendar(vevent("u1", "Lunch with Marco", "20260504T120000", "20260504T130000", "LOCATION:Trattoria")))
	rep := env.sync(SyncOptions{})
	if rep.Added != 1 || !rep.Complete || rep.Generation != 1 {
		t.Fatalf("first sync %+v", rep)
	}
	ref := env.refs()["u1"][0]

	// The server rewrote the UID; the file (external id), calendar and
	// start are unchanged, so the identity carries over and u1 becomes an alias.
	localsourcetest.WriteFile(t, file, vcalendar(vevent("u1-new", "Lunch with Marco (moved table)", "20260504T120000", "20260504T130000")))
	rep = env.sync(SyncOptions{})
	if rep.Rematched != 1 || rep.Added != 0 || rep.Deleted != 0 || rep.Updated != 1 {
		t.Fatalf("second sync %+v", rep)
	}
	if got := env.refs()["u1-new"]; len(got) != 1 || got[0] != ref {
		t.Fatalf("identity after UID change: %v, want %s", got, ref)
	}
	svc := env.service(nil)
	for _, key := range []string{"u1", "u1-new", ref} {
		ev, err := svc.ReadEvent(context.Background(), ReadParams{UID: key})
		if err != nil {
			t.Fatalf("read_event %q: %v", key, err)
		}
		if ev.UID != "u1-new" || ev.Ref != ref || len(ev.Aliases) != 1 || ev.Aliases[0] != "u1" {
			t.Errorf("read_event %q = uid %q ref %q aliases %v", key, ev.UID, ev.Ref, ev.Aliases)
		}
	}
	// The old UID coming back is recognised through the alias.
	localsourcetest.WriteFile(t, file, vcalendar(vevent("u1", "Lunch with Marco", "20260504T150000", "20260504T160000")))
	rep = env.sync(SyncOptions{})
	if got := env.refs()["u1"]; len(got) != 1 || got[0] != ref || rep.Rematched != 0 {
		t.Errorf("alias not recognised: %v %+v", got, rep)
	}
}

func TestSyncHeuristicWithoutExternalID(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "file", Kind: KindICS})
	file := filepath.Join(env.root, "cal.ics")
	env.cfg.Sources[0].Path = file
	localsourcetest.WriteFile(t, file, vcalendar(
		vevent("a", "Dentist", "20260410T090000", "20260410T100000", "LOCATION:Via Roma 1"),
		vevent("b", "Gym", "20260411T090000", "20260411T100000")))
	env.sync(SyncOptions{})
	before := env.refs()

	// New UIDs; "Dentist" is otherwise identical and keeps its identity;
	// "Gym" also changed title, so nothing identifies it any more.
	localsourcetest.WriteFile(t, file, vcalendar(
		vevent("a2", "Dentist", "20260410T090000", "20260410T100000", "LOCATION:Via Roma 1"),
		vevent("b2", "Gym class", "20260411T090000", "20260411T100000")))
	rep := env.sync(SyncOptions{})
	after := env.refs()
	if after["a2"][0] != before["a"][0] {
		t.Errorf("Dentist lost its identity: %v → %v", before, after)
	}
	if after["b2"][0] == before["b"][0] || rep.Deleted != 1 || rep.Added != 1 || rep.Rematched != 1 {
		t.Errorf("Gym class must be a new identity: %v → %v, %+v", before, after, rep)
	}
}

func TestSyncTwoEqualEventsNeverMerge(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "file", Kind: KindICS})
	file := filepath.Join(env.root, "cal.ics")
	env.cfg.Sources[0].Path = file
	standup := func(uid string) string { return vevent(uid, "Standup", "20260402T093000", "20260402T094500") }

	// Two equal events in one sync are two rows.
	localsourcetest.WriteFile(t, file, vcalendar(standup("x"), standup("y")))
	if rep := env.sync(SyncOptions{}); rep.Added != 2 || env.count() != 2 {
		t.Fatalf("two equal events: %+v, %d rows", rep, env.count())
	}
	first := env.refs()

	// Both change UID at once: each heuristic lookup sees two equal
	// candidates, so both get new identities instead of an arbitrary pick.
	localsourcetest.WriteFile(t, file, vcalendar(standup("x2"), standup("y2")))
	rep := env.sync(SyncOptions{})
	now := env.refs()
	if rep.Rematched != 0 || rep.Added != 2 || rep.Deleted != 2 || env.count() != 2 {
		t.Errorf("ambiguous candidates: %+v", rep)
	}
	for _, r := range []string{now["x2"][0], now["y2"][0]} {
		if r == first["x"][0] || r == first["y"][0] {
			t.Errorf("ambiguous match reused identity %s", r)
		}
	}

	// One indexed event and two equal new items: the first takes the
	// identity, the second cannot reuse a row already claimed in this sync.
	localsourcetest.WriteFile(t, file, vcalendar(standup("only")))
	env.sync(SyncOptions{})
	only := env.refs()["only"][0]
	localsourcetest.WriteFile(t, file, vcalendar(standup("p"), standup("q")))
	rep = env.sync(SyncOptions{})
	now = env.refs()
	if rep.Rematched != 1 || rep.Added != 1 || env.count() != 2 || now["p"][0] != only || now["q"][0] == only {
		t.Errorf("generation tracking: %+v refs %v (only=%s)", rep, now, only)
	}
}

func TestSyncPublishesAtomically(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "file", Kind: KindICS})
	file := filepath.Join(env.root, "cal.ics")
	env.cfg.Sources[0].Path = file
	localsourcetest.WriteFile(t, file, vcalendar(vevent("a", "Alpha", "20260401T090000", "20260401T100000"), vevent("b", "Beta", "20260402T090000", "20260402T100000")))
	env.sync(SyncOptions{})
	localsourcetest.WriteFile(t, file, vcalendar(vevent("a", "Alpha renamed", "20260401T090000", "20260401T100000"), vevent("c", "Gamma", "20260403T090000", "20260403T100000")))

	env.idx.beforeCommit = func() error { return errors.New("disk full (simulated)") }
	if _, err := env.idx.Sync(context.Background(), env.cfg, SyncOptions{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("sync with failing commit: %v", err)
	}
	st, _ := env.idx.State(context.Background())
	if st.Generation != 1 {
		t.Errorf("marker advanced to %d after a failed sync", st.Generation)
	}
	res, err := env.service(nil).SearchEvents(context.Background(), SearchParams{Query: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 1 || res.Events[0].Title != "Alpha" || env.count() != 2 || len(env.refs()["c"]) != 0 {
		t.Errorf("a failed sync leaked changes: %+v, rows %d", res.Events, env.count())
	}

	env.idx.beforeCommit = nil
	rep := env.sync(SyncOptions{})
	st, _ = env.idx.State(context.Background())
	if st.Generation != 2 || rep.Generation != 2 || rep.Added != 1 || rep.Updated != 1 || rep.Deleted != 1 {
		t.Errorf("sync after recovery: %+v, state %+v", rep, st)
	}
}

func TestSyncKeepsRowsWhenSourceOrFileFails(t *testing.T) {
	rome := mustLoad(t, "Europe/Rome")
	a := newAppleDB(t)
	a.event(appleEvent{Summary: "Board meeting", TZ: "Europe/Rome", UID: "board@x",
		Start: time.Date(2026, 4, 7, 14, 0, 0, 0, rome), End: time.Date(2026, 4, 7, 16, 0, 0, 0, rome)})
	env := newTestEnv(t, SourceConfig{Name: "mac", Kind: KindApple, Path: a.Path}, SourceConfig{Name: "dav", Kind: KindICS})
	vdir := filepath.Join(env.root, "vdir")
	env.cfg.Sources[1].Path = vdir
	localsourcetest.WriteFile(t, filepath.Join(vdir, "work", "a.ics"), vcalendar(vevent("a", "Alpha", "20260401T090000", "20260401T100000")))
	localsourcetest.WriteFile(t, filepath.Join(vdir, "work", "b.ics"), vcalendar(vevent("b", "Beta", "20260402T090000", "20260402T100000")))
	if rep := env.sync(SyncOptions{}); rep.Added != 3 || !rep.Complete {
		t.Fatalf("first sync %+v", rep)
	}

	// The Apple store disappears (or loses permission) and one vdir file is
	// corrupted: their events stay, the sync says it is incomplete.
	a.db.Close()
	os.Rename(a.Path, a.Path+".moved")
	localsourcetest.WriteFile(t, filepath.Join(vdir, "work", "b.ics"), "BEGIN:VCALENDAR\nBEGIN:VEVENT\n")
	rep := env.sync(SyncOptions{})
	if rep.Complete || !strings.Contains(rep.SourceErrors["mac"], "not found") || len(rep.ItemErrors) != 1 {
		t.Errorf("report %+v", rep)
	}
	if rep.Deleted != 0 || rep.Kept != 2 || env.count() != 3 {
		t.Errorf("rows of failed reads must be kept: %+v, %d rows", rep, env.count())
	}
	st, _ := env.idx.State(context.Background())
	if st.Complete {
		t.Error("sync marker must record an incomplete sync")
	}
	// Removing the file for real deletes its event.
	os.Remove(filepath.Join(vdir, "work", "b.ics"))
	if rep := env.sync(SyncOptions{}); rep.Deleted != 1 || env.count() != 2 {
		t.Errorf("deleted file: %+v", rep)
	}
}

func TestSyncRemovedSourceDeletesItsRows(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "one", Kind: KindICS}, SourceConfig{Name: "two", Kind: KindICS})
	for i, name := range []string{"one", "two"} {
		p := filepath.Join(env.root, name+".ics")
		env.cfg.Sources[i].Path = p
		localsourcetest.WriteFile(t, p, vcalendar(vevent(name, "Event "+name, "20260401T090000", "20260401T100000")))
	}
	env.sync(SyncOptions{})
	env.cfg.Sources = env.cfg.Sources[:1]
	if rep := env.sync(SyncOptions{}); rep.Deleted != 1 || env.count() != 1 {
		t.Errorf("removed source: %+v", rep)
	}
}

func TestConfigParsing(t *testing.T) {
	home := "/home/me"
	c, err := ParseConfig([]byte("timezone: Europe/Rome\nsources:\n  - name: a\n    kind: ics\n    path: ~/cal\n"), home)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Path != "/home/me/cal" || c.Sources[0].Account != "a" || c.Location().String() != "Europe/Rome" {
		t.Errorf("config %+v", c)
	}
	bad := map[string]string{
		"unknown key":   "sources:\n  - name: a\n    kind: ics\n    path: /x\n    colour: red\n",
		"kind":          "sources:\n  - name: a\n    kind: outlook\n    path: /x\n",
		"duplicate":     "sources:\n  - {name: a, kind: ics, path: /x}\n  - {name: a, kind: ics, path: /y}\n",
		"relative path": "sources:\n  - {name: a, kind: ics, path: cal}\n",
		"no sources":    "timezone: UTC\n",
		"timezone":      "timezone: Mars/Base\nsources:\n  - {name: a, kind: ics, path: /x}\n",
		"embed":         "embed: sometimes\nsources:\n  - {name: a, kind: ics, path: /x}\n",
	}
	for name, y := range bad {
		if _, err := ParseConfig([]byte(y), home); err == nil {
			t.Errorf("%s: config accepted:\n%s", name, y)
		}
	}
	dir := t.TempDir()
	if _, err := LoadConfig(filepath.Join(dir, "calendar.yaml"), dir, "linux"); err == nil || !strings.Contains(err.Error(), "create it") {
		t.Errorf("missing config on Linux: %v", err)
	}
	store := filepath.Join(dir, "Library", "Group Containers", "group.com.apple.calendar", "Calendar.sqlitedb")
	localsourcetest.WriteFile(t, store, "")
	c, err = LoadConfig(filepath.Join(dir, "calendar.yaml"), dir, "darwin")
	if err != nil || c.Sources[0].Kind != KindApple || c.Sources[0].Path != store {
		t.Errorf("macOS discovery: %+v, %v", c, err)
	}
}

func TestResolveTZID(t *testing.T) {
	mustLoad(t, "Europe/Berlin")
	for in, want := range map[string]string{
		"Europe/Rome":                             "Europe/Rome",
		"W. Europe Standard Time":                 "Europe/Berlin",
		`"Eastern Standard Time"`:                 "America/New_York",
		"/mozilla.org/20050126_1/America/Chicago": "America/Chicago",
		"/America/New_York":                       "America/New_York",
		"UTC":                                     "UTC",
	} {
		loc, err := resolveTZID(in)
		if err != nil || loc.String() != want {
			t.Errorf("resolveTZID(%q) = %v, %v; want %s", in, loc, err, want)
		}
	}
	for _, in := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "Customized Time Zone"} {
		var unknown *ErrUnknownTZID
		if _, err := resolveTZID(in); !errors.As(err, &unknown) {
			t.Errorf("resolveTZID(%q) = %v, want ErrUnknownTZID", in, err)
		}
	}
	if n := len(windowsZones); n < 130 {
		t.Errorf("only %d Windows zones mapped", n)
	}
	for win, iana := range windowsZones {
		if _, err := time.LoadLocation(iana); err != nil {
			t.Errorf("%s maps to %s, which the zone database lacks: %v", win, iana, err)
		}
	}

}

func TestSyncEmbeddingsRecoverAndReset(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "file", Kind: KindICS})
	file := filepath.Join(env.root, "cal.ics")
	env.cfg.Sources[0].Path = file
	localsourcetest.WriteFile(t, file, vcalendar(vevent("a", "Alpha", "20260401T090000", "20260401T100000"),
		vevent("p", "POISON pill", "20260402T090000", "20260402T100000"), vevent("c", "Gamma", "20260403T090000", "20260403T100000")))
	rep := env.sync(SyncOptions{Embedder: &vecindextest.Scripted{Dim: 4, Reject: "POISON"}})
	if rep.Embedded != 2 || !strings.Contains(rep.EmbedError, "1 of 3 events not embedded") || rep.Added != 3 {
		t.Errorf("poisoned batch: %+v", rep)
	}
	// A model with another dimension resets the vectors instead of mixing them.
	rep = env.sync(SyncOptions{Embedder: &vecindextest.Scripted{Dim: 6, Reject: "POISON"}})
	dim, _ := env.idx.meta(context.Background(), env.idx.db, "vec_dim")
	var vectors int
	env.idx.db.QueryRow(`SELECT count(*) FROM events_vec`).Scan(&vectors)
	if dim != "6" || rep.Embedded != 2 || vectors != 2 {
		t.Errorf("dimension change: dim %s, embedded %d, vectors %d", dim, rep.Embedded, vectors)
	}
	// The endpoint going down leaves the published metadata intact.
	localsourcetest.WriteFile(t, file, vcalendar(vevent("a", "Alpha renamed", "20260401T090000", "20260401T100000")))
	rep = env.sync(SyncOptions{Embedder: &vecindextest.Scripted{Dim: 6, Down: true}})
	if rep.Embedded != 0 || !strings.Contains(rep.EmbedError, "unavailable") || rep.Updated != 1 || rep.Deleted != 2 || env.count() != 1 {
		t.Errorf("endpoint down: %+v", rep)
	}
	env.idx.db.QueryRow(`SELECT count(*) FROM events_vec`).Scan(&vectors)
	if vectors != 1 {
		t.Errorf("deleted events must lose their vectors: %d left", vectors)
	}
}
