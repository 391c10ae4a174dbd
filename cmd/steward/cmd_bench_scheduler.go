package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail/bench"
	"github.com/agentstack/agentstack/steward/scheduler"
)

func init() {
	registerBench(&benchmark{Name: "scheduler", Summary: "idle serve CPU with every job scheduled, unchanged reconcile vs notmuch new, watcher latency", Run: schedulerBench})
}

// schedulerBenchReport is `steward bench scheduler`'s JSON report.
type schedulerBenchReport struct {
	Command     string `json:"command"`
	Machine     string `json:"machine"`
	Date        string `json:"date"`
	LoadAverage string `json:"loadAverage,omitempty"`
	Messages    int    `json:"messages"`
	Files       int    `json:"files"`

	BackfillSeconds float64 `json:"backfillSeconds"`
	// Unchanged-tree runs: each figure is the median of Repeats runs.
	// The load average when they start (the backfill before them takes
	// minutes), and how the measured binary is linked: a dynamically
	// linked one (a default cgo build) runs the dynamic loader and libc's
	// start-up at every process start.
	ReconcileLoadAverage string    `json:"reconcileLoadAverage,omitempty"`
	BinaryLinking        string    `json:"binaryLinking,omitempty"`
	Repeats              int       `json:"repeats"`
	ReconcileSeconds     float64   `json:"reconcileSeconds"`
	NotmuchSeconds       float64   `json:"notmuchSeconds,omitempty"`
	NotmuchVersion       string    `json:"notmuchVersion,omitempty"`
	NotmuchNote          string    `json:"notmuchNote,omitempty"`
	ReconcileSamples     []float64 `json:"reconcileSamples"`
	NotmuchSamples       []float64 `json:"notmuchSamples,omitempty"`
	// CPU time (user + system) of the same runs, medians: on a loaded
	// machine the wall times are mostly waiting for a core.
	ReconcileCPUSeconds float64   `json:"reconcileCpuSeconds"`
	NotmuchCPUSeconds   float64   `json:"notmuchCpuSeconds,omitempty"`
	ReconcileCPUSamples []float64 `json:"reconcileCpuSamples"`
	NotmuchCPUSamples   []float64 `json:"notmuchCpuSamples,omitempty"`
	// StartupSeconds and StartupCPUSeconds are the medians of 'steward
	// version' run in the same rounds: what every process of this binary
	// costs before and after doing anything, so the reconcile's own share
	// is the difference.
	StartupSeconds    float64 `json:"startupSeconds"`
	StartupCPUSeconds float64 `json:"startupCpuSeconds"`
	// Scheduled* are the same rounds' mail-reconcile runs as the scheduler
	// makes them: its in-process check (the reconcile's own unchanged-folder
	// test, read-only) finds the tree as recorded and starts no child.
	// ScheduledFirstSeconds is the check's first call in this process.
	ScheduledSeconds      float64   `json:"scheduledSeconds"`
	ScheduledCPUSeconds   float64   `json:"scheduledCpuSeconds"`
	ScheduledSamples      []float64 `json:"scheduledSamples"`
	ScheduledFirstSeconds float64   `json:"scheduledFirstSeconds"`
	ScheduledDetail       string    `json:"scheduledDetail"`

	// Idle serve: CPU of the serve process and its connectors, outside job runs.
	IdleWindowSeconds   float64               `json:"idleWindowSeconds"`
	IdleMeasuredSeconds float64               `json:"idleMeasuredSeconds"` // the window minus job runs
	IdleCPUPercent      float64               `json:"idleCpuPercent"`      // of one core: serve + connectors
	IdleServeCPUPercent float64               `json:"idleServeCpuPercent"` // serve alone
	JobRunsInWindow     int                   `json:"jobRunsInWindow"`
	Jobs                []scheduler.JobStatus `json:"jobs"`

	// Watcher: new Maildir file to a search_mail hit.
	WatchMessages int       `json:"watchMessages"`
	WatchP50MS    float64   `json:"watchP50Ms"`
	WatchP95MS    float64   `json:"watchP95Ms"`
	WatchMaxMS    float64   `json:"watchMaxMs"`
	WatchSamples  []float64 `json:"watchSamplesMs"`

	Checks []bench.Check `json:"checks"`
}

// binaryLinking says whether the 64-bit little-endian ELF executable at path
// is "static" or "dynamic" (has a PT_INTERP program header), or "" when it
// cannot tell. The header is read by hand: debug/elf would link two more
// packages into every process of the binary.
func binaryLinking(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := make([]byte, 64)
	if _, err := f.ReadAt(h, 0); err != nil || string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 {
		return ""
	}
	off, size, n := int64(binary.LittleEndian.Uint64(h[0x20:])), int64(binary.LittleEndian.Uint16(h[0x36:])), int64(binary.LittleEndian.Uint16(h[0x38:]))
	if size < 4 {
		return ""
	}
	typ := make([]byte, 4)
	for i := int64(0); i < n; i++ {
		if _, err := f.ReadAt(typ, off+i*size); err != nil {
			return ""
		}
		if binary.LittleEndian.Uint32(typ) == 3 { // PT_INTERP
			return "dynamic"
		}
	}
	return "static"
}

// tailText keeps the end of a child's output for an error message.
func tailText(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

func schedulerBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench scheduler", "[options]", `
Generates a synthetic Maildir at the reference archive's scale (78,000 messages) and backfills it,
then measures, in one run:
  - the scheduler's mail-reconcile run on the unchanged tree (its in-process check, which starts
    no child when every folder is as recorded), the child it would otherwise start ('steward mail
    reconcile'), 'steward version' alone, and 'notmuch new' on the same unchanged tree, in
    interleaved rounds (medians of --repeats);
  - an idle 'steward serve' (child process) with every scheduler job at its default interval and the
    mail watcher on: CPU of serve and its connector processes over --idle, outside job runs;
  - the watcher: --watch new messages dropped one by one into the Maildir, each timed from its
    rename into new/ to its first hit through search_mail (p50/p95/max).
Writes a JSON report; see docs/benchmarks.md.`)
	out := fs.String("out", "scheduler-bench.json", "report file")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards)")
	keep := fs.Bool("keep", false, "keep the working folder")
	messages := fs.Int("messages", 78000, "messages to generate")
	idle := fs.Duration("idle", 10*time.Minute, "idle measuring window")
	watchN := fs.Int("watch", 100, "messages for the watcher latency")
	repeats := fs.Int("repeats", 3, "runs of reconcile and notmuch new on the unchanged tree")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the steward executable: %w", err)
	}
	work := *dir
	if work == "" {
		if work, err = os.MkdirTemp("", "steward-bench-scheduler-"); err != nil {
			return err
		}
		if !*keep {
			defer os.RemoveAll(work)
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(env.Stderr, format+"\n", a...) }
	rep := &schedulerBenchReport{Command: "steward bench scheduler " + strings.Join(args, " "), Machine: machineDescription(),
		Date: time.Now().UTC().Format(time.RFC3339), Messages: *messages, Repeats: *repeats, WatchMessages: *watchN}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAverage = strings.TrimSpace(string(b))
	}

	logf("generating %d messages in %s", *messages, work)
	man, err := bench.Generate(ctx, bench.GenOptions{Dir: work, Messages: *messages})
	if err != nil {
		return err
	}
	rep.Files = man.Files
	// Folders whose mail arrived long ago, as in a real archive: a folder
	// changed within the timestamp granularity of a scan is listed again
	// by the next one (by notmuch too), which at smoke size would be every
	// folder of a tree generated seconds before.
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(man.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == "cur" || d.Name() == "new") {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	home := filepath.Join(work, "home")
	os.MkdirAll(home, 0o700)
	mailYAML := "accounts:\n  - name: bench\n    kind: maildir\n    root: " + man.Root + "\n    addresses: [me@example.com]\n"
	if err := os.WriteFile(filepath.Join(home, "mail.yaml"), []byte(mailYAML), 0o600); err != nil {
		return err
	}
	// No embedding model runs here: mail-embed reports itself not configured.
	if err := os.WriteFile(filepath.Join(home, "config.env"), []byte("MAIL_EMBED_ENDPOINT=off\n"), 0o600); err != nil {
		return err
	}
	childEnv := append(os.Environ(), "STEWARD_HOME="+home)
	var childCPU float64 // of the last runChild
	runChild := func(args ...string) (float64, error) {
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Env = childEnv
		var errb bytes.Buffer
		cmd.Stderr = &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("steward %s: %v: %s", strings.Join(args, " "), err, tailText(errb.String()))
		}
		childCPU = processCPU(cmd.ProcessState)
		return time.Since(start).Seconds(), nil
	}
	logf("backfill")
	if rep.BackfillSeconds, err = runChild("mail", "backfill", "--json"); err != nil {
		return err
	}
	logf("  %.1f s", rep.BackfillSeconds)

	nm, nmCfg := exec.Command("notmuch", "--version"), filepath.Join(work, "notmuch-config")
	if v, err := nm.Output(); err != nil {
		rep.NotmuchNote = "notmuch is not installed (apt-get install notmuch); the comparison was skipped"
	} else {
		rep.NotmuchVersion = strings.TrimSpace(string(v))
		dbDir := filepath.Join(work, "notmuch-db")
		os.MkdirAll(dbDir, 0o700)
		conf := fmt.Sprintf("[database]\npath=%s\nmail_root=%s\n\n[user]\nname=Bench\nprimary_email=me@example.com\n\n[new]\ntags=unread;inbox;\nignore=\n\n[maildir]\nsynchronize_flags=true\n", dbDir, man.Root)
		os.WriteFile(nmCfg, []byte(conf), 0o600)
		logf("notmuch new (initial index, not timed)")
		if out, err := exec.CommandContext(ctx, "notmuch", "--config="+nmCfg, "new", "--quiet").CombinedOutput(); err != nil {
			rep.NotmuchNote = fmt.Sprintf("notmuch new failed: %v: %s", err, tailText(string(out)))
		}
	}
	// Like notmuch's initial index, the first reconcile after a backfill
	// lists every folder and records their times; it is not timed.
	logf("reconcile (first after the backfill, records folder times, not timed)")
	if _, err := runChild("mail", "reconcile", "--json"); err != nil {
		return err
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.ReconcileLoadAverage = strings.TrimSpace(string(b))
	}
	rep.BinaryLinking = binaryLinking(self)
	cfg, err := config.Load(config.LoadOptions{Getenv: func(k string) (string, bool) {
		if k == "STEWARD_HOME" {
			return home, true
		}
		return os.LookupEnv(k)
	}})
	if err != nil {
		return err
	}
	scheduled := func() (wall, cpu float64, err error) {
		cpu0, start := selfCPU(), time.Now()
		detail, upToDate := mailUpToDate(ctx, cfg)
		wall, cpu = time.Since(start).Seconds(), selfCPU()-cpu0
		if !upToDate {
			return 0, 0, errors.New("the scheduler's check did not find the unchanged tree up to date")
		}
		rep.ScheduledDetail = detail
		return wall, cpu, nil
	}
	if rep.ScheduledFirstSeconds, _, err = scheduled(); err != nil {
		return err
	}
	var startup, startupCPU, schedCPU []float64
	for i := 0; i < *repeats; i++ {
		s, c, err := scheduled()
		if err != nil {
			return err
		}
		rep.ScheduledSamples, schedCPU = append(rep.ScheduledSamples, s), append(schedCPU, c)
		s, err = runChild("mail", "reconcile", "--json")
		if err != nil {
			return err
		}
		rep.ReconcileSamples = append(rep.ReconcileSamples, s)
		rep.ReconcileCPUSamples = append(rep.ReconcileCPUSamples, childCPU)
		s, err = runChild("version")
		if err != nil {
			return err
		}
		startup, startupCPU = append(startup, s), append(startupCPU, childCPU)
		if rep.NotmuchVersion != "" && rep.NotmuchNote == "" {
			nm := exec.CommandContext(ctx, "notmuch", "--config="+nmCfg, "new", "--quiet")
			start := time.Now()
			if out, err := nm.CombinedOutput(); err != nil {
				rep.NotmuchNote = fmt.Sprintf("notmuch new failed: %v: %s", err, tailText(string(out)))
			} else {
				rep.NotmuchSamples = append(rep.NotmuchSamples, time.Since(start).Seconds())
				rep.NotmuchCPUSamples = append(rep.NotmuchCPUSamples, processCPU(nm.ProcessState))
			}
		}
	}
	rep.ReconcileSeconds = median(rep.ReconcileSamples)
	rep.NotmuchSeconds = median(rep.NotmuchSamples)
	rep.ReconcileCPUSeconds = median(rep.ReconcileCPUSamples)
	rep.NotmuchCPUSeconds = median(rep.NotmuchCPUSamples)
	rep.StartupSeconds, rep.StartupCPUSeconds = median(startup), median(startupCPU)
	rep.ScheduledSeconds, rep.ScheduledCPUSeconds = median(rep.ScheduledSamples), median(schedCPU)
	logf("unchanged tree: scheduled run %.4f s (CPU %.4f s, no child; first call %.4f s), notmuch new %.3f s (CPU %.3f s); medians of %d, load %s",
		rep.ScheduledSeconds, rep.ScheduledCPUSeconds, rep.ScheduledFirstSeconds, rep.NotmuchSeconds, rep.NotmuchCPUSeconds, *repeats, rep.ReconcileLoadAverage)
	logf("  the child 'steward mail reconcile' by itself: %.3f s, CPU %.3f s; process start-up ('steward version'): %.3f s, CPU %.3f s (%s binary)",
		rep.ReconcileSeconds, rep.ReconcileCPUSeconds, rep.StartupSeconds, rep.StartupCPUSeconds, rep.BinaryLinking)

	stopServe, err := benchIdleServe(ctx, self, home, childEnv, *idle, rep, logf)
	if err != nil {
		return err
	}
	err = benchWatcher(ctx, self, home, man.Root, *watchN, rep, logf)
	stopServe()
	if err != nil {
		return err
	}

	rep.Checks = []bench.Check{
		{Target: "idle serve under 1 % of a core outside job runs", Pass: rep.IdleCPUPercent < 1,
			Detail: fmt.Sprintf("%.3f %% over %.0f s (serve alone %.3f %%)", rep.IdleCPUPercent, rep.IdleMeasuredSeconds, rep.IdleServeCPUPercent)},
		{Target: "unchanged reconcile no slower than notmuch new", Pass: rep.NotmuchSeconds > 0 && rep.ScheduledSeconds <= rep.NotmuchSeconds,
			Detail: fmt.Sprintf("scheduled run %.4f s (in-process check, no child), notmuch new %.3f s; the 'steward mail reconcile' child by itself %.3f s "+
				"(CPU %.3f s / notmuch %.3f s; start-up alone %.3f s, CPU %.3f s) %s", rep.ScheduledSeconds, rep.NotmuchSeconds, rep.ReconcileSeconds,
				rep.ReconcileCPUSeconds, rep.NotmuchCPUSeconds, rep.StartupSeconds, rep.StartupCPUSeconds, rep.NotmuchNote)},
		{Target: "watcher new-file-to-searchable p95 under 2 s", Pass: rep.WatchP95MS > 0 && rep.WatchP95MS < 2000,
			Detail: fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, max %.0f ms over %d messages", rep.WatchP50MS, rep.WatchP95MS, rep.WatchMaxMS, len(rep.WatchSamples))},
	}
	if err := writeJSONFile(*out, rep); err != nil {
		return err
	}
	for _, c := range rep.Checks {
		mark := "FAIL"
		if c.Pass {
			mark = "pass"
		}
		fmt.Fprintf(env.Stdout, "%s  %s: %s\n", mark, c.Target, c.Detail)
	}
	fmt.Fprintf(env.Stdout, "report written to %s\n", *out)
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

// benchIdleServe starts `steward serve` and measures the CPU of it and its
// connectors over the idle window, leaving out the seconds in which a job
// child ran. The serve child keeps running (for the watcher) until stop.
func benchIdleServe(ctx context.Context, self, home string, childEnv []string, window time.Duration, rep *schedulerBenchReport, logf func(string, ...any)) (stop func(), err error) {
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	cmd := exec.CommandContext(ctx, self, "serve")
	cmd.Env = append(childEnv, "HOST_PORT="+strconv.Itoa(ports[0]), "GATEWAY_PORT="+strconv.Itoa(ports[1]))
	logFile, err := os.Create(filepath.Join(home, "serve.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logFile.Close()
	}
	pid := cmd.Process.Pid
	schedLog := schedulerLogPath(home)
	logf("steward serve (pid %d) started; waiting for the start-up runs", pid)
	// The start-up runs of every job: wait until no job is running.
	deadline := time.Now().Add(30 * time.Minute)
	for {
		st, _ := scheduler.StatusFromLog(schedLog, scheduler.DefaultJobs())
		settled := st != nil && st.Started != nil
		for _, j := range st.Jobs {
			settled = settled && (j.State == scheduler.StateIdle || j.State == scheduler.StateUnavailable)
		}
		if settled {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, fmt.Errorf("the start-up job runs did not finish; see %s", schedLog)
		}
		time.Sleep(time.Second)
	}
	logf("idle window of %s", window)
	var total, measured, serveCPU, allCPU float64
	prevServe, prevAll := procCPU(pid, false), procCPU(pid, true)
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		t0 := time.Now()
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		s, a := procCPU(pid, false), procCPU(pid, true)
		dt := time.Since(t0).Seconds()
		total += dt
		if !jobRan(schedLog, t0, time.Now()) {
			measured += dt
			serveCPU += s - prevServe
			allCPU += a - prevAll
		}
		prevServe, prevAll = s, a
	}
	recs, _ := scheduler.ReadRecords(schedLog)
	winStart := end.Add(-window)
	for _, r := range recs {
		if r.Event == scheduler.EventStart && r.TS.After(winStart) {
			rep.JobRunsInWindow++
		}
	}
	if st, err := scheduler.StatusFromLog(schedLog, scheduler.DefaultJobs()); err == nil {
		rep.Jobs = st.Jobs
	}
	rep.IdleWindowSeconds, rep.IdleMeasuredSeconds = total, measured
	if measured > 0 {
		rep.IdleCPUPercent, rep.IdleServeCPUPercent = 100*allCPU/measured, 100*serveCPU/measured
	}
	logf("  %.3f %% of a core (serve alone %.3f %%) over %.0f s outside %d job runs", rep.IdleCPUPercent, rep.IdleServeCPUPercent, measured, rep.JobRunsInWindow)
	return stop, nil
}

// jobRan reports whether a job child ran at any time in [from, to].
func jobRan(logPath string, from, to time.Time) bool {
	recs, _ := scheduler.ReadRecords(logPath)
	running := map[string]time.Time{}
	for _, r := range recs {
		switch r.Event {
		case scheduler.EventStart:
			running[r.Job] = r.TS
		case scheduler.EventEnd:
			if s, ok := running[r.Job]; ok && !s.After(to) && !r.TS.Before(from) {
				return true
			}
			delete(running, r.Job)
		}
	}
	for _, s := range running {
		if !s.After(to) {
			return true
		}
	}
	return false
}

// procCPU returns the CPU seconds (user + system) of pid and, with
// descendants, of its connector processes (`… mcp NAME`), never counting
// job children (they are outside the measurement by definition).
func procCPU(pid int, descendants bool) float64 {
	total := procStatCPU(pid)
	if !descendants {
		return total
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if fields := procStat(p); len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(cmdline, []byte("\x00mcp\x00")) {
				total += procStatCPU(p)
			}
		}
	}
	return total
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, …), or nil.
func procStat(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

func procStatCPU(pid int) float64 {
	fields := procStat(pid)
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// benchWatcher drops messages one by one into the Maildir that the serve
// child watches and times each until search_mail finds it.
func benchWatcher(ctx context.Context, self, home, root string, n int, rep *schedulerBenchReport, logf func(string, ...any)) error {
	b := mcpbridge.New(mcpbridge.Options{Servers: []mcpbridge.ServerConfig{{Name: "mail", Command: self, Args: []string{"mcp", "mail"},
		Env: map[string]string{"STEWARD_HOME": home, "MAIL_EMBED_ENDPOINT": "off"}}}})
	b.Start(ctx)
	defer b.Close()
	if err := b.WaitStarted(ctx); err != nil {
		return err
	}
	tools := b.Tools()
	var search func(string) (string, error)
	for _, t := range tools {
		if t.Spec().Name == "mcp__mail__search_mail" {
			search = func(q string) (string, error) {
				res, err := t.Call(ctx, json.RawMessage(`{"query":"`+q+`"}`))
				return res.Content, err
			}
		}
	}
	if search == nil {
		return fmt.Errorf("the mail connector has no search_mail")
	}
	logf("watcher: %d messages", n)
	for i := range n {
		token := fmt.Sprintf("zqwatch%dx%d", time.Now().UnixNano()%1e9, i)
		msg := fmt.Sprintf("From: Bench <bench@example.com>\r\nTo: me@example.com\r\nSubject: Watch %s\r\nDate: %s\r\nMessage-ID: <%s@bench>\r\n\r\nBody %s.\r\n",
			token, time.Now().Format(time.RFC1123Z), token, token)
		name := fmt.Sprintf("%d.%s.bench", time.Now().UnixNano(), token)
		tmp := filepath.Join(root, "tmp", name)
		if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(tmp, []byte(msg), 0o600); err != nil {
			return err
		}
		start := time.Now()
		if err := os.Rename(tmp, filepath.Join(root, "new", name)); err != nil {
			return err
		}
		for {
			got, err := search(token)
			if err == nil && strings.Contains(got, token) {
				break
			}
			if time.Since(start) > time.Minute {
				return fmt.Errorf("message %d not searchable after a minute (last answer %q, %v)", i, tailText(got), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		rep.WatchSamples = append(rep.WatchSamples, float64(time.Since(start).Milliseconds()))
	}
	rep.WatchP50MS, rep.WatchP95MS = percentile(rep.WatchSamples, 0.5), percentile(rep.WatchSamples, 0.95)
	rep.WatchMaxMS = percentile(rep.WatchSamples, 1)
	logf("  p50 %.0f ms, p95 %.0f ms, max %.0f ms", rep.WatchP50MS, rep.WatchP95MS, rep.WatchMaxMS)
	return nil
}

// selfCPU is this process's CPU time (user + system) so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// processCPU is a finished child's user + system CPU time in seconds.
func processCPU(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}
