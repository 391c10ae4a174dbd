package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

// waitRun polls until the runtime is stopped with a settled Run and
// returns that Run's outcome.
func (p *servedProject) waitRun(t *testing.T, runs int) string {
	t.Helper()
	var st struct {
		Status  string
		LastRun *struct{ RunID, Outcome string } `json:"last_run"`
	}
	var events struct{ Total int }
	poll(t, "the Run to end", func() bool {
		p.get("/api/events?type=run_ended", &events)
		p.get("/api/runtime/status", &st)
		return events.Total == runs && st.Status == "stopped" && st.LastRun != nil
	})
	return st.LastRun.Outcome
}

func (p *servedProject) rootStatus() string {
	var card struct{ Card struct{ Status string } }
	p.get("/api/cards/project", &card)
	return card.Card.Status
}

// TestOperatorCommandsRecoverDeadEnds: a project initialised without an
// objective blocks; saivage record write makes it runnable; a FAILED root
// is reopened with saivage card reopen and the next Run reaches DONE. Every
// step is an audited operator action through the live server.
func TestOperatorCommandsRecoverDeadEnds(t *testing.T) {
	p := startServed(t, "operator-token-123456", serveOptions{})
	vars := p.vars

	// Without a server nothing is edited offline: the CLI says so.
	objFile := filepath.Join(t.TempDir(), "objective.md")
	os.WriteFile(objFile, []byte("# Objective\n\nShip a greeting file.\n"), 0o644)

	if code, _, serr := runCLI(t, vars, "run"); code != 0 {
		t.Fatalf("run: %d %s", code, serr)
	}
	if out := p.waitRun(t, 1); out != "blocked" || p.rootStatus() != "blocked" {
		t.Fatalf("first run = %s, root %s; want the objective dead end", out, p.rootStatus())
	}

	code, sout, serr := runCLI(t, vars, "record", "write", "project", "objective", objFile)
	if code != 0 || !strings.Contains(sout, "accepted record:project/objective as version 1") {
		t.Fatalf("record write = %d %q %q", code, sout, serr)
	}
	if st := p.rootStatus(); st != "changed" {
		t.Fatalf("root after record write = %s, want changed", st)
	}
	if code, sout, _ := runCLI(t, vars, "record", "show", "project", "objective"); code != 0 || !strings.Contains(sout, "Ship a greeting file.") {
		t.Fatalf("record show = %d %q", code, sout)
	}

	// Operator notifications: queued for the root's Planner; urgent on a
	// stopped runtime only queues.
	if code, sout, serr := runCLI(t, vars, "notify", "project", "Keep it small."); code != 0 || sout != "queued for project\n" {
		t.Fatalf("notify = %d %q %q", code, sout, serr)
	}
	if code, sout, serr := runCLI(t, vars, "notify", "project", "Really small.", "--urgent"); code != 0 || !strings.Contains(sout, "no interruption: no live owner") {
		t.Fatalf("notify --urgent = %d %q %q", code, sout, serr)
	}

	// The Planner fails the root this time (after reading both messages).
	p.script.Add("planner@project", rtt.Emit("failed", "cannot decide", nil))
	runCLI(t, vars, "run")
	if out := p.waitRun(t, 2); out != "failed" || p.rootStatus() != "failed" {
		t.Fatalf("second run = %s, root %s", out, p.rootStatus())
	}
	if code, _, serr := runCLI(t, vars, "run"); code != 1 || !strings.Contains(serr, "reopen it") {
		t.Fatalf("run on a failed root = %d %q", code, serr)
	}
	code, sout, serr = runCLI(t, vars, "card", "reopen", "project")
	if code != 0 || !strings.Contains(sout, "reopened as changed: project") || p.rootStatus() != "changed" {
		t.Fatalf("card reopen = %d %q %q (root %s)", code, sout, serr, p.rootStatus())
	}

	p.script.Add("planner@project",
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "One greeting file."}),
		rtt.Emit("done", "planned", nil),
		rtt.Call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		rtt.Emit("done", "objective met", map[string]any{"verdict": "complete"}),
	)
	runCLI(t, vars, "run")
	if out := p.waitRun(t, 3); out != "done" || p.rootStatus() != "done" {
		t.Fatalf("third run = %s, root %s (unconsumed %v)", out, p.rootStatus(), p.script.Remaining())
	}

	// Cancel is refused for a done card, with the runtime's reason; the
	// refusal is audited too.
	code, _, serr = runCLI(t, vars, "card", "cancel", "project", "--json")
	if code != 1 || !strings.Contains(serr, "OperationRefused") {
		t.Fatalf("cancel a done root = %d %q", code, serr)
	}
	var acts struct {
		Actions []struct{ Data map[string]any }
	}
	p.get("/api/control-actions", &acts)
	var got []string
	for _, a := range acts.Actions {
		if a.Data["author"] != "operator" {
			continue
		}
		act, _ := a.Data["action"].(string)
		if ok, has := a.Data["ok"].(bool); has {
			act += map[bool]string{true: ":ok", false: ":refused"}[ok]
		}
		got = append(got, act)
	}
	// Newest first (runtime control through the REST routes is audited as
	// well; a refused run is not).
	if want := "cancel_card:refused run reopen_card:ok run urgent_notification:ok queue_notification:ok write:ok run"; strings.Join(got, " ") != want {
		b, _ := json.Marshal(acts)
		t.Errorf("operator actions = %q, want %q\n%s", strings.Join(got, " "), want, b)
	}
	// The record and reopen carry the operator as author.
	var ev struct {
		Events []struct{ Data map[string]any }
	}
	p.get("/api/events?type=record_edited", &ev)
	if len(ev.Events) != 1 || ev.Events[0].Data["author"] != "operator" {
		t.Errorf("record_edited = %+v", ev.Events)
	}
	// saivage chat asks the internal Analyst and prints its answer.
	p.script.Add("analyst", rtt.Text("The project is done."))
	if code, sout, serr := runCLI(t, vars, "chat", "How is it going?"); code != 0 || sout != "The project is done.\n" {
		t.Errorf("chat = %d %q %q", code, sout, serr)
	}

	// saivage gc previews, then deletes, through the live server.
	scratch := filepath.Join(p.dir, ".saivage", "work", "scratch", "old.out")
	os.MkdirAll(filepath.Dir(scratch), 0o755)
	os.WriteFile(scratch, []byte("0123456789"), 0o644)
	if code, sout, serr := runCLI(t, vars, "gc"); code != 0 || !strings.Contains(sout, "dry_run completed: would delete 1 files (10 bytes), deleted 0 files") {
		t.Errorf("gc = %d %q %q", code, sout, serr)
	}
	if _, err := os.Stat(scratch); err != nil {
		t.Fatal("the preview deleted the file")
	}
	code, sout, serr = runCLI(t, vars, "gc", "--delete", "--json")
	var gc struct {
		Disposition string
		Result      struct{ Deleted struct{ Files, Bytes int } }
	}
	if code != 0 || json.Unmarshal([]byte(sout), &gc) != nil || gc.Disposition != "completed" || gc.Result.Deleted.Files != 1 || gc.Result.Deleted.Bytes != 10 {
		t.Errorf("gc --delete = %d %q %q", code, sout, serr)
	}
	if _, err := os.Stat(scratch); err == nil {
		t.Error("gc --delete kept the file")
	}
	if p.stop() != 0 {
		t.Fatal(p.errb.String())
	}
	// With the server gone, operator actions refuse rather than edit offline.
	if code, _, serr := runCLI(t, vars, "card", "reopen", "project"); code != 1 || !strings.Contains(serr, "no Saivage server is running") {
		t.Errorf("reopen without a server = %d %q", code, serr)
	}
}
