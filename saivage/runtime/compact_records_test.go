package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// TestFoldedRecordReadsBecomeObservations: records the agent read outside
// its node's own records — the current head of record:project.a/brief and
// the exact version record:project.b/brief@1 (read_record_version) — are
// described in the compacted genesis's latest_record_observations once
// the reads are folded: locator, card, record, kind, version, size, from
// the reads' structured results, never their content. A read of its own
// record is superseded by the state snapshot's descriptor (one per
// record). The request after the compaction lists them with the summary.
func TestFoldedRecordReadsBecomeObservations(t *testing.T) {
	const brief, notes = "BRIEF-BODY-5C1 write the notes.", "NOTES-BODY-9D2 first version of the notes."
	e := newEnv(t, envOptions{})
	for i, body := range []string{brief, notes} {
		res := e.operate(runtime.PrincipalOperator, "create_card", map[string]any{"parent_id": "project", "title": fmt.Sprintf("Goal %d", i),
			"records": map[string]string{"brief": body}})
		if res.IsError {
			t.Fatalf("create_card = %+v", res)
		}
	}
	var steps []llmtest.Reply
	for i := range 4 {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": strings.Repeat("note ", 300)}))
	}
	e.script.Add("planner@project", append(append([]llmtest.Reply{
		call("read", map[string]any{"path": "record:project.a/brief"}),
		call("read_record_version", map[string]any{"card_id": "project.b", "record": "brief", "version": 1}),
		call("read", map[string]any{"path": "record:objective"}),
		call("read", map[string]any{"path": "record:project.a/missing"}), // an error: nothing observed
		call("cancel_card", map[string]any{"card_id": "project.a"}),
		call("cancel_card", map[string]any{"card_id": "project.b"}),
	}, steps...), append([]llmtest.Reply{{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"}}, finishRun()...)...)...)
	e.script.Add("summary", text("SUMMARY: read the brief and the notes."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	rows := e.rows("project", "planner")
	var g struct {
		CoveredRows  int              `json:"covered_rows"`
		Observations []map[string]any `json:"latest_record_observations"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &g) != nil {
		t.Fatalf("genesis = %s", rows[0].Content)
	}
	if strings.Contains(string(rows[0].Content), "BODY-") {
		t.Fatalf("the genesis carries record content: %s", rows[0].Content)
	}
	byRecord := map[string]map[string]any{}
	for _, o := range g.Observations {
		key := fmt.Sprint(o["card"], "/", o["record"])
		if byRecord[key] != nil {
			t.Errorf("two observations of %s", key)
		}
		byRecord[key] = o
	}
	want := map[string]map[string]any{
		"project.a/brief": {"locator": "record:project.a/brief", "card": "project.a", "record": "brief", "kind": "accepted", "version": float64(1), "bytes": float64(len(brief))},
		"project.b/brief": {"locator": "record:project.b/brief@1", "card": "project.b", "record": "brief", "kind": "accepted", "version": float64(1), "bytes": float64(len(notes))},
	}
	for key, w := range want {
		if got := byRecord[key]; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("observation of %s = %v, want %v", key, got, w)
		}
	}
	// The own objective read gives way to the snapshot's descriptor (with
	// the node's mode and gate); the failed read observed nothing.
	if o := byRecord["project/objective"]; o == nil || o["locator"] != "record:objective" || o["mode"] != "read" {
		t.Errorf("objective observation = %v, want the snapshot's", o)
	}
	if byRecord["project.a/missing"] != nil || len(g.Observations) != 4 {
		t.Errorf("observations = %v, want the two briefs, objective and plan", g.Observations)
	}
	var after []string
	for _, req := range plannerRequests(e) {
		if strings.Contains(strings.Join(req, "\n"), "SUMMARY: read the brief and the notes.") {
			after = req
			break
		}
	}
	lines := []string{
		fmt.Sprintf("- record:project.a/brief — accepted version 1, %d bytes", len(brief)),
		fmt.Sprintf("- record:project.b/brief@1 — accepted version 1, %d bytes", len(notes)),
	}
	if after == nil {
		t.Fatal("no request after the compaction")
	}
	for _, l := range lines {
		if !strings.Contains(after[2], l) {
			t.Errorf("the summary message does not list %q:\n%s", l, after[2])
		}
	}
	if strings.Contains(after[2], "BODY-") {
		t.Errorf("the summary message carries record content")
	}
}
