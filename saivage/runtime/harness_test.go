package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/templates"
)

// env is a test project with a scripted provider and a started runtime.
type env struct {
	t      *testing.T
	dir    string
	srv    *llmtest.Server
	script *runtimetest.Script
	p      *project.Project
	rt     *runtime.Runtime
	obs    chan runtime.Observation
	fatal  chan error
}

type envOptions struct {
	objective string
	// template is the init template ("" for classic).
	template string
	// configEdit rewrites config.yaml before the project is opened.
	configEdit func(string) string
	// initEdit rewrites the template's config.yaml before init, so the
	// generated state follows it (new records, for example).
	initEdit func(string) string
	// prepare runs on the empty project directory before init (a Git
	// checkout for classic-git, for example).
	prepare func(dir string)
	rtOpts  runtime.Options
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	srv := llmtest.NewServer(t)
	e := &env{t: t, dir: dir, srv: srv, script: runtimetest.NewScript(t, srv), obs: make(chan runtime.Observation, 4096), fatal: make(chan error, 1)}
	ctx := context.Background()
	if o.objective == "" {
		o.objective = "Build a hello tool."
	}
	if o.prepare != nil {
		o.prepare(dir)
	}
	if o.initEdit != nil {
		name := o.template
		if name == "" {
			name = templates.Default
		}
		tpl, err := templates.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		err = tpl.Materialize(func(rel string, data []byte) error {
			if rel == templates.ConfigFile {
				data = []byte(o.initEdit(string(data)))
			}
			dst := filepath.Join(dir, ".saivage", filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := project.Init(ctx, project.InitOptions{Options: project.Options{Root: dir}, Objective: o.objective, Template: o.template}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(data), "http://127.0.0.1:4000/v1", srv.URL)
	if o.configEdit != nil {
		cfg = o.configEdit(cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.open(o.rtOpts)
	return e
}

// open admits the project and starts a fresh runtime over it (a restart).
func (e *env) open(opts runtime.Options) {
	e.t.Helper()
	ctx := context.Background()
	pub := state.New(state.Options{Fatal: func(err error) {
		select {
		case e.fatal <- err:
		default:
		}
	}})
	p, err := project.Open(ctx, project.Options{Root: e.dir, Publisher: pub})
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
	opts.Project = p
	if opts.Sleep == nil {
		opts.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	}
	opts.Observe = func(o runtime.Observation) {
		select {
		case e.obs <- o:
		default:
		}
	}
	opts.Environ = func() []string { return os.Environ() }
	if opts.GitQueryDeadline == 0 {
		opts.GitQueryDeadline = 2 * time.Minute // a loaded test machine, not the product's 5 s
	}
	rt, err := runtime.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.rt = rt
	if err := rt.Startup(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = rt.Close(context.Background()) })
}

// waitFor waits until cond holds, re-checking at each observation; the
// deadline only guards against hangs.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.After(60 * time.Second)
	for !cond() {
		select {
		case <-e.obs:
		case err := <-e.fatal:
			e.t.Fatalf("fatal publication error while waiting for %s: %v", what, err)
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s (status %+v, unconsumed script %v)", what, e.rt.Status(), e.script.Remaining())
		case <-time.After(200 * time.Millisecond):
			// conditions on files are re-checked periodically too
		}
	}
}

func (e *env) waitStatus(want runtime.Status) {
	e.t.Helper()
	e.waitFor("status "+string(want), func() bool { return e.rt.Status().Status == want })
}

// waitRunEnded waits for the current Run to settle.
func (e *env) waitRunEnded() *runtime.RunSummary {
	e.t.Helper()
	e.waitFor("the Run to end", func() bool {
		st := e.rt.Status()
		return st.Status != runtime.StatusRunning && st.Status != runtime.StatusPausing && st.Status != runtime.StatusPaused && st.LastRun != nil
	})
	return e.rt.Status().LastRun
}

// events returns the app log events of a type.
func (e *env) events(typ string) []project.Event {
	e.t.Helper()
	return runtime.AppLogEvents(e.t, e.p, typ)
}

func (e *env) status(id string) string {
	e.t.Helper()
	c, err := e.p.Cards.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(c.Status)
}

func (e *env) record(card, name string) (string, int) {
	e.t.Helper()
	ref, err := e.p.Cards.RecordRef(context.Background(), card, name)
	if err != nil {
		e.t.Fatal(err)
	}
	cur, err := e.p.Cards.Records().Current(ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return cur.Content, cur.Version
}

var (
	call = runtimetest.Call
	text = runtimetest.Text
	emit = runtimetest.Emit
)

func cardsInput(parent, title string) cards.CreateInput {
	return cards.CreateInput{Parent: parent, Type: "goal", Title: title, Author: "test", Bootstrap: map[string]string{"brief": "b"}}
}

var runtimeKey = runtimetest.CallerKey
