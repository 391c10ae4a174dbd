package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/gateway"
)

func init() {
	registerBench(&benchmark{
		Name:    "gateway",
		Summary: "gateway overhead against a direct call and a minimal reverse proxy",
		Run:     runGatewayBench,
	})
}

// gatewayBenchReport is the JSON report of `steward bench gateway`.
type gatewayBenchReport struct {
	Date      time.Time            `json:"date"`
	Machine   string               `json:"machine"`
	Command   string               `json:"command"`
	Scenarios []gatewayBenchResult `json:"scenarios"`
	// RSS peaks (VmHWM) of the two proxy processes, MiB.
	GatewayPeakRSSMiB float64 `json:"gatewayPeakRssMiB"`
	ProxyPeakRSSMiB   float64 `json:"proxyPeakRssMiB"`
	// Checks are the targets evaluated on this run.
	Checks []benchCheck `json:"checks"`
}

type gatewayBenchResult struct {
	Concurrency int                         `json:"concurrency"`
	Requests    int                         `json:"requestsPerTarget"`
	Targets     map[string]benchTargetStats `json:"targets"` // direct, proxy, gateway
	// AddedP50Ratio is (gateway p50 − direct p50) / (proxy p50 − direct p50);
	// absent when the proxy's p50 is not above direct's, where it means nothing.
	AddedP50Ratio *float64 `json:"addedP50Ratio,omitempty"`
	// ThroughputRatio is gateway throughput / proxy throughput.
	ThroughputRatio float64 `json:"throughputRatio"`
}

// benchTargetStats are one path's figures; latency and throughput count
// only the requests that succeeded.
type benchTargetStats struct {
	P50MS      float64 `json:"p50Ms"`
	P99MS      float64 `json:"p99Ms"`
	Throughput float64 `json:"requestsPerSecond"`
	Errors     int     `json:"errors"`
}

func runGatewayBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench gateway", "[--smoke] [--json] [--out FILE]", `
Measures, in one run and interleaved, the same chat-completion requests sent (a) straight to a local
fake upstream, (b) through a minimal httputil.ReverseProxy in its own process — the floor cost of one
extra HTTP hop — and (c) through the gateway in its own process (routing, parsing, usage recorded
in a real SQLite ledger), at concurrency 1 and 64. Reports p50/p99 latency, throughput, and the
peak RSS of both proxy processes. The load generator, upstream and proxies share this machine's
cores: compare the ratios, not the absolute figures.`)
	smoke := fs.Bool("smoke", false, "tiny run for CI: checks the harness, measures nothing meaningful")
	asJSON := fs.Bool("json", false, "print the JSON report on stdout")
	out := fs.String("out", "", "also write the JSON report to FILE")
	role := fs.String("role", "", "internal: run as the proxy or gateway child")
	upstream := fs.String("upstream", "", "internal: upstream base URL for a child")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *role {
	case "proxy":
		return serveBenchProxy(ctx, env, *upstream)
	case "gateway":
		return serveBenchGateway(ctx, env, *upstream)
	case "":
	default:
		return fmt.Errorf("unknown role %q", *role)
	}

	rounds, perRound := 10, map[int]int{1: 200, 64: 2000}
	if *smoke {
		rounds, perRound = 2, map[int]int{1: 10, 64: 128}
	}
	upSrv, upURL, err := startFakeUpstream()
	if err != nil {
		return err
	}
	defer upSrv.Close()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	proxy, err := startBenchChild(ctx, self, "proxy", upURL)
	if err != nil {
		return err
	}
	defer proxy.stop()
	gw, err := startBenchChild(ctx, self, "gateway", upURL)
	if err != nil {
		return err
	}
	defer gw.stop()

	targets := []struct{ name, url string }{
		{"direct", upURL + "/chat/completions"},
		{"proxy", proxy.base + "/chat/completions"},
		{"gateway", gw.base + "/chat/completions"},
	}
	client := &http.Client{Transport: gateway.NewTransport()}
	rep := gatewayBenchReport{Date: time.Now().UTC(), Machine: machineDescription(),
		Command: "steward bench gateway" + map[bool]string{true: " --smoke", false: ""}[*smoke]}
	for _, conc := range []int{1, 64} {
		lat := map[string][]time.Duration{}
		busy := map[string]time.Duration{}
		errs := map[string]int{}
		// Warm up every path (connections, caches) before measuring.
		for _, t := range targets {
			runBatch(ctx, client, t.url, conc, conc*4)
		}
		for r := range rounds {
			fmt.Fprintf(env.Stderr, "\rconcurrency %d: round %d/%d", conc, r+1, rounds)
			for _, t := range targets { // interleaved: each round visits every target
				l, wall, e := runBatch(ctx, client, t.url, conc, perRound[conc])
				lat[t.name] = append(lat[t.name], l...)
				busy[t.name] += wall
				errs[t.name] += e
			}
		}
		fmt.Fprintln(env.Stderr)
		res := gatewayBenchResult{Concurrency: conc, Requests: rounds * perRound[conc], Targets: map[string]benchTargetStats{}}
		for _, t := range targets {
			res.Targets[t.name] = benchTargetStats{
				P50MS: pct(lat[t.name], 50), P99MS: pct(lat[t.name], 99),
				Throughput: float64(len(lat[t.name])) / busy[t.name].Seconds(), Errors: errs[t.name],
			}
		}
		d, p, g := res.Targets["direct"], res.Targets["proxy"], res.Targets["gateway"]
		res.AddedP50Ratio = addedP50Ratio(d.P50MS, p.P50MS, g.P50MS)
		if p.Throughput > 0 {
			res.ThroughputRatio = g.Throughput / p.Throughput
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	rep.GatewayPeakRSSMiB = peakRSS(gw.cmd.Process.Pid)
	rep.ProxyPeakRSSMiB = peakRSS(proxy.cmd.Process.Pid)
	rep.Checks = gatewayChecks(&rep)

	b, _ := json.MarshalIndent(rep, "", "  ")
	if *out != "" {
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if *asJSON {
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	for _, s := range rep.Scenarios {
		fmt.Fprintf(env.Stdout, "concurrency %d (%d requests per target)\n", s.Concurrency, s.Requests)
		for _, n := range []string{"direct", "proxy", "gateway"} {
			st := s.Targets[n]
			fmt.Fprintf(env.Stdout, "  %-8s p50 %7.3f ms  p99 %7.3f ms  %8.0f req/s  errors %d\n", n, st.P50MS, st.P99MS, st.Throughput, st.Errors)
		}
		added := "undefined (the proxy's p50 is not above direct's)"
		if s.AddedP50Ratio != nil {
			added = fmt.Sprintf("%.2f × the proxy's", *s.AddedP50Ratio)
		}
		fmt.Fprintf(env.Stdout, "  gateway added p50 = %s; throughput = %.0f%% of the proxy's\n", added, 100*s.ThroughputRatio)
	}
	fmt.Fprintf(env.Stdout, "peak RSS: gateway %.1f MiB, proxy %.1f MiB\n", rep.GatewayPeakRSSMiB, rep.ProxyPeakRSSMiB)
	printChecks(env.Stdout, rep.Checks)
	return nil
}

// addedP50Ratio is what the gateway adds to the direct p50 over what the
// minimal proxy adds; nil when the proxy adds nothing measurable, where a
// ratio would read 0 (or explode) and mean nothing.
func addedP50Ratio(direct, proxy, gw float64) *float64 {
	if proxy <= direct {
		return nil
	}
	r := (gw - direct) / (proxy - direct)
	return &r
}

// gatewayChecks evaluates the gateway's targets: at concurrency 1 its added
// p50 at most 1.5 × the minimal proxy's, at concurrency 64 at least 70 % of
// the proxy's throughput, a peak RSS under 50 MiB, and no failed request.
func gatewayChecks(rep *gatewayBenchReport) []benchCheck {
	var out []benchCheck
	for _, s := range rep.Scenarios {
		switch s.Concurrency {
		case 1:
			c := benchCheck{Target: "concurrency 1: gateway's added p50 ≤ 1.5 × the proxy's"}
			d, p, g := s.Targets["direct"], s.Targets["proxy"], s.Targets["gateway"]
			if s.AddedP50Ratio == nil {
				c.Measured = fmt.Sprintf("not measurable: proxy p50 %.3f ms is not above direct's %.3f ms", p.P50MS, d.P50MS)
			} else {
				c.Met = *s.AddedP50Ratio <= 1.5
				c.Measured = fmt.Sprintf("(%.3f − %.3f) / (%.3f − %.3f) = %.2f ×", g.P50MS, d.P50MS, p.P50MS, d.P50MS, *s.AddedP50Ratio)
			}
			out = append(out, c)
		case 64:
			out = append(out, benchCheck{Target: "concurrency 64: throughput ≥ 70 % of the proxy's", Met: s.ThroughputRatio >= 0.7,
				Measured: fmt.Sprintf("%.1f %%", 100*s.ThroughputRatio)})
		}
	}
	out = append(out, benchCheck{Target: "gateway RSS under 50 MiB", Met: rep.GatewayPeakRSSMiB > 0 && rep.GatewayPeakRSSMiB < 50,
		Measured: fmt.Sprintf("peak (VmHWM) %.1f MiB; proxy %.1f MiB", rep.GatewayPeakRSSMiB, rep.ProxyPeakRSSMiB)})
	failed := 0
	for _, s := range rep.Scenarios {
		for _, t := range s.Targets {
			failed += t.Errors
		}
	}
	out = append(out, benchCheck{Target: "every request succeeded", Met: failed == 0, Measured: fmt.Sprintf("%d failed", failed)})
	return out
}

// benchRequest is a typical small agent request.
var benchRequest = []byte(`{"model":"tier-5","messages":[{"role":"system","content":"You are Steward, a local-first assistant."},{"role":"user","content":"When is my next train to Torino?"}],"temperature":0.2}`)

// runBatch sends n requests from conc workers and returns the latencies of
// those that succeeded, the wall time and how many failed.
func runBatch(ctx context.Context, client *http.Client, url string, conc, n int) ([]time.Duration, time.Duration, int) {
	lat := make([]time.Duration, n)
	succeeded := make([]bool, n) // false also for requests never sent (ctx done)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(benchRequest))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Usage-Service", "bench")
				req.Header.Set("X-Usage-Action", "gateway")
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					succeeded[k] = resp.StatusCode == 200
				}
				lat[k] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	ok := lat[:0]
	for k, good := range succeeded {
		if good {
			ok = append(ok, lat[k])
		}
	}
	return ok, wall, n - len(ok)
}

func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	idx := int(float64(len(s)-1) * p / 100)
	return float64(s[idx]) / float64(time.Millisecond)
}

// startFakeUpstream serves a fixed chat completion as fast as possible.
func startFakeUpstream() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"The next direct train to Torino leaves at 17:05 from platform 12."},"finish_reason":"stop"}],"usage":{"prompt_tokens":42,"completion_tokens":17,"total_tokens":59}}`)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/v1", nil
}

type benchChild struct {
	cmd  *exec.Cmd
	base string
	home string
}

func (c *benchChild) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	c.cmd.Wait()
	if c.home != "" {
		os.RemoveAll(c.home)
	}
}

// startBenchChild runs this binary as a proxy or gateway child and waits for
// the base URL it prints.
func startBenchChild(ctx context.Context, self, role, upstream string) (*benchChild, error) {
	home, err := os.MkdirTemp("", "steward-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "bench", "gateway", "--role", role, "--upstream", upstream)
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+home, "STEWARD_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s child: %w", role, err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s child did not report its address: %w", role, err)
	}
	return &benchChild{cmd: cmd, base: strings.TrimSpace(line), home: home}, nil
}

func serveBenchProxy(ctx context.Context, env *cliEnv, upstream string) error {
	target, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = gateway.NewTransport() // the same pool as the gateway: compare the hop, not the pool
	// The client's /v1 prefix is already in target.Path: strip it from the request.
	director := rp.Director
	rp.Director = func(r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1")
		director(r)
	}
	return serveChild(ctx, env, rp)
}

func serveBenchGateway(ctx context.Context, env *cliEnv, upstream string) error {
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	yaml := fmt.Sprintf("providers:\n  up: { base_url: %s }\nmodels:\n  tier-5: [ { provider: up, model: bench-model } ]\nrates:\n  up/bench-model: { input: 0.27, output: 1.10 }\n", upstream)
	path := filepath.Join(cfg.Home, "gateway.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return err
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		return err
	}
	sc.gatewayConfig = path
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "http://%s/v1\n", ln.Addr())
	return serve(ctx, env, sc, nil, ln)
}

func serveChild(ctx context.Context, env *cliEnv, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(env.Stdout, "http://%s/v1\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// peakRSS reads a process's peak resident set (VmHWM) in MiB; 0 where /proc is absent.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func machineDescription() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d cores, %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
}
