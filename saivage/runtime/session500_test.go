package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/state"
)

// The long session's model windows: the route's two candidates (gateway
// tier-5 and tier-3) share the provider's capabilities, the summarizer
// candidate (gateway tier-1) has its own, smaller window.
const (
	longWindow, longOutput = 10000, 1000
	longSummaryWindow      = 3000
	longSummaryOutput      = 2000 // the summary's reserved output
	longUtilization        = 0.9
	longRounds             = 500
	longSession            = "agent:executor:project.a.a"
	longExecutor           = "executor@project.a.a"
	longMinCompactions     = 20
	// longRefusal is the summary call the summarizer refuses on
	// content-policy grounds.
	longRefusal = 200
)

// usableInput is floor(U×C)−O.
func usableInput(window, output int) int {
	return int(math.Floor(float64(window)*longUtilization)) - output
}

// longSessionConfig gives the gateway provider a 10,000-token window with
// 1,000 output tokens, a 5 % tail, and a summarizer candidate gateway/tier-1
// whose window is 3,000 tokens (usable 700: several summary calls per
// compaction); preventive maintenance is on or off.
func longSessionConfig(preventive bool) func(string) string {
	return func(cfg string) string {
		for _, r := range [][2]string{
			{"contextWindowTokens: 128000", fmt.Sprintf("contextWindowTokens: %d", longWindow)},
			{"maxOutputTokens: 8192", fmt.Sprintf("maxOutputTokens: %d", longOutput)},
			{"tail_fraction: 0.3", "tail_fraction: 0.05"},
			{"context_utilization_fraction: 0.9", fmt.Sprintf("context_utilization_fraction: %g", longUtilization)},
			{"models: [tier-5, tier-3]", "models: [tier-5, tier-3, tier-1]"},
			{"    capabilities:\n", fmt.Sprintf("    modelCapabilities:\n      tier-1: {contextWindowTokens: %d, maxOutputTokens: %d, toolsMode: native}\n    capabilities:\n",
				longSummaryWindow, longSummaryOutput)},
			{"compaction:\n  enabled: true", fmt.Sprintf("compaction:\n  enabled: %t\n  summarizer_candidate: {provider: gateway, model: tier-1}", preventive)},
		} {
			if !strings.Contains(cfg, r[0]) {
				panic("the classic config has no " + r[0])
			}
			cfg = strings.Replace(cfg, r[0], r[1], 1)
		}
		return cfg
	}
}

// TestFiveHundredRoundSessionStaysWithinBudget runs a real 500-round
// session through the runtime: a task's Executor reads a file (now and
// then runs a command) 500 times before it writes its summary and
// finishes, against a 10,000-token window, with preventive maintenance on
// (preventive compactions) and off (local-exact compactions before I/O).
// From the exact bodies the scripted provider received: every primary
// request's ceil(bytes/4) is within its candidate's usable input
// floor(U×C)−O and every summary request within the summarizer's; the
// session was compacted many times, each time into a strictly smaller
// successor, at most one compaction per mode between two primary requests
// (never a third pass), each within the 16-call summary budget, each
// successor's summary its accumulator's last fold and every later request
// carrying it alone; the summarizer's one policy refusal ends that
// compaction's summary calls and declares an omission, later compactions
// summarize again; the exchange evidence names every body received; the
// provider received exactly the scripted primary calls plus the
// compactions' summary calls; the card reaches DONE.
func TestFiveHundredRoundSessionStaysWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a 500-round session: skipped under -short")
	}
	for _, tc := range []struct {
		name       string
		preventive bool
		mode       string // every compaction's mode
		unit       string // the mode's measure in session_compacted
	}{
		{"preventive", true, "preventive", "tokens"},
		{"local exact", false, "local_exact", "accounting_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The node's 502 model calls exceed the runtime's default
			// per-node bound (DefaultMaxNodeSteps).
			e := newEnv(t, envOptions{configEdit: longSessionConfig(tc.preventive), rtOpts: runtime.Options{MaxNodeSteps: longRounds + 100}})
			sum, scripted := runLongSession(t, e)
			if sum.Outcome != "done" {
				t.Fatalf("run = %+v", sum)
			}
			for _, id := range []string{"project", "project.a", "project.a.a"} {
				if st := e.status(id); st != "done" {
					t.Errorf("%s is %s", id, st)
				}
			}
			if left := e.script.Remaining(); len(left) != 0 {
				t.Errorf("unconsumed replies: %v", left)
			}
			checkLongSession(t, e, tc.mode, tc.unit, scripted)
		})
	}
}

// runLongSession scripts the tree (the project's and the goal's Planner
// activate one task; the reviewers approve), the task's Executor's 500
// rounds and a summarizer that answers every fold, runs it and waits for
// the Run to end. It returns the Run and how many replies it scripted
// besides the summaries.
func runLongSession(t *testing.T, e *env) (*runtime.RunSummary, int) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.p.Cards.Create(ctx, cardsInput("project", "Notes")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Cards.Create(ctx, cards.CreateInput{Parent: "project.a", Type: "task", Title: "Read the notes", Author: "test",
		Bootstrap: map[string]string{"brief": "Read every note, again and again."}}); err != nil {
		t.Fatal(err)
	}
	// Notes of 0.8 to 3.5 KB: each round adds its call and the note.
	for i := range 10 {
		content := strings.Repeat(fmt.Sprintf("note %d: a line of text\n", i), 35+i*12)
		if err := os.WriteFile(filepath.Join(e.dir, fmt.Sprintf("n%d.txt", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := []llmtest.Reply{
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One goal: the notes."}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "The notes were read."}),
		emit("done", "complete", map[string]any{"verdict": "complete"}),
	}
	goal := []llmtest.Reply{
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One task reads the notes."}),
		emit("done", "the task is done", nil),
	}
	goalReview := []llmtest.Reply{emit("done", "met", map[string]any{"verdict": "approved"})}
	var steps []llmtest.Reply
	for i := range longRounds {
		if i%50 == 25 {
			steps = append(steps, call("run_command", map[string]any{"command": fmt.Sprintf("echo round %d", i)}))
			continue
		}
		steps = append(steps, call("read", map[string]any{"path": fmt.Sprintf("n%d.txt", (i*7)%10)}))
	}
	steps = append(steps, call("write", map[string]any{"path": "record:summary", "content": "Read the notes 500 times."}), emit("done", "read", nil))
	taskReview := []llmtest.Reply{
		call("write", map[string]any{"path": "record:review", "content": "Approved."}),
		emit("done", "approved", map[string]any{"verdict": "approved"}),
	}
	scripted := 0
	for key, replies := range map[string][]llmtest.Reply{"planner@project": root, "planner@project.a": goal, "reviewer@project.a": goalReview,
		longExecutor: steps, "reviewer@project.a.a": taskReview} {
		e.script.Add(key, replies...)
		scripted += len(replies)
	}
	var mu sync.Mutex
	folds := 0
	e.script.Fallback = func(key string) (llmtest.Reply, bool) {
		if key != "summary" {
			return llmtest.Reply{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		folds++
		if folds == longRefusal {
			return llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"}, true
		}
		return text(fmt.Sprintf("FOLD-%d: the executor read notes n0 to n9 over and over; each note repeats its own line.", folds)), true
	}
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The deadline only guards against a hang; the Run's end is observed.
	deadline := time.After(10 * time.Minute)
	for {
		st := e.rt.Status()
		if st.Status != runtime.StatusRunning && st.Status != runtime.StatusPausing && st.Status != runtime.StatusPaused && st.LastRun != nil {
			return st.LastRun, scripted
		}
		select {
		case <-e.obs:
		case err := <-e.fatal:
			t.Fatalf("fatal publication error: %v", err)
		case <-deadline:
			t.Fatalf("the Run did not end (status %+v, unconsumed script %v)", st, e.script.Remaining())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkLongSession checks the long session from the exact bodies the
// provider received and the session_compacted events; scripted is the
// number of scripted replies besides the summaries.
func checkLongSession(t *testing.T, e *env, mode, unit string, scripted int) {
	t.Helper()
	usable := map[string]int{"tier-5": usableInput(longWindow, longOutput), "tier-3": usableInput(longWindow, longOutput)}
	summaryUsable := usableInput(longSummaryWindow, longSummaryOutput)
	// gaps[i] is how many summary calls the provider received between the
	// executor's primary requests i−1 and i; bodies are the executor's
	// primary requests.
	var gaps []int
	var bodies []string
	// hashes are the SHA-256 of the executor session's bodies, primary and
	// summary, in the order received.
	var hashes []string
	summaries, total := 0, 0
	gap := 0
	for _, r := range e.srv.Requests() {
		total++
		// No images: the estimate is ceil(bytes/4) without raster
		// reservations.
		if strings.Contains(string(r.Raw), `"image_url"`) {
			t.Fatalf("a request carries an image")
		}
		tokens := (len(r.Raw) + 3) / 4
		switch key := runtimeKey(r); key {
		case "summary":
			summaries++
			gap++
			hashes = append(hashes, "summary "+sha(r.Raw))
			if r.Model != "tier-1" {
				t.Errorf("summary request %d went to %s, not the summarizer candidate", summaries, r.Model)
			}
			if tokens > summaryUsable {
				t.Errorf("summary request %d: %d tokens, more than the summarizer's usable input %d", summaries, tokens, summaryUsable)
			}
		default:
			u, ok := usable[r.Model]
			if !ok {
				t.Fatalf("%s request to %s, not a route candidate", key, r.Model)
			}
			if tokens > u {
				t.Errorf("%s request: %d tokens, more than %s's usable input %d", key, tokens, r.Model, u)
			}
			if key == longExecutor {
				gaps = append(gaps, gap)
				bodies = append(bodies, string(r.Raw))
				hashes = append(hashes, "primary "+sha(r.Raw))
				gap = 0
			}
		}
	}
	if gap != 0 {
		t.Errorf("%d summary calls after the executor's last request", gap)
	}
	if want := longRounds + 2; len(bodies) != want {
		t.Fatalf("the executor made %d primary requests, want %d (the rounds, the summary write and the result)", len(bodies), want)
	}
	var cs []map[string]any
	for _, c := range compactions(e) {
		if c["session"] != longSession {
			t.Errorf("a compaction of %v", c["session"])
			continue
		}
		cs = append(cs, c)
	}
	// The session is compacted many times, but not on every call once past
	// the trigger.
	if len(cs) < longMinCompactions || len(cs) > len(bodies)/2 {
		t.Fatalf("%d compactions in %d primary requests, want at least %d and at most one every other request", len(cs), len(bodies), longMinCompactions)
	}
	// Each compaction's summary calls are the next ones the provider
	// received, all between the same two primary requests: compaction i
	// ran before primary request at[i], and its summary is the fold of
	// its last call, FOLD-folds[i].
	at, folds := make([]int, len(cs)), make([]int, len(cs))
	calls, g, left := 0, 0, gaps[0]
	perRequest := map[int][]string{}
	for i, c := range cs {
		n := int(c["summary_calls"].(float64))
		calls += n
		// The compaction whose summary call was refused makes no further
		// call and declares an omission; the others summarize.
		refused := calls-n < longRefusal && longRefusal <= calls
		if c["mode"] != mode || c["omitted"] != refused || n < 1 || n > agent.MaxSummaryCalls || refused && calls != longRefusal {
			t.Errorf("compaction %d = %+v (calls %d to %d): want %s, omitted %t, 1 to %d summary calls, none after the refusal",
				i, c, calls-n+1, calls, mode, refused, agent.MaxSummaryCalls)
		}
		before, after := c[unit+"_before"].(float64), c[unit+"_after"].(float64)
		if after >= before {
			t.Errorf("compaction %d published a successor of %v %s, not smaller than %v", i, after, unit, before)
		}
		for left == 0 && g+1 < len(gaps) {
			g++
			left = gaps[g]
		}
		if n > left {
			t.Fatalf("compaction %d's %d summary calls span two primary requests", i, n)
		}
		left -= n
		at[i], folds[i] = g, calls
		perRequest[g] = append(perRequest[g], c["mode"].(string))
	}
	if calls != summaries {
		t.Errorf("the compactions count %d summary calls, the provider received %d", calls, summaries)
	}
	// Before a primary request: at most one preventive pass and one
	// local-exact pass, never a third.
	for g, modes := range perRequest {
		if len(modes) > 1 && !slices.Equal(modes, []string{"preventive", "local_exact"}) {
			t.Errorf("before primary request %d: compactions %v", g, modes)
		}
	}
	if ev := e.events("compaction_summary_refused"); len(ev) != 1 || ev[0].Data["session"] != longSession {
		t.Errorf("compaction_summary_refused = %+v, want one", ev)
	}
	for _, typ := range []string{"admission_refused", "compaction_not_smaller", "compaction_summary_inadmissible", "compaction_skipped", "compaction_superseded"} {
		if ev := e.events(typ); len(ev) != 0 {
			t.Errorf("%s: %+v", typ, ev)
		}
	}
	// Each compaction published a successor segment whose summary is its
	// accumulator's last fold, and every primary request after it carries
	// that summary and no earlier one (the successor is self-contained).
	segs, err := e.p.Sessions.Load(e.p.Cards.SessionDir("project.a.a", "executor"), longSession, state.TailFail)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != len(cs)+1 {
		t.Fatalf("%d segments after %d compactions", len(segs), len(cs))
	}
	// An omission's successor carries its declaration, and no summary.
	const omission = "earlier conversation rows were omitted to fit the model's context: the summary was unavailable (the summarizer refused it under its content policy)"
	summaryOf := func(i int) (string, int) {
		if cs[i]["omitted"] == true {
			return omission, 0
		}
		return fmt.Sprintf("FOLD-%d:", folds[i]), 1
	}
	for i := range cs {
		want, _ := summaryOf(i)
		if got := decodeGenesis(t, segs[i+1][0]); !strings.Contains(got, want) {
			t.Errorf("segment %d's summary is %.200q, want %q", i+1, got, want)
		}
	}
	j := -1
	for i, body := range bodies {
		for j+1 < len(cs) && at[j+1] <= i {
			j++
		}
		want := 0
		if j >= 0 {
			var marker string
			marker, want = summaryOf(j)
			if !strings.Contains(body, marker) {
				t.Errorf("primary request %d does not carry compaction %d's summary %q", i, j, marker)
			}
		}
		if n := strings.Count(body, "FOLD-"); n != want {
			t.Errorf("primary request %d carries %d summaries, want %d", i, n, want)
		}
	}
	// The session's exchange evidence names each of those bodies once, in
	// order, and only the refused summary call failed.
	var evidence []string
	failed := 0
	for _, row := range exchangeRows(t, e, "project.a.a", "executor") {
		evidence = append(evidence, fmt.Sprint(row["kind"], " ", row["request_sha256"]))
		if row["outcome"] != "ok" {
			failed++
			if row["kind"] != "summary" {
				t.Errorf("failed exchange %+v", row)
			}
		}
	}
	if !slices.Equal(evidence, hashes) || failed != 1 {
		t.Errorf("the exchange evidence (%d rows, %d failed) does not name the %d bodies received in order", len(evidence), failed, len(hashes))
	}
	// No retries and no unscripted calls: every call is a scripted reply
	// or one of the compactions' budgeted summary calls.
	if total-summaries != scripted || total > scripted+len(cs)*agent.MaxSummaryCalls {
		t.Errorf("%d provider calls (%d summaries), want the %d scripted ones plus at most %d per compaction", total, summaries, scripted, agent.MaxSummaryCalls)
	}
	t.Logf("%d rounds: %d compactions (%s), %d summary calls (at most %d in one), %d provider calls", longRounds, len(cs), mode, summaries, maxCalls(cs), total)
}

// decodeGenesis returns the summary text of a compacted segment's first
// row.
func decodeGenesis(t *testing.T, r conversations.Row) string {
	t.Helper()
	var g struct {
		Text string `json:"text"`
	}
	if r.Kind != "summary" || json.Unmarshal(r.Content, &g) != nil {
		t.Fatalf("a compacted segment starts with %+v", r)
	}
	return g.Text
}

// maxCalls is the most summary calls one compaction made.
func maxCalls(cs []map[string]any) int {
	m := 0
	for _, c := range cs {
		m = max(m, int(c["summary_calls"].(float64)))
	}
	return m
}

// TestOrdinaryCandidatePrecedesDeclaredOmission: a local-exact compaction
// folds its preferred endpoint (an ordinary candidate), then the summarizer
// refuses the advance to the furthest endpoint. The refusal ends summary
// calls, and the completed ordinary candidate is published: a declared
// omission is only for a compaction without one, even when it would be
// smaller.
func TestOrdinaryCandidatePrecedesDeclaredOmission(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: exactWindow})
	if err := os.WriteFile(filepath.Join(e.dir, "small.txt"), []byte("a small note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Large writes fill most of the window; small reads then reach the
	// usable input with several of them within the tail.
	var steps []llmtest.Reply
	for i := range 7 {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": strings.Repeat(fmt.Sprintf("N%d ", i), 850)}))
	}
	for range 30 {
		steps = append(steps, call("read", map[string]any{"path": "small.txt"}))
	}
	e.script.Add("planner@project", append(steps, finishRun()...)...)
	e.script.Add("summary", text("ORDINARY: wrote n0 to n6."), llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"})
	e.script.Fallback = func(key string) (llmtest.Reply, bool) { return text("LATER: read small.txt."), key == "summary" }
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	cs := compactions(e)
	if len(cs) == 0 || cs[0]["summary_calls"].(float64) != 2 {
		t.Fatalf("compactions = %+v: the first does not fold two endpoints", cs)
	}
	if ev := e.events("compaction_summary_refused"); len(ev) != 1 {
		t.Errorf("compaction_summary_refused = %+v", ev)
	}
	segs, err := e.p.Sessions.Load(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project", state.TailFail)
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments = %d, %v", len(segs), err)
	}
	if cs[0]["omitted"] != false || decodeGenesis(t, segs[1][0]) != "ORDINARY: wrote n0 to n6." {
		t.Errorf("published %+v with summary %q, want the ordinary candidate", cs[0], decodeGenesis(t, segs[1][0]))
	}
}
