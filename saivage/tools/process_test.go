package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/tools"
)

type procResult struct {
	ProcessID  string `json:"process_id"`
	State      string
	ExitCode   *int `json:"exit_code"`
	GroupAlive bool `json:"group_alive"`
	Note       string
	Output     tools.Output
}

func decodeProc(t *testing.T, s string) procResult {
	t.Helper()
	var r procResult
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return r
}

func TestRunCommandOutputCaps(t *testing.T) {
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project", WorkRoot: filepath.Join(t.TempDir(), "work")})
	out := f.ok("run_command", map[string]any{"command": "for i in $(seq 1 100); do echo line $i; done; echo err >&2; exit 3"})
	r := decodeProc(t, out)
	if r.State != "exited" || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("result = %+v", r)
	}
	if strings.Count(r.Output.Head, "\n") != tools.HeadLines || !strings.HasPrefix(r.Output.Head, "line 1\n") {
		t.Errorf("head = %q", r.Output.Head)
	}
	if !strings.HasSuffix(r.Output.Tail, "line 100\nerr\n") || strings.Count(r.Output.Tail, "\n") != tools.HeadLines {
		t.Errorf("tail = %q", r.Output.Tail)
	}
	if r.Output.Lines != 101 || !r.Output.Truncated || !r.Output.Complete {
		t.Errorf("output = %+v", r.Output)
	}
	capture, _ := os.ReadFile(filepath.Join(f.env.Root, r.Output.Capture))
	if strings.Count(string(capture), "\n") != 101 {
		t.Errorf("capture has %d lines", strings.Count(string(capture), "\n"))
	}
	// Long single lines are cut at 2048 bytes; the envelope stays bounded.
	out = f.ok("run_command", map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' 'x'; echo; # " + strings.Repeat("y", 60000)})
	if len(out) > tools.MaxResultBytes {
		t.Errorf("envelope is %d bytes", len(out))
	}
	r = decodeProc(t, out)
	if len(r.Output.Head) != tools.HeadBytes || r.Output.Bytes != 100001 {
		t.Errorf("head %d bytes, total %d", len(r.Output.Head), r.Output.Bytes)
	}
}

func TestRunCommandEnvironment(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work")
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project.a", WorkRoot: work})
	r := decodeProc(t, f.ok("run_command", map[string]any{"command": "echo key=${OPENAI_API_KEY:-unset} root=$SAIVAGE_CARD_WORK_ROOT; pwd"}))
	if !strings.Contains(r.Output.Head, "key=unset") || !strings.Contains(r.Output.Head, "root="+work) || !strings.Contains(r.Output.Head, f.env.Root) {
		t.Errorf("output = %q", r.Output.Head)
	}
	if st, err := os.Stat(work); err != nil || !st.IsDir() {
		t.Errorf("work root not created: %v", err)
	}
	// Global callers get no card work root; secrets in output are redacted.
	g := newFixture(t, analyst())
	r = decodeProc(t, g.ok("run_command", map[string]any{"command": "echo root=${SAIVAGE_CARD_WORK_ROOT:-none} super-secret-value", "cwd": "."}))
	if !strings.Contains(r.Output.Head, "root=none [redacted]") {
		t.Errorf("global output = %q", r.Output.Head)
	}
	g.fails("run_command", map[string]any{"command": "true", "cwd": ".saivage/cards"}, "inside .saivage")
}

func TestBackgroundProcessWaitAndKill(t *testing.T) {
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	// The command outlives the wait; it and its child keep running.
	r := decodeProc(t, f.ok("run_command", map[string]any{"command": "sleep 300 & echo started; wait", "timeout_ms": 200}))
	if r.State != "running" || !strings.Contains(r.Note, "still running") {
		t.Fatalf("result = %+v", r)
	}
	w := decodeProc(t, f.ok("wait_process", map[string]any{"process_id": r.ProcessID, "timeout_ms": 50}))
	if w.State != "running" {
		t.Fatalf("wait = %+v", w)
	}
	k := decodeProc(t, f.ok("kill_process", map[string]any{"process_id": r.ProcessID}))
	if k.State != "killed" || k.GroupAlive {
		t.Fatalf("kill = %+v", k)
	}
	// Another card cannot touch it; the list shows it.
	other := newFixture(t, tools.Caller{Agent: "executor", Card: "project.b"})
	other.env.Processes = f.env.Processes
	other.fails("kill_process", map[string]any{"process_id": r.ProcessID}, "belongs to project")
	if out := f.ok("list_processes_tool", map[string]any{}); !strings.Contains(out, r.ProcessID) || !strings.Contains(out, `"state": "killed"`) {
		t.Errorf("list = %s", out)
	}
	f.fails("wait_process", map[string]any{"process_id": "p999"}, "no process")
}
