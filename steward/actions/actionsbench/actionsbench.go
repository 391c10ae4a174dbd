// Package actionsbench measures the Action Center (steward bench actions):
// list_actions over 100,000 stored items against the same SQL through C
// SQLite, calendar reminder generation over 10,000 indexed events, and a
// mail scan over a generated archive at the reference scale, with the
// model's calls counted (the model itself is simulated in process: the
// bench measures Steward's work and bounds, not a provider).
package actionsbench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	mailbench "github.com/agentstack/agentstack/steward/connectors/mail/bench"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
)

// Options size the runs.
type Options struct {
	Dir      string // working folder
	Items    int    // stored items for the list case (default 100,000)
	Events   int    // indexed events for the reminders (default 10,000)
	Messages int    // generated archive for the scan (default 78,000; negative skips the case)
	Samples  int    // rounds of the list case (default 60)
	// Repeats is how many times the reminder passes run, each into a
	// new Action Center store (default 5): one pass is one sample, and a
	// single sample on a shared machine says little.
	Repeats int
	Log     io.Writer
}

// Timing is one case's figures in milliseconds.
type Timing struct {
	First  float64 `json:"firstMs"`
	Median float64 `json:"medianMs"`
	P95    float64 `json:"p95Ms"`
}

// Report is the bench's JSON output.
type Report struct {
	Command string    `json:"command,omitempty"`
	Date    time.Time `json:"date"`
	List    struct {
		Items   int     `json:"items"`
		Go      Timing  `json:"go"`
		C       *Timing `json:"c,omitempty"`
		CEngine string  `json:"cEngine"`
		// GoCPU and CCPU are Go and C from CPU time (user+sys).
		GoCPU Timing  `json:"goCpu"`
		CCPU  *Timing `json:"cCpu,omitempty"`
		// Ratio is the median over rounds (engines interleaved) of Go's
		// CPU time over C's in the same round; RatioP10 and RatioP90 are
		// its spread. The Wall ones are the same from wall-clock time,
		// which on a shared machine includes waiting for a core.
		Ratio        float64 `json:"ratioGoToC,omitempty"`
		RatioP10     float64 `json:"ratioP10,omitempty"`
		RatioP90     float64 `json:"ratioP90,omitempty"`
		WallRatio    float64 `json:"wallRatioGoToC,omitempty"`
		WallRatioP10 float64 `json:"wallRatioP10,omitempty"`
		WallRatioP90 float64 `json:"wallRatioP90,omitempty"`
		Rounds       int     `json:"rounds"`
		PerRound     int     `json:"callsPerRound"`
		Query        string  `json:"query"`
	} `json:"listActions"`
	Reminders struct {
		Events int `json:"events"`
		// FirstMs and UnchangedMs are the medians over Repeats runs of
		// the creating pass (into an empty store) and the unchanged pass
		// after it; the samples are beside them.
		FirstMs     float64 `json:"firstPassMs"`
		UnchangedMs float64 `json:"unchangedPassMs"`
		// CPU time of this process during each pass: on a shared machine
		// it says more than wall time.
		FirstCPUMs       float64   `json:"firstPassCpuMs"`
		UnchangedCPUMs   float64   `json:"unchangedPassCpuMs"`
		Created          int       `json:"created"`
		Repeats          int       `json:"repeats"`
		FirstSamples     []float64 `json:"firstPassSamplesMs"`
		UnchangedSamples []float64 `json:"unchangedPassSamplesMs"`
	} `json:"calendarReminders"`
	LoadAverage string      `json:"loadAverage"`
	Scan        *ScanResult `json:"scan,omitempty"`
}

// ScanResult is the scan case's outcome.
type ScanResult struct {
	Messages   int                 `json:"archiveMessages"`
	IngestSec  float64             `json:"ingestSeconds"`
	ScanMs     float64             `json:"scanMs"`
	ModelCalls int64               `json:"modelCalls"`
	Report     *actions.ScanReport `json:"report"`
	Note       string              `json:"note"`
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Run runs the three cases.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Items <= 0 {
		o.Items = 100000
	}
	if o.Events <= 0 {
		o.Events = 10000
	}
	if o.Messages == 0 {
		o.Messages = 78000
	}
	if o.Samples <= 0 {
		o.Samples = 60
	}
	rep := &Report{Date: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAverage = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if err := listCase(ctx, &o, rep); err != nil {
		return nil, fmt.Errorf("list case: %w", err)
	}
	if err := reminderCase(ctx, &o, rep); err != nil {
		return nil, fmt.Errorf("reminder case: %w", err)
	}
	if o.Messages > 0 {
		res, err := scanCase(ctx, &o)
		if err != nil {
			return nil, fmt.Errorf("scan case: %w", err)
		}
		rep.Scan = res
	}
	return rep, nil
}

func summarise(first time.Duration, warm []time.Duration) Timing {
	sort.Slice(warm, func(i, j int) bool { return warm[i] < warm[j] })
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	p95 := warm[(len(warm)*95+99)/100-1] // nearest rank
	return Timing{First: ms(first), Median: ms(warm[len(warm)/2]), P95: ms(p95)}
}

// listPerRound is how many calls one engine makes back to back in a round
// of the list case: a round lasts a few milliseconds a side, long enough to
// swamp the clock's resolution and short enough that the machine's load
// rarely changes within it.
const listPerRound = 25

func listCase(ctx context.Context, o *Options, rep *Report) error {
	path := filepath.Join(o.Dir, "list", "actions.db")
	os.RemoveAll(filepath.Dir(path))
	store, err := actions.Open(ctx, path, actions.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	o.logf("storing %d items", o.Items)
	if err := fill(ctx, store.DB(), o.Items); err != nil {
		return err
	}
	lo := actions.ListOptions{} // list_actions' default: open items, 20, compact
	rep.List.Items = o.Items
	goList := func() error {
		res, err := store.List(ctx, lo)
		if err == nil && len(res.Items) != actions.DefaultListLimit {
			err = fmt.Errorf("listed %d items", len(res.Items))
		}
		return err
	}
	page, counts := actions.ListQueries(lo, time.Now())
	rep.List.Query = page.SQL
	sides := []func() error{goList}
	cdb, err := csqlite.Open(ctx, path)
	if err != nil {
		rep.List.CEngine = "none: " + err.Error()
	} else {
		defer cdb.Close()
		rep.List.CEngine = "C SQLite " + csqlite.Version()
		// Both sides run prepared statements, as Store.List does.
		var stmts []*sql.Stmt
		for _, q := range []actions.Query{page, counts} {
			st, err := cdb.PrepareContext(ctx, q.SQL)
			if err != nil {
				return err
			}
			defer st.Close()
			stmts = append(stmts, st)
		}
		sides = append(sides, func() error {
			for i, q := range []actions.Query{page, counts} {
				if err := drain(ctx, stmts[i], q.Args); err != nil {
					return err
				}
			}
			return nil
		})
	}
	res, err := interleave(o.Samples, listPerRound, sides...)
	if err != nil {
		return err
	}
	rep.List.Go, rep.List.GoCPU, rep.List.Rounds, rep.List.PerRound = res.wall[0], res.cpu[0], o.Samples, listPerRound
	o.logf("  Go (modernc) median %.3f ms (CPU %.3f ms)", rep.List.Go.Median, rep.List.GoCPU.Median)
	if len(sides) == 1 {
		return nil
	}
	rep.List.C, rep.List.CCPU = &res.wall[1], &res.cpu[1]
	rep.List.Ratio, rep.List.RatioP10, rep.List.RatioP90 = res.cpuRatio[0], res.cpuRatio[1], res.cpuRatio[2]
	rep.List.WallRatio, rep.List.WallRatioP10, rep.List.WallRatioP90 = res.wallRatio[0], res.wallRatio[1], res.wallRatio[2]
	o.logf("  C median %.3f ms (CPU %.3f ms); Go/C per round, median of %d rounds: CPU %.2f (p10 %.2f, p90 %.2f), wall %.2f (p10 %.2f, p90 %.2f)",
		rep.List.C.Median, rep.List.CCPU.Median, o.Samples, rep.List.Ratio, rep.List.RatioP10, rep.List.RatioP90,
		rep.List.WallRatio, rep.List.WallRatioP10, rep.List.WallRatioP90)
	return nil
}

// sample is a measured call's wall-clock and CPU time (user+sys of the
// process: unlike wall time, it leaves out the time the process waits for
// a core on a shared machine).
type sample struct{ wall, cpu time.Duration }

// ms returns s in milliseconds (to the microsecond), wall then CPU.
func (s sample) ms() (wall, cpu float64) {
	return float64(s.wall.Microseconds()) / 1000, float64(s.cpu.Microseconds()) / 1000
}

// measure calls f n times back to back and returns the mean call's times.
func measure(n int, f func() error) (sample, error) {
	start, cpu := time.Now(), cpuTime()
	for range n {
		if err := f(); err != nil {
			return sample{}, err
		}
	}
	return sample{time.Since(start) / time.Duration(n), (cpuTime() - cpu) / time.Duration(n)}, nil
}

// interleaved is interleave's outcome, from wall clock and from CPU time.
type interleaved struct {
	wall, cpu           []Timing   // per side: the first call, then median and p95 over rounds of the mean call
	wallRatio, cpuRatio [3]float64 // side 0 over side 1 per round: median, p10, p90
}

// interleave times sides against each other on a shared machine: after one
// first call each, rounds alternate the sides (and which goes first), each
// side making perRound calls back to back; a round's ratio compares the two
// sides' times in that round, so a change of load between rounds moves both
// alike, and the median of the rounds' ratios says more than the ratio of
// two medians taken at different times.
func interleave(rounds, perRound int, sides ...func() error) (*interleaved, error) {
	first := make([]sample, len(sides))
	for i, f := range sides {
		var err error
		if first[i], err = measure(1, f); err != nil {
			return nil, err
		}
	}
	walls, cpus := make([][]time.Duration, len(sides)), make([][]time.Duration, len(sides))
	var wallRatios, cpuRatios []float64
	for r := range rounds {
		took := make([]sample, len(sides))
		for k := range sides {
			i := (k + r) % len(sides)
			var err error
			if took[i], err = measure(perRound, sides[i]); err != nil {
				return nil, err
			}
			walls[i], cpus[i] = append(walls[i], took[i].wall), append(cpus[i], took[i].cpu)
		}
		if len(sides) > 1 {
			wallRatios = append(wallRatios, float64(took[0].wall)/float64(took[1].wall))
			// A round's CPU time can round to zero at a coarse clock: max 1 ns.
			cpuRatios = append(cpuRatios, float64(max(took[0].cpu, 1))/float64(max(took[1].cpu, 1)))
		}
	}
	out := &interleaved{}
	for i := range sides {
		out.wall = append(out.wall, summarise(first[i].wall, walls[i]))
		out.cpu = append(out.cpu, summarise(first[i].cpu, cpus[i]))
	}
	if len(sides) > 1 {
		out.wallRatio, out.cpuRatio = spread(wallRatios), spread(cpuRatios)
	}
	return out, nil
}

// spread returns the median, 10th and 90th percentiles (nearest rank) of v.
func spread(v []float64) [3]float64 {
	sort.Float64s(v)
	at := func(p int) float64 { return v[min(len(v)-1, len(v)*p/100)] }
	return [3]float64{at(50), at(10), at(90)}
}

// drain runs st and reads every column of every row, as List does.
func drain(ctx context.Context, st *sql.Stmt, args []any) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
	}
	return rows.Err()
}

// fill stores n items with realistic payloads (a proposal and a context
// snapshot of a few KB each), 70 % open, in one transaction.
func fill(ctx context.Context, db *sql.DB, n int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO items(source_key, kind, title, summary, priority, due_at, status, created_at, updated_at, source_at, proposal, diagnostics, snapshot)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	statuses := []actions.Status{"new", "new", "new", "new", "read", "read", "read", "done", "done", "dismissed"}
	body := strings.Repeat("Context of the request, quoted from the thread. ", 80)
	prop, _ := json.Marshal([]actions.Alternative{{Summary: "Reply", Confidence: 0.8, Steps: []actions.Step{{Label: "Reply", Type: "tool",
		Tool: "mcp__mail__reply_email", Args: json.RawMessage(`{"messageId":"1","body":"` + strings.Repeat("Thanks, ", 100) + `"}`)}}}})
	snap, _ := json.Marshal(actions.Snapshot{Trigger: json.RawMessage(`{"body":` + fmt.Sprintf("%q", body) + `}`), Rationale: "asked"})
	base := time.Now().Add(-time.Duration(n) * time.Minute).UnixMilli()
	for i := 0; i < n; i++ {
		var due any
		if i%3 == 0 {
			due = base + int64(i)*60000 + 86400000
		}
		at := base + int64(i)*60000
		if _, err := stmt.ExecContext(ctx, fmt.Sprintf("mail:thread:%d", i), "reply-needed", fmt.Sprintf("Answer request %d", i), "Someone asks for something.",
			"normal", due, statuses[i%len(statuses)], at, at, at, prop, "[]", snap); err != nil {
			return err
		}
	}
	// Raw inserts bypass the store's writers, which keep item_counts.
	if _, err := tx.ExecContext(ctx, `UPDATE item_counts SET n = (SELECT count(*) FROM items WHERE items.status = item_counts.status)`); err != nil {
		return err
	}
	return tx.Commit()
}

// calendarIndex indexes o.Events events starting in the next three days
// through a real calendar sync of one .ics file under dir, and returns the
// index path and the clock the events are relative to.
func calendarIndex(ctx context.Context, o *Options, dir string) (string, time.Time, error) {
	os.RemoveAll(dir)
	vdir := filepath.Join(dir, "vdir", "home")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", time.Time{}, err
	}
	now := time.Now().Truncate(time.Minute)
	var b strings.Builder
	b.WriteString("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//steward bench//EN\n")
	for i := 0; i < o.Events; i++ {
		start := now.Add(time.Duration(i%4300) * time.Minute).Add(time.Minute)
		fmt.Fprintf(&b, "BEGIN:VEVENT\nUID:bench-%d\nSUMMARY:Meeting %d\nLOCATION:Room %d\nDTSTART:%s\nDTEND:%s\nLAST-MODIFIED:%s\nEND:VEVENT\n",
			i, i, i%40, start.UTC().Format("20060102T150405Z"), start.Add(30*time.Minute).UTC().Format("20060102T150405Z"),
			now.Add(-time.Hour).UTC().Format("20060102T150405Z"))
	}
	b.WriteString("END:VCALENDAR\n")
	if err := os.WriteFile(filepath.Join(vdir, "bench.ics"), []byte(b.String()), 0o644); err != nil {
		return "", time.Time{}, err
	}
	idxPath := filepath.Join(dir, "calendar-index.sqlitedb")
	idx, err := calendar.OpenIndex(ctx, idxPath)
	if err != nil {
		return "", time.Time{}, err
	}
	o.logf("indexing %d events", o.Events)
	_, err = idx.Sync(ctx, &calendar.Config{Timezone: "UTC", Sources: []calendar.SourceConfig{{Name: "bench", Kind: calendar.KindICS, Path: filepath.Join(dir, "vdir"), Account: "bench"}}},
		calendar.SyncOptions{})
	idx.Close()
	if err != nil {
		return "", time.Time{}, err
	}
	return idxPath, now, nil
}

func reminderCase(ctx context.Context, o *Options, rep *Report) error {
	dir := filepath.Join(o.Dir, "calendar")
	idxPath, now, err := calendarIndex(ctx, o, dir)
	if err != nil {
		return err
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	ro := actions.ReminderOptions{IndexPath: idxPath, Now: now, Days: actions.DefaultCalendarDays}
	rm := &rep.Reminders
	var firstCPU, unchangedCPU []float64
	var r actions.ReminderReport
	for i := range o.Repeats {
		var firstPass, unchangedPass sample
		if r, firstPass, unchangedPass, err = reminderPasses(ctx, filepath.Join(dir, fmt.Sprintf("actions-%d.db", i)), ro); err != nil {
			return err
		}
		first, fc := firstPass.ms()
		unchanged, uc := unchangedPass.ms()
		rm.FirstSamples, rm.UnchangedSamples = append(rm.FirstSamples, first), append(rm.UnchangedSamples, unchanged)
		firstCPU, unchangedCPU = append(firstCPU, fc), append(unchangedCPU, uc)
		o.logf("  run %d: %d reminders created in %.1f ms (CPU %.1f ms); unchanged pass %.1f ms (CPU %.1f ms)", i+1, r.Created, first, fc, unchanged, uc)
	}
	rm.Repeats, rm.Events, rm.Created = o.Repeats, r.Events, r.Created
	median := func(v []float64) float64 { return spread(slices.Clone(v))[0] }
	rm.FirstMs, rm.UnchangedMs = median(rm.FirstSamples), median(rm.UnchangedSamples)
	rm.FirstCPUMs, rm.UnchangedCPUMs = median(firstCPU), median(unchangedCPU)
	o.logf("  medians of %d runs: created in %.1f ms (CPU %.1f ms); unchanged pass %.1f ms (CPU %.1f ms)", o.Repeats,
		rm.FirstMs, rm.FirstCPUMs, rm.UnchangedMs, rm.UnchangedCPUMs)
	if r.Events != o.Events {
		return fmt.Errorf("%d of %d events were in the window", r.Events, o.Events)
	}
	return nil
}

// reminderPasses runs the creating pass into a new store at path and the
// unchanged pass after it, returning the report of the first and each
// pass's times.
func reminderPasses(ctx context.Context, path string, ro actions.ReminderOptions) (r actions.ReminderReport, first, unchanged sample, err error) {
	store, err := actions.Open(ctx, path, actions.Options{})
	if err != nil {
		return r, first, unchanged, err
	}
	defer store.Close()
	pass := func() (err error) {
		r, err = store.CalendarReminders(ctx, ro)
		return err
	}
	// Collect the previous work's garbage first: its debt is not the pass's.
	runtime.GC()
	if first, err = measure(1, pass); err != nil {
		return r, first, unchanged, err
	}
	created := r
	runtime.GC()
	unchanged, err = measure(1, pass)
	return created, first, unchanged, err
}

// countingModel answers the planner like a cautious model: one thread in
// five is actionable, the rest are not; every call is counted.
type countingModel struct{ calls atomic.Int64 }

func (m *countingModel) Chat(_ context.Context, req *llm.ChatRequest) (*llm.ChatResponse, error) {
	m.calls.Add(1)
	user := req.Messages[len(req.Messages)-1].Content
	h := fnv.New32a()
	h.Write([]byte(user))
	var out any = map[string]any{"actionable": false, "reason": "informational"}
	if strings.Contains(req.Messages[0].Content, "Produce executable alternatives") {
		out = map[string]any{"alternatives": []any{map[string]any{"summary": "Reply", "confidence": 0.7,
			"steps": []any{map[string]any{"label": "Reply", "type": "tool", "tool": "mcp__mail__reply_email", "args": map[string]any{"messageId": "1", "body": "ok"}}}}}}
	} else if h.Sum32()%5 == 0 {
		out = map[string]any{"actionable": true, "kind": "reply-needed", "title": "Answer", "summary": "asks"}
	}
	b, _ := json.Marshal(out)
	return &llm.ChatResponse{Choices: []llm.Choice{{Message: llm.Message{Role: "assistant", Content: string(b)}}}}, nil
}

func scanCase(ctx context.Context, o *Options) (*ScanResult, error) {
	dir := filepath.Join(o.Dir, "scan")
	os.RemoveAll(dir)
	o.logf("generating a %d-message archive", o.Messages)
	man, err := mailbench.Generate(ctx, mailbench.GenOptions{Dir: dir, Messages: o.Messages})
	if err != nil {
		return nil, err
	}
	db, blobs := mirror.Paths(dir)
	store, err := mirror.Open(ctx, mirror.Options{DBPath: db, BlobDir: blobs,
		Accounts: []mail.Account{{Name: "bench", Kind: mail.KindMaildir, Root: man.Root, Layout: mail.LayoutAuto, Addresses: []string{"me@example.com"}}}})
	if err != nil {
		return nil, err
	}
	o.logf("ingesting")
	start := time.Now()
	_, err = store.Sync(ctx, mirror.SyncOptions{Mode: mirror.Backfill})
	store.Close()
	if err != nil {
		return nil, err
	}
	res := &ScanResult{Messages: o.Messages, IngestSec: time.Since(start).Seconds(),
		Note: "model simulated in process (one thread in five actionable); a first activation with ACTION_CENTER_NO_SEED=1, so the whole recent window is reviewed"}
	r, err := threads.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	refs, err := r.MessagesSince(ctx, 0, time.Time{}, 0)
	if err != nil || len(refs) == 0 {
		return nil, fmt.Errorf("read the generated mirror: %v", err)
	}
	latest := refs[0].Date
	for _, m := range refs {
		if m.Date.After(latest) {
			latest = m.Date
		}
	}
	as, err := actions.Open(ctx, filepath.Join(dir, "actions.db"), actions.Options{})
	if err != nil {
		return nil, err
	}
	defer as.Close()
	model := &countingModel{}
	start = time.Now()
	res.Report, err = as.Scan(ctx, actions.ScanOptions{Mail: r, Planner: &actions.Planner{Model: model, ModelName: "simulated"}, NoSeed: true,
		Now: latest.Add(time.Hour), Calendar: actions.ReminderOptions{IndexPath: filepath.Join(dir, "no-calendar.sqlitedb")}})
	if err != nil {
		return nil, err
	}
	res.ScanMs = float64(time.Since(start).Microseconds()) / 1000
	res.ModelCalls = model.calls.Load()
	o.logf("  scan %.0f ms: pool %d, %d threads, %d prefiltered %v, %d analysed, %d model calls, %d deferred", res.ScanMs, res.Report.Pool,
		res.Report.Threads, res.Report.Prefiltered, res.Report.Rejections, res.Report.Analysed, res.ModelCalls, res.Report.Deferred)
	return res, nil
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
