package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
	"github.com/agentstack/agentstack/saivage/state"
)

// crashEnv names the helper's project directory; crashAt is the index of
// the durable Git step after which the helper SIGKILLs itself.
const (
	crashEnv   = "SAIVAGE_TEST_CRASH_DIR"
	crashAtEnv = "SAIVAGE_TEST_CRASH_AT"
)

// TestGitCrashHelper is the child process of TestGitSIGKILLAtEachDeliveryStep:
// it runs the project and kills itself right after its Nth Git step.
func TestGitCrashHelper(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	at, _ := strconv.Atoi(os.Getenv(crashAtEnv))
	ctx := context.Background()
	p, err := project.Open(ctx, project.Options{Root: dir, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	rt, err := runtime.New(runtime.Options{Project: p, Environ: os.Environ, GitQueryDeadline: 2 * time.Minute, Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
		GitAfterStep: func(s gitsource.Step) {
			mu.Lock()
			defer mu.Unlock()
			n++
			fmt.Fprintf(os.Stderr, "step %d %s\n", n, s)
			if n == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Startup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for rt.Status().LastRun == nil {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "run ended without a kill: %+v\n", rt.Status().LastRun)
	os.Exit(3)
}

// scriptCrashRun scripts a one-task run; done lists cards already done
// (their agents are not called again).
func scriptCrashRun(s *runtimetest.Script, done map[string]bool, note string) {
	var proj []llmtest.Reply
	if !done["project.a"] {
		proj = append(proj, call("activate_card", map[string]any{"card_id": "project.a"}))
	}
	s.Add("planner@project", append(proj,
		call("write", map[string]any{"path": "record:plan", "content": "One goal." + note}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met." + note}),
		emit("done", "met", map[string]any{"verdict": "complete"}))...)
	if done["project.a"] {
		return
	}
	var goal []llmtest.Reply
	if !done["project.a.a"] {
		goal = append(goal, call("activate_card", map[string]any{"card_id": "project.a.a"}))
	}
	s.Add("planner@project.a", append(goal, call("write", map[string]any{"path": "record:plan", "content": "1. hello" + note}), emit("done", "done", nil))...)
	s.Add("reviewer@project.a", emit("done", "met", map[string]any{"verdict": "approved"}))
	if !done["project.a.a"] {
		s.Add("executor@project.a.a",
			call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
			call("checkpoint_source", map[string]any{}),
			call("write", map[string]any{"path": "record:summary", "content": "Wrote hello.txt." + note}),
			emit("done", "wrote hello.txt", nil),
		)
		s.Add("reviewer@project.a.a",
			call("write", map[string]any{"path": "record:review", "content": "Approved." + note}),
			emit("done", "approved", map[string]any{"verdict": "approved"}),
		)
	}
}

// SIGKILL after each durable Git step from the Executor's checkpoint to the
// delivery branch, then restart and Run: the reviewed change is delivered
// exactly once, nothing unreviewed reaches the delivery branch, and the
// checkout ends clean.
func TestGitSIGKILLAtEachDeliveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns one process per step")
	}
	// A dry run in this process learns the step sequence.
	var steps []gitsource.Step
	var mu sync.Mutex
	probe := newGitEnvOpts(t, runtime.Options{GitAfterStep: func(s gitsource.Step) { mu.Lock(); steps = append(steps, s); mu.Unlock() }})
	probe.p.Cards.Create(context.Background(), cards.CreateInput{Parent: "project", Type: "goal", Title: "Files", Author: "test", Bootstrap: map[string]string{"brief": "b"}})
	probe.script.Add("planner@project.a", call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello"}}))
	scriptCrashRun(probe.script, nil, "")
	if err := probe.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum := probe.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("dry run = %+v", sum)
	}
	first := -1
	for i, s := range steps {
		if s == gitsource.StepCheckpointRef && first < 0 {
			first = i
		}
	}
	if first < 0 {
		t.Fatalf("no checkpoint step in %v", steps)
	}
	t.Logf("steps: %v", steps)
	branched := false
	for i := first; i < len(steps); i++ {
		branched = branched || steps[i] == gitsource.StepBranchRef
		t.Run(fmt.Sprintf("%d-%s", i+1, steps[i]), func(t *testing.T) {
			crashAt(t, i+1, steps[i], branched)
		})
	}
}

func newGitEnvOpts(t *testing.T, o runtime.Options) *env {
	return newEnv(t, envOptions{template: "classic-git", rtOpts: o, prepare: gitCheckout(t, map[string]string{"README.md": "# demo\n"})})
}

func crashAt(t *testing.T, at int, step gitsource.Step, branched bool) {
	e := newGitEnvOpts(t, runtime.Options{})
	initial := git(t, e.dir, "rev-parse", "main")
	if _, err := e.p.Cards.Create(context.Background(), cards.CreateInput{Parent: "project", Type: "goal", Title: "Files", Author: "test", Bootstrap: map[string]string{"brief": "b"}}); err != nil {
		t.Fatal(err)
	}
	e.script.Add("planner@project.a", call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello"}}))
	scriptCrashRun(e.script, nil, "")
	if err := e.rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGitCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+e.dir, crashAtEnv+"="+strconv.Itoa(at))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die by SIGKILL after step %d (%s): %v\n%s", at, step, err, out)
	}
	if !branched && git(t, e.dir, "rev-parse", "main") != initial {
		t.Fatalf("main moved before its delivery step")
	}
	// Restart: a fresh provider script for what is left.
	srv := llmtest.NewServer(t)
	e.script = runtimetest.NewScript(t, srv)
	cfgPath := filepath.Join(e.dir, ".saivage", "config.yaml")
	cfg, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(string(cfg), e.srv.URL, srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.open(runtime.Options{})
	done := map[string]bool{}
	for _, id := range []string{"project", "project.a", "project.a.a"} {
		done[id] = e.status(id) == "done"
	}
	if done["project"] {
		t.Fatalf("the root finished before its delivery")
	}
	scriptCrashRun(e.script, done, " (after a restart)")
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		var evs []string
		for _, typ := range []string{"correction", "node_blocked", "source_held", "source_delivered"} {
			for _, ev := range e.events(typ) {
				evs = append(evs, fmt.Sprint(typ, ev.Data))
			}
		}
		t.Fatalf("run after restart = %+v\nevents: %s\nhelper: %s", sum, strings.Join(evs, "\n"), out)
	}
	if n := git(t, e.dir, "rev-list", "--count", initial+"..main"); n != "1" {
		t.Fatalf("%s commits on main after the restart, want exactly the one reviewed change", n)
	}
	if msg := git(t, e.dir, "log", "-1", "--format=%B", "main"); !strings.Contains(msg, "project.a.a") {
		t.Errorf("main's commit = %q", msg)
	}
	if got := git(t, e.dir, "show", "main:hello.txt"); got != "hello" {
		t.Errorf("main:hello.txt = %q", got)
	}
	if st := git(t, e.dir, "status", "--porcelain"); st != "" {
		t.Errorf("uncommitted after recovery:\n%s", st)
	}
}
