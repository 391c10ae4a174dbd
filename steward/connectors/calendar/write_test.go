package calendar

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

// writeEnv is a vdir with two calendars, an index over it, a write journal
// and a Writer, all real files in a temporary folder.
type writeEnv struct {
	t       *testing.T
	root    string
	cfg     *Config
	idx     *Index
	journal *writeops.Store
	w       *Writer
	conf    *Confirmer
	now     time.Time
}

var rome = func() *time.Location { l, _ := time.LoadLocation("Europe/Rome"); return l }()

func newWriteEnv(t *testing.T) *writeEnv {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "calendars")
	for _, c := range []struct{ id, title string }{{"personal", "Personal"}, {"work", "Work"}} {
		if err := os.MkdirAll(filepath.Join(root, c.id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, c.id, "displayname"), []byte(c.title+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	e := &writeEnv{t: t, root: root, now: time.Now()}
	e.cfg = &Config{Timezone: "Europe/Rome", Sources: []SourceConfig{{Name: "local", Kind: KindICS, Path: root, Account: "me@example.com"}}}
	var err error
	if e.idx, err = OpenIndex(ctx, filepath.Join(dir, "calendar-index.sqlitedb")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.idx.Close() })
	if e.journal, err = writeops.Open(ctx, filepath.Join(dir, "write-ops", "ops.db"), writeops.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.journal.Close() })
	e.w = NewWriter(WriterOptions{
		Config:  func(context.Context) (*Config, error) { return e.cfg, nil },
		Index:   func(context.Context) (*Index, error) { return e.idx, nil },
		Journal: e.journal,
	})
	e.conf = NewConfirmer(ConfirmerOptions{Index: func(context.Context) (*Index, error) { return e.idx, nil }})
	return e
}

// sync runs a calendar sync (it starts after every write made so far).
func (e *writeEnv) sync() *SyncReport {
	e.t.Helper()
	time.Sleep(2 * time.Millisecond) // the sync's start must be strictly after the last write's completion
	rep, err := e.idx.Sync(context.Background(), e.cfg, SyncOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// reconcile runs one calendar confirmation pass and returns the state of op.
func (e *writeEnv) reconcile(id string) writeops.Operation {
	e.t.Helper()
	ctx := context.Background()
	cs := map[writeops.Kind]writeops.Confirmer{writeops.KindCalendarCreate: e.conf, writeops.KindCalendarUpdate: e.conf, writeops.KindCalendarDelete: e.conf}
	if _, err := e.journal.Reconcile(ctx, writeops.DomainCalendar, cs, 0); err != nil {
		e.t.Fatal(err)
	}
	op, err := e.journal.Get(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// confirm syncs and reconciles, and fails unless op ends confirmed.
func (e *writeEnv) confirm(res *WriteResult) {
	e.t.Helper()
	e.sync()
	if op := e.reconcile(res.OperationID); op.State != writeops.StateConfirmed {
		e.t.Fatalf("operation %s is %s after a fresh sync: %s; evidence %s", op.ID, op.State, op.Error, op.Evidence)
	}
}

// files lists every file under the vdir.
func (e *writeEnv) files() []string {
	var out []string
	filepath.WalkDir(e.root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out = append(out, p+"\n"+string(b))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// khal runs Debian's khal on the vdir with its own configuration and cache,
// listing the events between from and to (YYYY-MM-DD) as "start|end|title"
// lines in Europe/Rome.
func (e *writeEnv) khal(from, to string) []string {
	e.t.Helper()
	bin, err := exec.LookPath("khal")
	if err != nil {
		e.t.Skip("khal is not installed (apt-get install khal)")
	}
	dir := e.t.TempDir()
	var cals strings.Builder
	for _, c := range []string{"personal", "work"} {
		cals.WriteString("[[" + c + "]]\npath = " + filepath.Join(e.root, c) + "\ntype = calendar\n")
	}
	conf := "[calendars]\n" + cals.String() + `
[locale]
local_timezone = Europe/Rome
default_timezone = Europe/Rome
timeformat = %H:%M
dateformat = %Y-%m-%d
longdateformat = %Y-%m-%d
datetimeformat = %Y-%m-%d %H:%M
longdatetimeformat = %Y-%m-%d %H:%M
[sqlite]
path = ` + filepath.Join(dir, "khal.db") + "\n"
	cfg := filepath.Join(dir, "khal.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cfg, "list", "--day-format", "", "--format", "{start}|{end}|{title}|{calendar}", from, to)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "TZ=Europe/Rome")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("khal: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestCreateEventReadByKhal(t *testing.T) {
	e := newWriteEnv(t)
	ctx := context.Background()
	res, err := e.w.CreateEvent(ctx, CreateEventParams{Calendar: "Personal", Title: "Dentist", Start: "2026-05-04T09:00:00+02:00",
		End: "2026-05-04T10:00:00+02:00", TimeZone: "Europe/Rome", Location: "Via Roma 1", Recurrence: "FREQ=WEEKLY;COUNT=3", Alarms: []int{15}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(mustJSON(t, res))
	for _, f := range e.files() {
		t.Log(f)
	}
	t.Log(e.khal("2026-05-01", "2026-06-01"))
	e.confirm(res)
}
