package project_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

func initProject(t *testing.T) project.Options {
	t.Helper()
	opts := project.Options{Root: t.TempDir(), LookupEnv: func(string) (string, bool) { return "", false },
		Publisher: state.New(state.Options{Fatal: func(err error) { t.Fatalf("fatal: %v", err) }})}
	_, res, err := project.Init(context.Background(), project.InitOptions{Options: opts, Objective: "x"})
	if err != nil || !res.WroteConfig || !res.Bootstrapped {
		t.Fatalf("init: %+v %v", res, err)
	}
	if lock.Inspect(filepath.Join(opts.Root, ".saivage")).Status != lock.Missing {
		t.Fatal("init left its lock")
	}
	return opts
}

func TestAppLogTailAdmission(t *testing.T) {
	opts := initProject(t)
	log := filepath.Join(opts.Root, ".saivage", "logs", "app.jsonl")
	good, _ := os.ReadFile(log)
	tests := []struct {
		name     string
		content  string
		readOnly bool
		wantErr  string
		after    string
	}{
		{"torn tail truncated by the owner", string(good) + `{"v":2,"rows":[{"id`, false, "", string(good)},
		{"torn tail skipped by a read-only observer", string(good) + `{"v":2`, true, "", string(good) + `{"v":2`},
		{"complete malformed line fails unchanged", string(good) + "oops\n", false, "line 2: malformed", string(good) + "oops\n"},
		{"duplicate event id", string(good) + string(good), false, "duplicate event id", string(good) + string(good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(log, []byte(tt.content), 0o644)
			o := opts
			o.ReadOnly = tt.readOnly
			_, err := project.Open(context.Background(), o)
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), log)) {
				t.Fatalf("err = %v", err)
			}
			if got, _ := os.ReadFile(log); string(got) != tt.after {
				t.Fatalf("log after = %q", got)
			}
		})
	}
}

func TestPartialGeneratedStateFails(t *testing.T) {
	opts := initProject(t)
	if err := os.RemoveAll(filepath.Join(opts.Root, ".saivage", "work")); err != nil {
		t.Fatal(err)
	}
	_, err := project.Open(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "partial generated state") || !strings.Contains(err.Error(), "work missing") {
		t.Fatalf("open: %v", err)
	}
	_, _, err = project.Init(context.Background(), project.InitOptions{Options: opts})
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("init over partial state: %v", err)
	}
	if _, err := os.Stat(filepath.Join(opts.Root, ".saivage", "work")); !os.IsNotExist(err) {
		t.Fatal("init repaired partial state")
	}
}

func TestInitRefusesHeldLock(t *testing.T) {
	opts := initProject(t)
	stateDir := filepath.Join(opts.Root, ".saivage")
	l, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	_, _, err = project.Init(context.Background(), project.InitOptions{Options: opts})
	if err == nil || !strings.Contains(err.Error(), "project lock is live") {
		t.Fatalf("init with a live lock: %v", err)
	}
}

func TestOmittedCardTypesCompileToClassic(t *testing.T) {
	opts := initProject(t)
	cfgPath := filepath.Join(opts.Root, ".saivage", "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	s := string(b)
	os.WriteFile(cfgPath, []byte(s[:strings.Index(s, "\ncard_types:")+1]), 0o644)
	p, err := project.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Workflows.CardTypes(), ","); got != "goal,project,task" {
		t.Fatalf("card types = %s", got)
	}
}
