package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/lock"
	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

// syncBuffer is a goroutine-safe output buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

type api struct {
	t          *testing.T
	url, token string
}

func (a api) get(path string, out any) int {
	a.t.Helper()
	return a.do("GET", path, "", out)
}

func (a api) do(method, path, body string, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// poll re-checks cond until it holds; the deadline only guards hangs.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scriptE2E scripts the Done-when flow: the Analyst creates a goal and
// starts the Run; the goal's Planner creates two tasks with a dependency;
// Executors write files and run shell commands; the second task goes
// through one rework before the Reviewer accepts.
func scriptE2E(s *rtt.Script) {
	s.Add("analyst",
		rtt.Call("create_card", map[string]any{"parent_id": "project", "type": "goal", "title": "Greeting files",
			"records": map[string]string{"brief": "Create hello.txt and world.txt in the repository."}}),
		rtt.Call("start_project", map[string]any{}),
		rtt.Text("Created goal project.a and started the Run."),
	)
	s.Add("planner@project",
		rtt.Call("activate_card", map[string]any{"card_id": "project.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "project.a: greeting files (done)."}),
		rtt.Emit("done", "all goals done", nil),
		rtt.Call("write", map[string]any{"path": "record:assessment", "content": "Both files exist; the objective is met."}),
		rtt.Emit("done", "objective met", map[string]any{"verdict": "complete"}),
	)
	s.Add("planner@project.a",
		rtt.Call("create_card", map[string]any{"title": "hello.txt", "records": map[string]string{"brief": "Write hello.txt with 'hello'."}}),
		rtt.Call("create_card", map[string]any{"title": "world.txt", "dependencies": []string{"project.a.a"}, "records": map[string]string{"brief": "Write world.txt with 'world'."}}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a.a"}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a.b"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "1. hello.txt 2. world.txt (after 1)."}),
		rtt.Emit("done", "both tasks done", nil),
	)
	s.Add("reviewer@project.a", rtt.Emit("done", "goal accepted", map[string]any{"verdict": "approved"}))
	s.Add("executor@project.a.a",
		rtt.Call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
		rtt.Call("run_command", map[string]any{"command": "grep -q hello hello.txt && git status --porcelain hello.txt"}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "hello.txt written; grep confirms it."}),
		rtt.Emit("done", "hello.txt done", nil),
	)
	s.Add("reviewer@project.a.a",
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Approved."}),
		rtt.Emit("done", "approved", map[string]any{"verdict": "approved"}),
	)
	s.Add("executor@project.a.b",
		rtt.Call("write", map[string]any{"path": "world.txt", "content": "wrld\n"}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "world.txt written."}),
		rtt.Emit("done", "world.txt done", nil),
		// rework after review
		rtt.Call("edit", map[string]any{"path": "world.txt", "old_string": "wrld", "new_string": "world"}),
		rtt.Call("run_command", map[string]any{"command": "test \"$(cat world.txt)\" = world && echo verified"}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "world.txt fixed and verified."}),
		rtt.Emit("done", "world.txt fixed", nil),
	)
	s.Add("reviewer@project.a.b",
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Typo: wrld."}),
		rtt.Emit("done", "typo", map[string]any{"verdict": "changes_requested"}),
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Approved after the fix."}),
		rtt.Emit("done", "approved", map[string]any{"verdict": "approved"}),
	)
}

func TestEndToEnd(t *testing.T) {
	p := startServedProject(t, "e2e-token-abcdef")
	script, dir, vars, a := p.script, p.dir, p.vars, p.api
	scriptE2E(script)

	// The Analyst creates a goal and starts the Run.
	var chat struct {
		Result struct{ Text, Error string }
	}
	if code := a.do("POST", "/api/chat", `{"message":"Create a goal for the greeting files and start.","wait":true}`, &chat); code != 200 || chat.Result.Error != "" ||
		!strings.Contains(chat.Result.Text, "started the Run") {
		t.Fatalf("chat = %d %+v", code, chat)
	}
	var st struct {
		Status  string
		LastRun *struct{ Outcome, Reason string } `json:"last_run"`
	}
	poll(t, "the Run to end", func() bool {
		a.get("/api/runtime/status", &st)
		return st.Status == "stopped" && st.LastRun != nil
	})
	if st.LastRun.Outcome != "done" {
		t.Fatalf("run = %+v (unconsumed %v)", st.LastRun, script.Remaining())
	}

	// The tree is done; the second task depends on the first.
	var card struct{ Card struct{ Status string } }
	a.get("/api/cards/project", &card)
	if card.Card.Status != "done" {
		t.Errorf("root = %s", card.Card.Status)
	}
	var kids struct {
		Children []struct {
			ID, Status   string
			Dependencies []string
		}
	}
	a.get("/api/cards/project.a/children", &kids)
	if len(kids.Children) != 2 || kids.Children[0].Status != "done" || kids.Children[1].Status != "done" ||
		fmt.Sprint(kids.Children[1].Dependencies) != "[project.a.a]" {
		t.Errorf("children = %+v", kids)
	}
	// Files are in the repository.
	for f, want := range map[string]string{"hello.txt": "hello\n", "world.txt": "world\n"} {
		if got, _ := os.ReadFile(filepath.Join(dir, f)); string(got) != want {
			t.Errorf("%s = %q", f, got)
		}
	}
	// Records show consecutive versions.
	var hist struct{ Versions []struct{ Version int } }
	a.get("/api/cards/project.a.b/records/summary/history", &hist)
	if len(hist.Versions) != 2 || hist.Versions[0].Version != 1 || hist.Versions[1].Version != 2 {
		t.Errorf("summary history = %+v", hist)
	}
	var diff struct{ Diff string }
	a.get("/api/cards/project.a.b/records/review/diff", &diff)
	if !strings.Contains(diff.Diff, "-Typo: wrld.") || !strings.Contains(diff.Diff, "+Approved after the fix.") {
		t.Errorf("review diff = %q", diff.Diff)
	}
	// Conversation, LLM exchange and process evidence are readable.
	var conv struct {
		Rows []struct {
			Kind, Name string
			Content    json.RawMessage
		}
	}
	a.get("/api/agents/agent:executor:project.a.a/conversation", &conv)
	var sawCommand bool
	for _, r := range conv.Rows {
		sawCommand = sawCommand || (r.Kind == "tool_result" && r.Name == "run_command" && strings.Contains(string(r.Content), `\"exit_code\":0`))
	}
	if !sawCommand {
		t.Errorf("executor conversation has no successful run_command result: %+v", conv.Rows)
	}
	var ex struct {
		Exchange struct {
			Route, Provider string
			UpstreamModel   string `json:"upstream_model"`
			Request         struct{ Model string }
			Response        *struct{ ToolCalls []any } `json:"response"`
		}
	}
	if code := a.get("/api/agents/agent:executor:project.a.a/llm-exchange", &ex); code != 200 || ex.Exchange.Request.Model != "tier-5" ||
		ex.Exchange.Provider != "gateway" || ex.Exchange.UpstreamModel != "tier-5" || ex.Exchange.Response == nil {
		t.Errorf("llm-exchange = %d %+v", code, ex)
	}
	var procs struct {
		Processes []struct {
			Command, State string
			ExitCode       *int `json:"exit_code"`
		}
	}
	a.get("/api/processes", &procs)
	if len(procs.Processes) != 2 || procs.Processes[0].State != "exited" || procs.Processes[0].ExitCode == nil || *procs.Processes[0].ExitCode != 0 {
		t.Errorf("processes = %+v", procs)
	}
	var agents struct{ Agents []struct{ ID string } }
	a.get("/api/agents", &agents)
	var ids []string
	for _, ag := range agents.Agents {
		ids = append(ids, ag.ID)
	}
	if want := "[agent:analyst:global agent:planner:project agent:planner:project.a agent:reviewer:project.a agent:executor:project.a.a " +
		"agent:reviewer:project.a.a agent:executor:project.a.b agent:reviewer:project.a.b]"; fmt.Sprint(ids) != want {
		t.Errorf("agents = %v", ids)
	}
	var events struct{ Total int }
	a.get("/api/events?type=card_finished", &events)
	if events.Total != 4 {
		t.Errorf("card_finished events = %d", events.Total)
	}

	// The CLI reads the live status; stop on a stopped runtime is harmless.
	code, sout, serr := runCLI(t, vars, "status", "--json")
	var status struct {
		RuntimeStatus struct{ Status string } `json:"runtime_status"`
		Lock          struct{ Status string }
	}
	if code != 0 || json.Unmarshal([]byte(sout), &status) != nil || status.RuntimeStatus.Status != "stopped" || status.Lock.Status != "live" {
		t.Errorf("status = %d %q %q", code, sout, serr)
	}
	if code, sout, serr := runCLI(t, vars, "pause"); code != 1 || !strings.Contains(serr, "not admitted") {
		t.Errorf("pause on a stopped runtime = %d %q %q", code, sout, serr)
	}
	if code, _, serr := runCLI(t, vars, "run"); code != 1 || !strings.Contains(serr, "the root card is done") {
		t.Errorf("run on a finished project = %d %q", code, serr)
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("start exit = %d: %s", code, p.errb.String())
	}
	if obs := lock.Inspect(filepath.Join(dir, ".saivage")); obs.Status != lock.Missing {
		t.Errorf("lock after shutdown = %+v", obs)
	}
	if code, sout, _ := runCLI(t, vars, "stop"); code != 0 || !strings.Contains(sout, "already stopped") {
		t.Errorf("stop without a server = %d %q", code, sout)
	}
	if code, _, serr := runCLI(t, vars, "run"); code != 1 || !strings.Contains(serr, "no Saivage server is running") {
		t.Errorf("run without a server = %d %q", code, serr)
	}
	if left := script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed replies: %v", left)
	}
}
