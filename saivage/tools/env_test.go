package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/tools"
)

// fakeRuntime is the Supervisor port for tool tests.
type fakeRuntime struct {
	mu        sync.Mutex
	status    string
	started   int
	intervene error
}

func (f *fakeRuntime) Status() tools.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return tools.Status{Status: f.status}
}
func (f *fakeRuntime) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started++
	f.status = "running"
	return nil
}
func (f *fakeRuntime) Pause(context.Context) error               { return nil }
func (f *fakeRuntime) Resume(context.Context) error              { return nil }
func (f *fakeRuntime) Stop(context.Context) error                { return nil }
func (f *fakeRuntime) InterventionAllowed() error                { return f.intervene }
func (f *fakeRuntime) Reconfigure(context.Context, string) error { return errors.New("not in tests") }

type fixture struct {
	t   *testing.T
	p   *project.Project
	env *tools.Env
	rt  *fakeRuntime
	mu  sync.Mutex
}

// newFixture initialises a project and binds tools for caller.
func newFixture(t *testing.T, caller tools.Caller) *fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := project.Init(context.Background(), project.InitOptions{Options: project.Options{Root: dir}, Objective: "Tools."})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, p: p, rt: &fakeRuntime{status: "stopped"}}
	f.env = &tools.Env{Root: dir, StateDir: filepath.Join(dir, ".saivage"), Cards: p.Cards, Workflows: p.Workflows, Config: p.Config,
		Processes: tools.NewProcesses(tools.ProcessesOptions{CaptureDir: filepath.Join(dir, ".saivage", "work", "processes"),
			Environ: func() []string { return append(os.Environ(), "OPENAI_API_KEY=sk-should-not-leak-0000000000") }}),
		RecordMu: &f.mu, Caller: caller, Runtime: f.rt, Redact: tools.NewRedactor([]string{"super-secret-value"})}
	t.Cleanup(func() { f.env.Processes.KillWhere(func(string) bool { return true }) })
	return f
}

func (f *fixture) path(rel string) string { return filepath.Join(f.env.Root, rel) }

func (f *fixture) writeFile(rel, content string) {
	f.t.Helper()
	p := f.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// call runs tool name with args and returns its result.
func (f *fixture) call(name string, args any) agent.ToolResult {
	f.t.Helper()
	bound, err := tools.Build([]string{name}, f.env)
	if err != nil {
		f.t.Fatal(err)
	}
	raw, _ := json.Marshal(args)
	res, err := bound[0].Call(context.Background(), raw)
	if err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	return res
}

func (f *fixture) ok(name string, args any) string {
	f.t.Helper()
	res := f.call(name, args)
	if res.IsError {
		f.t.Fatalf("%s(%v) failed: %s", name, args, res.Content)
	}
	return res.Content
}

func (f *fixture) fails(name string, args any, want string) {
	f.t.Helper()
	res := f.call(name, args)
	if !res.IsError || !strings.Contains(res.Content, want) {
		f.t.Fatalf("%s(%v) = %v %q, want an error mentioning %q", name, args, res.IsError, res.Content, want)
	}
}

func analyst() tools.Caller {
	return tools.Caller{Agent: "analyst", RecordWrites: func(string) bool { return true }, Tools: []string{"write", "edit", "read"}}
}
