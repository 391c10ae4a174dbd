// Package promotebench measures mail promotion (`steward bench promote`):
// a generated mirror of candidate threads is promoted against a scripted
// OpenAI-compatible model on loopback that answers after a fixed latency,
// once with one worker and once with several; the unchanged mirror is then
// promoted again; and the prefilter runs over the spec-scale synthetic
// archive to report the share of threads it rejects before any model cost.
package promotebench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/bench"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/promote"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/wiki"
)

// Options size the benchmark.
type Options struct {
	// Dir is the working folder (default a temporary one, removed unless Keep).
	Dir  string
	Keep bool
	// Threads is the number of candidate threads (default 1,000).
	Threads int
	// Workers are the worker counts compared (default 1 and 10).
	Workers []int
	// Latency is the scripted model's answer time (default 50 ms).
	Latency time.Duration
	// ArchiveMessages sizes the archive the prefilter share is measured on
	// (default 78,000, the reference scale; negative skips it).
	ArchiveMessages int
	Log             io.Writer
}

// RunResult is one timed promotion batch.
type RunResult struct {
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds is this process's CPU time during the run: on a loaded
	// machine it shows how much of the wall time was work.
	CPUSeconds float64 `json:"cpuSeconds"`
	ModelCalls int64   `json:"modelCalls"`
	promote.Counts
}

// PrefilterResult is the prefilter over the synthetic archive.
type PrefilterResult struct {
	Messages int            `json:"messages"`
	Threads  int            `json:"threads"`
	Rejected int            `json:"rejected"`
	Share    float64        `json:"share"`
	Reasons  map[string]int `json:"reasons"`
	Seconds  float64        `json:"seconds"`
}

// Check is one target with its verdict.
type Check struct {
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Report is the benchmark's result.
type Report struct {
	Command string `json:"command"`
	Date    string `json:"date"`
	Machine string `json:"machine"`
	// Load is /proc/loadavg at the start and the end.
	Load      []string         `json:"loadAverage,omitempty"`
	Threads   int              `json:"threads"`
	Messages  int              `json:"messages"`
	LatencyMS int64            `json:"modelLatencyMs"`
	Runs      []RunResult      `json:"runs"`
	Speedup   float64          `json:"speedup"`
	Rerun     RunResult        `json:"rerun"`
	Prefilter *PrefilterResult `json:"prefilter,omitempty"`
	Checks    []Check          `json:"checks"`
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Run runs the benchmark.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Threads <= 0 {
		o.Threads = 1000
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{1, 10}
	}
	if o.Latency <= 0 {
		o.Latency = 50 * time.Millisecond
	}
	if o.ArchiveMessages == 0 {
		o.ArchiveMessages = 78000
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "steward-promote-bench-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
		if !o.Keep {
			defer os.RemoveAll(d)
		}
	}
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Threads: o.Threads, Messages: o.Threads * 2, LatencyMS: o.Latency.Milliseconds()}
	rep.Load = append(rep.Load, loadAvg())
	defer func() { rep.Load = append(rep.Load, loadAvg()) }()
	model, err := startModel(o.Latency)
	if err != nil {
		return nil, err
	}
	defer model.close()

	o.logf("generating %d threads (%d messages) and backfilling the mirror", rep.Threads, rep.Messages)
	// No missing bodies: every thread is a candidate the model is asked about.
	dbPath, blobDir, err := buildMirror(ctx, filepath.Join(o.Dir, "candidates"), bench.GenOptions{Messages: rep.Messages, Threads: rep.Threads,
		PartialShare: 0.36, NoneShare: 0, AllMailShare: 0.01, Seed: 18})
	if err != nil {
		return nil, err
	}
	reader, err := threads.Open(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	blobs, err := mirror.NewBlobs(blobDir)
	if err != nil {
		return nil, err
	}
	var last *promote.Promoter
	for i, w := range o.Workers {
		dir := filepath.Join(o.Dir, fmt.Sprintf("run-%d", i))
		p, err := promoter(ctx, dir, reader, blobs, model, w)
		if err != nil {
			return nil, err
		}
		o.logf("promoting with %d worker(s) against a %s model", w, o.Latency)
		r, err := timed(ctx, p, model)
		if err != nil {
			return nil, err
		}
		r.Workers = w
		rep.Runs = append(rep.Runs, r)
		o.logf("  %.2f s, %d model calls (%d promoted, %d skipped, %d filtered, %d deferred)", r.Seconds, r.ModelCalls, r.Promoted, r.Skipped, r.Filtered, r.Deferred)
		last = p
	}
	first, final := rep.Runs[0], rep.Runs[len(rep.Runs)-1]
	rep.Speedup = first.Seconds / final.Seconds
	o.logf("rerun over the unchanged mirror with %d workers", final.Workers)
	if rep.Rerun, err = timed(ctx, last, model); err != nil {
		return nil, err
	}
	rep.Rerun.Workers = final.Workers
	o.logf("  %.3f s, %d model calls, %d unchanged", rep.Rerun.Seconds, rep.Rerun.ModelCalls, rep.Rerun.Unchanged)
	rep.Checks = append(rep.Checks,
		Check{Target: fmt.Sprintf("%d workers at least 8× faster than %d", final.Workers, first.Workers), Pass: rep.Speedup >= 8,
			Detail: fmt.Sprintf("%.2f s vs %.2f s (%.1f×)", final.Seconds, first.Seconds, rep.Speedup)},
		Check{Target: "rerun over the unchanged mirror under 1 s", Pass: rep.Rerun.Seconds < 1, Detail: fmt.Sprintf("%.3f s", rep.Rerun.Seconds)},
		Check{Target: "rerun makes zero model calls", Pass: rep.Rerun.ModelCalls == 0, Detail: fmt.Sprintf("%d calls", rep.Rerun.ModelCalls)})

	if o.ArchiveMessages > 0 {
		o.logf("prefilter over the synthetic archive (%d messages): generating and backfilling", o.ArchiveMessages)
		pf, err := prefilterShare(ctx, filepath.Join(o.Dir, "archive"), o.ArchiveMessages)
		if err != nil {
			return nil, err
		}
		rep.Prefilter = pf
		o.logf("  %d of %d threads rejected (%.1f%%) in %.1f s", pf.Rejected, pf.Threads, 100*pf.Share, pf.Seconds)
	}
	return rep, nil
}

// buildMirror generates a Maildir and backfills a mirror from it.
func buildMirror(ctx context.Context, dir string, g bench.GenOptions) (dbPath, blobDir string, err error) {
	g.Dir = dir
	man, err := bench.Generate(ctx, g)
	if err != nil {
		return "", "", err
	}
	dbPath, blobDir = mirror.Paths(filepath.Join(dir, "home"))
	acct := mail.Account{Name: "bench", Kind: mail.KindMaildir, Root: man.Root, Layout: mail.LayoutAuto, Addresses: []string{"me@example.com"}}
	s, err := mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobDir, Accounts: []mail.Account{acct}})
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	if _, err := s.Sync(ctx, mirror.SyncOptions{Mode: mirror.Backfill}); err != nil {
		return "", "", err
	}
	return dbPath, blobDir, nil
}

func promoter(ctx context.Context, dir string, reader *threads.Reader, blobs *mirror.Blobs, m *model, workers int) (*promote.Promoter, error) {
	vault := filepath.Join(dir, "wiki")
	if err := wiki.InitVault(vault); err != nil {
		return nil, err
	}
	state, err := promote.OpenStore(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		return nil, err
	}
	// The state stays open for the rerun; the process ends soon after.
	return promote.New(promote.Options{Threads: reader, State: state, VaultDir: vault, Blobs: blobs, Workers: workers,
		Model: llm.NewClient(llm.ClientOptions{BaseURL: m.url}), ModelName: "bench"})
}

func timed(ctx context.Context, p *promote.Promoter, m *model) (RunResult, error) {
	before, cpu := m.calls.Load(), cpuSeconds()
	start := time.Now()
	rep, err := p.Run(ctx, promote.RunOptions{})
	if err != nil {
		return RunResult{}, err
	}
	return RunResult{Seconds: time.Since(start).Seconds(), CPUSeconds: cpuSeconds() - cpu, ModelCalls: m.calls.Load() - before, Counts: rep.Counts}, nil
}

// cpuSeconds is the process's user and system time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// prefilterShare runs the prefilter over every thread of a generated
// archive at the given scale.
func prefilterShare(ctx context.Context, dir string, messages int) (*PrefilterResult, error) {
	dbPath, _, err := buildMirror(ctx, dir, bench.GenOptions{Messages: messages})
	if err != nil {
		return nil, err
	}
	r, err := threads.Open(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	start := time.Now()
	list, err := r.Recent(ctx, threads.ListOptions{})
	if err != nil {
		return nil, err
	}
	res := &PrefilterResult{Messages: messages, Threads: len(list), Reasons: map[string]int{}}
	for _, s := range list {
		t, err := r.Thread(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		if v := threads.Prefilter(t); v.Noise {
			res.Rejected++
			kind, _, _ := strings.Cut(v.Reason, ":")
			res.Reasons[kind]++
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Share = float64(res.Rejected) / float64(max(res.Threads, 1))
	return res, nil
}

// model is the scripted OpenAI-compatible model: it answers every chat
// completion after a fixed latency, durable for one thread in three.
type model struct {
	url   string
	srv   *http.Server
	calls atomic.Int64
}

func startModel(latency time.Duration) (*model, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &model{url: "http://" + ln.Addr().String() + "/v1"}
	m.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.calls.Add(1)
		var req llm.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		time.Sleep(latency)
		sum := sha256.Sum256([]byte(req.Messages[len(req.Messages)-1].Content))
		durable := sum[0]%3 == 0
		a := map[string]any{"durable": durable, "categories": []string{}, "summary": "", "facts": []string{}, "commitments": []any{},
			"people": []any{}, "organizations": []string{}, "review_by": "", "attachments": []any{}}
		if durable {
			a["categories"], a["summary"], a["facts"] = []string{"decision"}, "A decision recorded in this thread.", []string{"A fact."}
		}
		content, _ := json.Marshal(a)
		json.NewEncoder(w).Encode(llm.ChatResponse{Choices: []llm.Choice{{Message: llm.Message{Role: "assistant", Content: string(content)}, FinishReason: "stop"}}})
	})}
	go m.srv.Serve(ln)
	return m, nil
}

func (m *model) close() { m.srv.Close() }

// Summary is the human summary of a report.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mail promotion: %d candidate threads, scripted model answering in %d ms (load %s)\n", r.Threads, r.LatencyMS, strings.Join(r.Load, " → "))
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "  %2d worker(s): %.2f s (%.2f s CPU), %d model calls\n", run.Workers, run.Seconds, run.CPUSeconds, run.ModelCalls)
	}
	fmt.Fprintf(&b, "  speed-up %.1f×; rerun over the unchanged mirror %.3f s, %d model calls\n", r.Speedup, r.Rerun.Seconds, r.Rerun.ModelCalls)
	if p := r.Prefilter; p != nil {
		var reasons []string
		for k, v := range p.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, "  prefilter on the %d-message archive: %d of %d threads rejected (%.1f%%): %s\n",
			p.Messages, p.Rejected, p.Threads, 100*p.Share, strings.Join(reasons, ", "))
	}
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  [%s] %s: %s\n", mark, c.Target, c.Detail)
	}
	return b.String()
}
