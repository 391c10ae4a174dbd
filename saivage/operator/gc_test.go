package operator_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

type gcAnswer struct {
	Mode, Disposition, Reason, Restoration string
	Result                                 *struct {
		Would   struct{ Files int } `json:"would_delete"`
		Deleted struct {
			Files int
			Bytes int64
		} `json:"deleted"`
		Retained []struct{ Path, Reason string }
	}
}

func (s *server) gc(body string) (int, gcAnswer) {
	s.t.Helper()
	code, _, raw := s.raw("POST", "/api/runtime/gc-work", token, body)
	var a gcAnswer
	if code == 200 {
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			s.t.Fatal(err)
		}
	} else {
		a.Reason = raw
	}
	return code, a
}

// TestWorkGCHoldsARunningRun: a collection during a Run pauses it (the
// in-flight model call finishes, the next one parks), deletes what is
// eligible while captures of managed processes stay, refuses a second
// request with 409 WorkGcBusy and Analyst ingress meanwhile, then resumes
// the same Run, which finishes.
func TestWorkGCHoldsARunningRun(t *testing.T) {
	s := start(t, nil)
	ctx := t.Context()
	work := filepath.Join(s.dir, ".saivage", "work")
	// A finished command's capture is protected; scratch files are not.
	if res, err := s.app.Runtime.Operate(ctx, runtime.PrincipalOperator, "run_command", json.RawMessage(`{"command":"echo captured"}`)); err != nil || res.IsError {
		t.Fatalf("run_command = %+v %v", res, err)
	}
	// The Analyst's command: its capture is named by execution evidence.
	s.script.Add("analyst", runtimetest.Call("run_command", map[string]any{"command": "echo evidence"}), runtimetest.Text("ran"))
	if code, m := s.do("POST", "/api/chat", token, `{"message":"run it","wait":true}`); code != 200 {
		t.Fatalf("chat = %d %v", code, m)
	}
	old := time.Now().Add(-48 * time.Hour)
	for _, name := range []string{"stash/a.html", "scratch/b.out"} {
		p := filepath.Join(work, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte("x"), 1000), 0o644)
		os.Chtimes(p, old, old)
	}

	// The Planner's first call is slow; the second is parked by the hold.
	s.script.Add("planner@project",
		llmtest.Reply{Delay: 2 * time.Second, ToolCalls: runtimetest.Call("get_tree", map[string]any{}).ToolCalls},
		runtimetest.Emit("failed", "stopping here", nil))
	if err := s.app.Runtime.Run(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Planner's call", func() bool { return s.app.Runtime.Status().ModelCallsInFlight == 1 })
	type answer struct {
		code int
		a    gcAnswer
	}
	first := make(chan answer, 1)
	go func() {
		code, a := s.gc(`{"mode":"delete"}`)
		first <- answer{code, a}
	}()
	poll(t, "the hold to pause the Run", func() bool { return s.app.Runtime.Status().Status == runtime.StatusPausing })
	if code, a := s.gc(`{"mode":"dry_run"}`); code != 409 || !strings.Contains(a.Reason, `"WorkGcBusy"`) || !strings.Contains(a.Reason, "Work garbage collection is busy.") {
		t.Errorf("second collection = %d %s", code, a.Reason)
	}
	if code, m := s.do("POST", "/api/chat", token, `{"message":"hello"}`); code != 409 || m["error"] != "MaintenanceHold" {
		t.Errorf("chat during the hold = %d %v", code, m)
	}
	if code, m := s.do("POST", "/api/runtime/resume", token, ""); code != 409 {
		t.Errorf("resume during the hold = %d %v", code, m)
	}
	got := <-first
	if got.code != 200 || got.a.Disposition != "completed" || got.a.Restoration != "resumed" || got.a.Result.Deleted.Files != 2 || got.a.Result.Deleted.Bytes != 2000 {
		t.Fatalf("collection = %d %+v", got.code, got.a)
	}
	reasons := map[string]int{}
	for _, r := range got.a.Result.Retained {
		if strings.HasPrefix(r.Path, ".saivage/work/processes/") {
			reasons[r.Reason]++
		}
	}
	if reasons["named by execution evidence"] != 1 || reasons["capture of a managed process"] != 1 {
		t.Errorf("captures were not retained: %+v", got.a.Result.Retained)
	}
	// The same Run resumed and finished.
	poll(t, "the resumed Run to end", func() bool {
		st := s.app.Runtime.Status()
		return st.Status == runtime.StatusStopped && st.LastRun != nil
	})
	if lr := s.app.Runtime.Status().LastRun; lr.Outcome != "failed" {
		t.Errorf("run = %+v", lr)
	}
}

// TestWorkGCRefusals: an uncontained process group and a card running on
// disk without a Run refuse collection before any file is touched; an
// ordinary Pause during a hold withdraws the restoration.
func TestWorkGCRefusals(t *testing.T) {
	s := start(t, nil)
	ctx := t.Context()
	scratch := filepath.Join(s.dir, ".saivage", "work", "scratch", "x.out")
	os.MkdirAll(filepath.Dir(scratch), 0o755)
	os.WriteFile(scratch, []byte("x"), 0o644)

	res, err := s.app.Runtime.Operate(ctx, runtime.PrincipalOperator, "run_command", json.RawMessage(`{"command":"sleep 60","timeout_ms":10}`))
	if err != nil || !strings.Contains(res.Content, "still running") {
		t.Fatalf("run_command = %+v %v", res, err)
	}
	if code, a := s.gc(`{"mode":"delete"}`); code != 200 || a.Disposition != "refused" || !strings.Contains(a.Reason, "uncontained") || a.Result != nil {
		t.Fatalf("with a running process = %d %+v", code, a)
	}
	for _, p := range s.app.Runtime.Processes().List() {
		_ = s.app.Runtime.Processes().Kill(p.ID)
	}
	poll(t, "the process to end", func() bool {
		for _, p := range s.app.Runtime.Processes().List() {
			if p.State == "running" {
				return false
			}
		}
		return true
	})

	// A stopped Run leaves the root running on disk: ownership unresolved.
	s.script.Add("planner@project", llmtest.Reply{Delay: time.Hour, Content: "…"})
	if err := s.app.Runtime.Run(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Planner's call", func() bool { return s.app.Runtime.Status().ModelCallsInFlight == 1 })
	if err := s.app.Runtime.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if code, a := s.gc(`{"mode":"delete"}`); code != 200 || a.Disposition != "refused" || !strings.Contains(a.Reason, "card project is running on disk") {
		t.Fatalf("with a running card = %d %+v", code, a)
	}
	if _, err := os.Stat(scratch); err != nil {
		t.Fatal("a refused collection deleted a file")
	}

	// An ordinary Pause during the hold takes the pause over.
	s.script.Add("planner@project", llmtest.Reply{Delay: time.Hour, Content: "…"})
	if err := s.app.Runtime.Run(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Planner's call", func() bool { return s.app.Runtime.Status().ModelCallsInFlight == 1 })
	hold := make(chan *runtime.MaintenanceHold, 1)
	go func() {
		h, err := s.app.Runtime.Hold(ctx)
		if err != nil {
			t.Error(err)
		}
		hold <- h
	}()
	poll(t, "the hold", func() bool { return s.app.Runtime.Status().Status == runtime.StatusPausing })
	if err := s.app.Runtime.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	s.app.Runtime.Stop(ctx) // ends the hanging call; the hold settles on stopped
	h := <-hold
	if h == nil {
		t.Fatal("no hold")
	}
	if r := h.Release(); r != runtime.RestorationNotResumed {
		t.Errorf("restoration = %s", r)
	}
}
