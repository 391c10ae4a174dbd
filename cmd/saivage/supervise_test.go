package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/lock"
)

// TestRestartUnderSupervisor: saivage restart makes the live server exit
// 75; saivage start --supervise starts it again with the same project
// (a new process holds the lock and serves the same cards); SIGTERM ends
// both with status 0 and releases the lock.
func TestRestartUnderSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the saivage binary")
	}
	bin := buildSaivage(t)
	dir := t.TempDir()
	port := freePort(t)
	vars := map[string]string{"SAIVAGE_ROOT": dir, "SAIVAGE_AUTH_TOKEN": "restart-token-123456", "SAIVAGE_PORT": port}
	if code, _, errs := runCLI(t, vars, "init", "--objective", "Survive a restart."); code != 0 {
		t.Fatal(errs)
	}
	cmd := exec.Command(bin, "start", "--supervise")
	cmd.Env = append(os.Environ(), "SAIVAGE_ROOT="+dir, "SAIVAGE_AUTH_TOKEN=restart-token-123456", "SAIVAGE_PORT="+port)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	a := api{t: t, url: "http://127.0.0.1:" + port, token: "restart-token-123456"}
	stateDir := filepath.Join(dir, ".saivage")
	livePID := func() int {
		obs := lock.Inspect(stateDir)
		if obs.Status != lock.Live || obs.Endpoint == "" || obs.Owner == nil {
			return 0
		}
		var st struct{ Status string }
		if a.tryGet("/api/runtime/status", &st) != 200 || st.Status != "stopped" {
			return 0
		}
		return obs.Owner.PID
	}
	var first int
	poll(t, "the first server", func() bool { first = livePID(); return first != 0 })
	if first == cmd.Process.Pid {
		t.Fatal("the supervisor itself holds the lock; the server should be its child")
	}

	code, sout, serr := runCLI(t, vars, "restart")
	if code != 0 || !strings.Contains(sout, "restart scheduled") {
		t.Fatalf("restart = %d %q %q", code, sout, serr)
	}
	var second int
	poll(t, "the restarted server", func() bool { second = livePID(); return second != 0 && second != first })
	if !strings.Contains(out.String(), "exited 75 (confirmed restart); starting it again") {
		t.Errorf("supervisor output lacks the restart:\n%s", out.String())
	}
	var card struct{ Card struct{ ID, Status string } }
	if a.get("/api/cards/project", &card); card.Card.ID != "project" || card.Card.Status != "backlog" {
		t.Errorf("project after restart = %+v", card)
	}
	var acts struct {
		Actions []struct{ Data map[string]any }
	}
	a.get("/api/control-actions", &acts)
	if len(acts.Actions) != 1 || acts.Actions[0].Data["action"] != "restart_server" {
		t.Errorf("control actions = %+v", acts.Actions)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("supervisor exit = %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the supervisor did not stop")
	}
	if obs := lock.Inspect(stateDir); obs.Status != lock.Missing {
		t.Errorf("lock after stop = %+v", obs)
	}
}

// TestRestartWithoutSupervisor: the in-process saivage start exits 75
// after a confirmed restart.
func TestRestartWithoutSupervisor(t *testing.T) {
	p := startServedProject(t, "restart-token-abcdef")
	if code := p.do("POST", "/api/runtime/restart-server", `{"confirm":"restart"}`, nil); code != 400 {
		t.Errorf("inexact confirmation = %d", code)
	}
	if code, sout, serr := runCLI(t, p.vars, "restart", "--json"); code != 0 || !strings.Contains(sout, `"exit_code": 75`) {
		t.Fatalf("restart = %d %q %q", code, sout, serr)
	}
	select {
	case code := <-p.done:
		c := code
		p.code = &c
		if code != 75 || !strings.Contains(p.out.String(), "confirmed restart") {
			t.Errorf("start exit = %d\n%s", code, p.out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("saivage start did not exit after the restart")
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildSaivage builds the saivage binary once per test binary (a -count=N
// run reuses it; TestMain removes it): the build is most of the supervisor
// test's time on a loaded machine, and the binary does not change between
// runs.
func buildSaivage(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "saivage-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "saivage")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

func (a api) tryGet(path string, out any) int {
	req, _ := http.NewRequest("GET", a.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(out) != nil {
		return 0
	}
	return resp.StatusCode
}

// TestSystemdUnit: the printed unit serves this project and restarts on 75.
func TestSystemdUnit(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, map[string]string{"SAIVAGE_ROOT": dir}, "start", "--systemd-unit")
	exe, _ := os.Executable()
	if code != 0 || !strings.Contains(out, "ExecStart="+exe+" start --root "+dir+" --config "+filepath.Join(dir, ".saivage", "config.yaml")) ||
		!strings.Contains(out, "RestartForceExitStatus=75") {
		t.Fatalf("unit = %d %q %q", code, out, errs)
	}
	// systemd itself reads it without complaint (unknown keys and bad values
	// are reported on its output).
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	file := filepath.Join(t.TempDir(), "saivage-test.service")
	os.WriteFile(file, []byte(out), 0o644)
	if b, err := exec.Command(analyze, "verify", file).CombinedOutput(); err != nil || len(b) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, b)
	}
}

// TestOversightOwnerFailureExitsOne: an Oversight check whose own session
// cannot be read is an unexpected owner failure, so saivage start closes
// the server (the lock is released) and exits 1, naming the cause.
func TestOversightOwnerFailureExitsOne(t *testing.T) {
	p := startServed(t, "oversight-token-abcdef", serveOptions{objective: "Greeting files.", configEdit: func(s string) string {
		return strings.Replace(s, "  enabled: false\n  interval_seconds: 1800", "  enabled: true\n  interval_seconds: 1", 1)
	}})
	p.script.Add("planner@project", llmtest.Reply{Content: "…", Delay: time.Hour})
	// The Oversight session is established lazily; make it unreadable.
	ov := filepath.Join(p.dir, ".saivage", "agents", "oversight")
	if err := os.MkdirAll(ov, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ov, "index.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.do("POST", "/api/runtime/run", "", nil); code != 200 && code != 202 {
		t.Fatalf("run = %d", code)
	}
	select {
	case code := <-p.done:
		c := code
		p.code = &c
		if code != 1 || !strings.Contains(p.errb.String(), "oversight check 1 failed unexpectedly") {
			t.Errorf("start exit = %d\nstdout: %s\nstderr: %s", code, p.out.String(), p.errb.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatal("saivage start did not exit after the owner failure")
	}
	if obs := lock.Inspect(filepath.Join(p.dir, ".saivage")); obs.Status != lock.Missing {
		t.Errorf("lock after exit: %+v", obs)
	}
}
