package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/connectors/trains"
	"github.com/agentstack/agentstack/steward/usage"
	"github.com/agentstack/agentstack/steward/watch"
)

func init() {
	registerMCP("trains", func(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
		svc, err := newTrainService(env)
		if err != nil {
			return nil, err
		}
		return trains.NewServer(svc, version), nil
	})
	registerBench(&benchmark{
		Name:    "watch",
		Summary: "CPU share and memory of one engine polling 1,000 watches (fake adapter) every 45 s",
		Run:     runWatchBench,
	})
}

// newTrainService is the ViaggiaTreno service configured by
// VIAGGIATRENO_BASE_URL: steward mcp trains builds one, and steward serve
// one for both its trains connector and its train watch adapter.
func newTrainService(env *cliEnv) (*trains.Service, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	base := cfg.URL("VIAGGIATRENO_BASE_URL", trains.DefaultBaseURL)
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	return trains.NewService(trains.Options{Client: trains.NewClient(trains.ClientOptions{BaseURL: base})}), nil
}

// inProcess replaces the child process of Steward's trains connector by
// the host's own server (over the host's one trains service).
func inProcess(servers []mcpbridge.ServerConfig, trainsServer *mcp.Server) []mcpbridge.ServerConfig {
	for i, s := range servers {
		if s.Name == "trains" {
			servers[i] = mcpbridge.ServerConfig{Name: s.Name, Server: trainsServer}
		}
	}
	return servers
}

// benchAdapter is a fake source: each resource changes once every
// changeEvery of its own reads (staggered by id), so about one poll in
// changeEvery produces an event and a delivery.
type benchAdapter struct {
	changeEvery int64
	reads       atomic.Int64
	perRef      sync.Map // ref → *atomic.Int64
}

func (a *benchAdapter) Source() string { return "bench" }

func (a *benchAdapter) Snapshot(_ context.Context, ref string) (json.RawMessage, error) {
	a.reads.Add(1)
	c, _ := a.perRef.LoadOrStore(ref, new(atomic.Int64))
	n := c.(*atomic.Int64).Add(1)
	id, _ := strconv.Atoi(strings.TrimPrefix(ref, "r"))
	step := (n + int64(id)) / a.changeEvery
	return json.RawMessage(fmt.Sprintf(`{"ref":%q,"platform":"%d","delayMinutes":%d,"etaMs":%d}`, ref, step%20, step%7, 1_900_000_000_000+step*60_000)), nil
}

func (a *benchAdapter) Events(prev, cur json.RawMessage) ([]watch.Event, error) {
	var p, c struct {
		Platform string `json:"platform"`
	}
	json.Unmarshal(prev, &p)
	if err := json.Unmarshal(cur, &c); err != nil {
		return nil, err
	}
	if p.Platform == c.Platform {
		return nil, nil
	}
	return []watch.Event{{Key: "platform:" + c.Platform, Type: "bench.platform_changed",
		Data: map[string]any{"platform": c.Platform}, FallbackText: "platform " + c.Platform}}, nil
}

func (a *benchAdapter) DefaultExpiry(_ json.RawMessage, created time.Time) time.Time {
	return created.Add(6 * 24 * time.Hour)
}

func (a *benchAdapter) IsTerminal(json.RawMessage) bool { return false }

type benchDeliverer struct{ turns atomic.Int64 }

func (d *benchDeliverer) DeliverWatchTurn(_ context.Context, t watch.Turn) (watch.Delivered, error) {
	d.turns.Add(1)
	return watch.Delivered{ChatID: t.ChatID, MessageID: "asst_bench", Text: "Platform changed."}, nil
}

type benchUsage struct {
	mu     sync.Mutex
	passes []time.Duration
}

func (u *benchUsage) RecordTool(_ context.Context, c usage.ToolCall) {
	if c.Tool == "watch.poll" {
		u.mu.Lock()
		u.passes = append(u.passes, c.Duration)
		u.mu.Unlock()
	}
}

type watchBenchReport struct {
	Date            time.Time `json:"date"`
	Machine         string    `json:"machine"`
	Command         string    `json:"command"`
	Watches         int       `json:"watches"`
	IntervalSeconds float64   `json:"intervalSeconds"`
	DurationSeconds float64   `json:"durationSeconds"`
	Passes          int       `json:"passes"`
	Polls           int64     `json:"polls"`
	Deliveries      int64     `json:"deliveries"`
	PassP50MS       float64   `json:"passP50Ms"`
	PassMaxMS       float64   `json:"passMaxMs"`
	CPUSeconds      float64   `json:"cpuSeconds"`
	CPUPercent      float64   `json:"cpuPercentOfOneCore"`
	RSSMiB          float64   `json:"rssMiB"`
	PeakRSSMiB      float64   `json:"peakRssMiB"`
	HeapMiB         float64   `json:"heapMiB"`
	DBMiB           float64   `json:"watchesDbMiB"`
	SetupSeconds    float64   `json:"setupSeconds"`
	// Checks are the targets evaluated on this run (the issue sets
	// them for 1,000 watches at 45 s).
	Checks []benchCheck `json:"checks"`
}

func runWatchBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench watch", "[--watches N] [--interval D] [--duration D] [--smoke] [--json] [--out FILE]", `
Creates N watches on a fake adapter in a temporary watches.db and runs the real engine loop (poll,
match, enqueue, deliver to a fake chat) for the given duration at the given interval, then reports
the process's CPU time as a share of one core over that wall time, its resident memory and the
duration of each poll pass. About one poll in ten changes a resource, producing an event and a
delivery. Setup (creating the watches) is excluded from the CPU figure.`)
	n := fs.Int("watches", 1000, "active watches")
	interval := fs.Duration("interval", watch.DefaultPollInterval, "poll interval (WATCH_POLL_MS; at least 15s)")
	duration := fs.Duration("duration", 3*time.Minute, "measured wall time")
	smoke := fs.Bool("smoke", false, "tiny run for CI (20 watches, 2 s)")
	asJSON := fs.Bool("json", false, "print the JSON report")
	out := fs.String("out", "", "also write the JSON report to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *smoke {
		*n, *duration = 20, 2*time.Second
	}
	dir, err := os.MkdirTemp("", "steward-bench-watch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	adapter := &benchAdapter{changeEvery: 10}
	deliver := &benchDeliverer{}
	use := &benchUsage{}
	opts := watch.Options{Path: filepath.Join(dir, "watches.db"), Adapters: []watch.Adapter{adapter},
		Deliverer: deliver, PollInterval: *interval, Usage: use}
	e, err := watch.Open(ctx, opts)
	if err != nil {
		return err
	}
	setup := time.Now()
	fmt.Fprintf(env.Stderr, "creating %d watches…\n", *n)
	for i := range *n {
		if _, err := e.Create(ctx, watch.CreateRequest{Source: "bench", ResourceRef: fmt.Sprintf("r%d", i), ChatID: fmt.Sprintf("chat_%d", i%50),
			Instruction: "tell me when the platform changes", Rules: []watch.Rule{{ID: "platform", Event: "bench.platform_changed"}}}); err != nil {
			return err
		}
	}
	setupTime := time.Since(setup)
	// Measure a process that starts with N active watches: its start-up
	// pass polls them all at once, then every interval.
	e.Close()
	if e, err = watch.Open(ctx, opts); err != nil {
		return err
	}
	defer e.Close()
	runtime.GC()
	reads0 := adapter.reads.Load()
	cpu0 := cpuTime()
	start := time.Now()
	fmt.Fprintf(env.Stderr, "running the engine loop for %s at a %s interval…\n", *duration, *interval)
	runCtx, cancel := context.WithTimeout(ctx, *duration)
	done := make(chan struct{})
	go func() { e.Run(runCtx); close(done) }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			fmt.Fprintf(env.Stderr, "  %s: %d polls, %d deliveries\n", time.Since(start).Round(time.Second), adapter.reads.Load()-reads0, deliver.turns.Load())
		}
	}
	cancel()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, peak := procMemory()
	use.mu.Lock()
	passes := append([]time.Duration(nil), use.passes...)
	use.mu.Unlock()
	sort.Slice(passes, func(i, j int) bool { return passes[i] < passes[j] })
	rep := watchBenchReport{
		Date: time.Now().UTC(), Machine: machineDescription(), Command: "steward bench watch " + strings.Join(args, " "),
		Watches: *n, IntervalSeconds: interval.Seconds(), DurationSeconds: wall.Seconds(), Passes: len(passes),
		Polls: adapter.reads.Load() - reads0, Deliveries: deliver.turns.Load(),
		CPUSeconds: cpu.Seconds(), CPUPercent: 100 * cpu.Seconds() / wall.Seconds(),
		RSSMiB: rss, PeakRSSMiB: peak, HeapMiB: float64(ms.HeapInuse) / (1 << 20), SetupSeconds: setupTime.Seconds(),
	}
	if len(passes) > 0 {
		rep.PassP50MS = float64(passes[len(passes)/2]) / float64(time.Millisecond)
		rep.PassMaxMS = float64(passes[len(passes)-1]) / float64(time.Millisecond)
	}
	if st, err := os.Stat(filepath.Join(dir, "watches.db")); err == nil {
		rep.DBMiB = float64(st.Size()) / (1 << 20)
	}
	rep.Checks = watchChecks(&rep)
	b, _ := json.MarshalIndent(rep, "", "  ")
	if *out != "" {
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	fmt.Fprintf(env.Stdout, "%d watches, %s interval, %.0f s measured: %d passes, %d polls, %d deliveries\n",
		rep.Watches, *interval, rep.DurationSeconds, rep.Passes, rep.Polls, rep.Deliveries)
	fmt.Fprintf(env.Stdout, "CPU %.2f s = %.3f %% of one core; RSS %.1f MiB (peak %.1f MiB, heap %.1f MiB); pass p50 %.1f ms, max %.1f ms\n",
		rep.CPUSeconds, rep.CPUPercent, rep.RSSMiB, rep.PeakRSSMiB, rep.HeapMiB, rep.PassP50MS, rep.PassMaxMS)
	printChecks(env.Stdout, rep.Checks)
	return nil
}

// watchChecks evaluates the watch engine's targets: under 2 % of one core
// and under 50 MiB resident (peak), with every watch polled at least once.
func watchChecks(rep *watchBenchReport) []benchCheck {
	scale := fmt.Sprintf("%d watches at %g s", rep.Watches, rep.IntervalSeconds)
	return []benchCheck{
		{Target: scale + ": under 2 % of one core", Met: rep.CPUPercent < 2 && rep.DurationSeconds > 0,
			Measured: fmt.Sprintf("%.3f %% (%.2f s CPU over %.0f s)", rep.CPUPercent, rep.CPUSeconds, rep.DurationSeconds)},
		{Target: scale + ": under 50 MiB resident", Met: rep.PeakRSSMiB > 0 && rep.PeakRSSMiB < 50,
			Measured: fmt.Sprintf("peak %.1f MiB (now %.1f MiB)", rep.PeakRSSMiB, rep.RSSMiB)},
		{Target: "every watch polled", Met: rep.Polls >= int64(rep.Watches),
			Measured: fmt.Sprintf("%d polls of %d watches in %d passes", rep.Polls, rep.Watches, rep.Passes)},
	}
}

// cpuTime is this process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procMemory reads the resident and peak resident set from /proc (Linux);
// elsewhere it reports the peak from getrusage only.
func procMemory() (rss, peak float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return 0, float64(ru.Maxrss) / (1 << 20) // bytes on macOS
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return rss, peak
}
