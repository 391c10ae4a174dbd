package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/usage"
)

func init() {
	registerBench(&benchmark{Name: "backup", Summary: "steward backup of a mail mirror beside sqlite3 .backup, and chat turns during a backup", Run: backupBench})
}

type backupBenchReport struct {
	Command   string  `json:"command"`
	Load      string  `json:"load"`
	DBBytes   int64   `json:"dbBytes"`
	Runs      int     `json:"runs"`
	StewardS  float64 `json:"stewardMedianSeconds"`
	SQLite3S  float64 `json:"sqlite3MedianSeconds"`
	StewardMB float64 `json:"stewardMiBPerSecond"`
	SQLite3MB float64 `json:"sqlite3MiBPerSecond"`
	// Ratio is steward's throughput over sqlite3's (the target is ≥ 0.5).
	Ratio       float64 `json:"throughputRatio"`
	Turns       int     `json:"turnsPerPhase"`
	TurnQuietMS float64 `json:"turnMedianQuietMs"`
	TurnBusyMS  float64 `json:"turnMedianDuringBackupMs"`
	// TurnRatio is the median turn during backups over the median without
	// (the target is ≤ 1.10).
	TurnRatio float64      `json:"turnRatio"`
	Checks    []benchCheck `json:"checks"`
}

func backupBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench backup", "--db MIRROR [--runs N] [--turns N] [--json]", `
Backs up a mail mirror (for the spec-scale one: steward bench mail --keep --dir D, then --db
D/home/mail/mail.db) N times with 'steward backup operational' in a child process (the online
backup API, journal switch, SHA-256 and fsync of the copy, manifest) and N times with Debian's
'sqlite3 MIRROR ".backup COPY"', alternating, and reports the median throughputs. Then it runs chat
turns through a real host (streaming upstream, chats.db, audit) with no backup running, and again
while backups of the mirror run back to back in child processes, and reports the median turn
times. The machine's load average is recorded: the machine is shared.`)
	db := fs.String("db", "", "the SQLite database to back up (required)")
	runs := fs.Int("runs", 3, "backups per tool")
	turns := fs.Int("turns", 40, "chat turns per phase")
	asJSON := fs.Bool("json", false, "print the JSON report")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" || *runs < 1 || *turns < 1 {
		return errUsage
	}
	sqlite3, err := exec.LookPath("sqlite3")
	if err != nil {
		return errors.New("sqlite3 is not installed (apt-get install -y sqlite3)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	info, err := os.Stat(*db)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(*db), ".steward-bench-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A home whose mail mirror is the database (a hard link: same file,
	// no copy).
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "mail"), 0o700); err != nil {
		return err
	}
	if err := os.Link(*db, filepath.Join(home, "mail", "mail.db")); err != nil {
		return fmt.Errorf("hard-link the database into a bench home (it must be on the same file system as its folder): %w", err)
	}
	n := 0
	stewardBackup := func() (time.Duration, error) {
		n++
		cmd := exec.CommandContext(ctx, self, "backup", "operational", "--json", "--output", filepath.Join(dir, fmt.Sprintf("steward-%d", n)))
		cmd.Env = append(os.Environ(), "STEWARD_HOME="+home)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		os.RemoveAll(filepath.Join(dir, fmt.Sprintf("steward-%d", n)))
		if err != nil {
			return 0, fmt.Errorf("steward backup: %v\n%s", err, out)
		}
		return d, nil
	}
	sqliteBackup := func() (time.Duration, error) {
		n++
		dst := filepath.Join(dir, fmt.Sprintf("sqlite3-%d.db", n))
		start := time.Now()
		out, err := exec.CommandContext(ctx, sqlite3, *db, ".backup '"+dst+"'").CombinedOutput()
		d := time.Since(start)
		os.Remove(dst)
		if err != nil {
			return 0, fmt.Errorf("sqlite3 .backup: %v\n%s", err, out)
		}
		return d, nil
	}
	load, _ := os.ReadFile("/proc/loadavg")
	rep := backupBenchReport{Command: "steward bench backup " + strings.Join(args, " "), Load: strings.TrimSpace(string(load)), DBBytes: info.Size(), Runs: *runs, Turns: *turns}
	var ours, theirs []time.Duration
	for i := range *runs {
		fmt.Fprintf(env.Stderr, "backup run %d/%d\n", i+1, *runs)
		d, err := stewardBackup()
		if err != nil {
			return err
		}
		ours = append(ours, d)
		if d, err = sqliteBackup(); err != nil {
			return err
		}
		theirs = append(theirs, d)
	}
	mib := float64(info.Size()) / (1 << 20)
	rep.StewardS, rep.SQLite3S = medianDur(ours).Seconds(), medianDur(theirs).Seconds()
	rep.StewardMB, rep.SQLite3MB = mib/rep.StewardS, mib/rep.SQLite3S
	rep.Ratio = rep.StewardMB / rep.SQLite3MB

	// Chat turns, quiet and during back-to-back backups.
	turn, stop, err := benchTurns(ctx, dir)
	if err != nil {
		return err
	}
	defer stop()
	measure := func() ([]time.Duration, error) {
		var out []time.Duration
		for range *turns {
			d, err := turn()
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}
	if _, err := turn(); err != nil { // warm-up
		return err
	}
	fmt.Fprintln(env.Stderr, "chat turns without a backup")
	quiet, err := measure()
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stderr, "chat turns during backups")
	bctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var backupErr error
	wg.Go(func() {
		for bctx.Err() == nil {
			if _, err := stewardBackup(); err != nil && bctx.Err() == nil {
				backupErr = err
				return
			}
		}
	})
	time.Sleep(500 * time.Millisecond) // the first backup is copying
	busy, err := measure()
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	if backupErr != nil {
		return backupErr
	}
	rep.TurnQuietMS = float64(medianDur(quiet).Microseconds()) / 1000
	rep.TurnBusyMS = float64(medianDur(busy).Microseconds()) / 1000
	rep.TurnRatio = rep.TurnBusyMS / rep.TurnQuietMS
	rep.Checks = []benchCheck{
		{Target: "steward backup throughput ≥ 0.5 × sqlite3 .backup", Measured: fmt.Sprintf("%.2f ×", rep.Ratio), Met: rep.Ratio >= 0.5},
		{Target: "chat turn during a backup ≤ 1.10 × without", Measured: fmt.Sprintf("%.2f ×", rep.TurnRatio), Met: rep.TurnRatio <= 1.10},
	}
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	fmt.Fprintf(env.Stdout, "database %s (%.0f MiB), load %s\n", *db, mib, rep.Load)
	fmt.Fprintf(env.Stdout, "steward backup operational  median %.2f s  %.0f MiB/s\n", rep.StewardS, rep.StewardMB)
	fmt.Fprintf(env.Stdout, "sqlite3 .backup              median %.2f s  %.0f MiB/s\n", rep.SQLite3S, rep.SQLite3MB)
	fmt.Fprintf(env.Stdout, "chat turn median %.1f ms quiet, %.1f ms during backups\n", rep.TurnQuietMS, rep.TurnBusyMS)
	printChecks(env.Stdout, rep.Checks)
	return nil
}

func medianDur(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// benchTurns starts a host as bench host does (a streaming upstream behind
// the in-process gateway, chats.db and audit.db in dir) and returns a
// function that runs one chat turn and times it to turn.done.
func benchTurns(ctx context.Context, dir string) (func() (time.Duration, error), func(), error) {
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (func() (time.Duration, error), func(), error) { stop(); return nil, nil, err }
	up, upURL, _, err := startStreamingUpstream(40, 2*time.Millisecond)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { up.Close() })
	gcfg, err := gateway.ParseConfig([]byte(fmt.Sprintf("providers:\n  up: { base_url: %s }\nmodels:\n  tier-5: [ { provider: up, model: m } ]\n", upURL)))
	if err != nil {
		return fail(err)
	}
	ledger, err := usage.Open(ctx, filepath.Join(dir, "usage.db"), usage.Options{})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { ledger.Close() })
	gw, err := gateway.New(gateway.Options{Config: gcfg, Ledger: ledger})
	if err != nil {
		return fail(err)
	}
	store, err := chats.Open(ctx, filepath.Join(dir, "chats.db"))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { store.Close() })
	auditLedger, err := audit.Open(ctx, filepath.Join(dir, "audit.db"), audit.Options{})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { auditLedger.Close() })
	pol, _ := policy.New(policy.Options{})
	const token = "bench-token-0123456789abcdef"
	h := host.New(host.Options{Token: token, Home: dir, Usage: ledger, Chats: host.ManagerOptions{
		Audit: host.LedgerAuditor(auditLedger), Store: store, ModelName: "tier-5", Policy: pol,
		Model: llm.NewClient(llm.ClientOptions{BaseURL: "http://gateway.invalid/v1", HTTPClient: &http.Client{Transport: gateway.InProcess(gw.Handler())}}),
	}})
	closers = append(closers, h.Close)
	hostURL, stopHost, err := serveOnLoopback(h.Handler())
	if err != nil {
		return fail(err)
	}
	closers = append(closers, stopHost)
	// Each turn opens a new chat, so no turn carries a longer history than
	// another.
	var buf bytes.Buffer
	n := 0
	return func() (time.Duration, error) {
		n++
		ws, chatID, err := openBenchChat(ctx, hostURL, token, fmt.Sprintf("backup-bench-%d", n))
		if err != nil {
			return 0, err
		}
		defer ws.CloseNow()
		start := time.Now()
		if _, _, err := hostTurn(ctx, ws, chatID, &buf, "stream please", nil); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}, stop, nil
}
