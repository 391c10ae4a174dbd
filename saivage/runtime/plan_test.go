package runtime_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// exchangeRows reads a card session's exchange evidence rows.
func exchangeRows(t *testing.T, e *env, card, agent string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.p.Cards.SessionDir(card, agent), runtime.ExchangesFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var env struct{ Rows []map[string]any }
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env.Rows...)
	}
	return out
}

// smallFirstCandidate gives the route's first candidate (tier-5) its own
// 10,000-token window with 1,000 output tokens — usable input 8,000 — and
// leaves tier-3 the provider's 128,000.
func smallFirstCandidate(cfg string) string {
	return strings.Replace(cfg, "      transportProtocol: chat_completions\n",
		"      transportProtocol: chat_completions\n    modelCapabilities:\n"+
			"      tier-5: {contextWindowTokens: 10000, maxOutputTokens: 1000, toolsMode: native, transportProtocol: chat_completions}\n", 1)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestEachCandidateAdmittedAgainstItsOwnWindow: two candidates with
// different context windows get their own plans. Once the conversation no
// longer fits the first candidate's usable input it is not sent there; the
// larger candidate gets the whole conversation, uncompacted. Every body a
// candidate received is byte for byte the plan the evidence names (its
// SHA-256 and length), with that candidate's own output limit.
func TestEachCandidateAdmittedAgainstItsOwnWindow(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallFirstCandidate})
	big := func(tag string) string { return strings.Repeat(tag+" ", 4000) }
	e.script.Add("planner@project", append([]llmtest.Reply{
		call("write", map[string]any{"path": "n1.txt", "content": big("FIRSTNOTE")}),
		call("write", map[string]any{"path": "n2.txt", "content": big("SECOND")}),
		call("write", map[string]any{"path": "n3.txt", "content": big("THIRD")}),
	}, finishRun()...)...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("summary"); n != 0 {
		t.Errorf("%d summary calls: the larger candidate's request was compacted", n)
	}
	hashes := map[string]map[string]any{}
	for _, row := range exchangeRows(t, e, "project", "planner") {
		hashes[row["request_sha256"].(string)] = row
	}
	var small, large int
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "planner@project" {
			continue
		}
		tokens := (len(r.Raw) + 3) / 4
		switch r.Model {
		case "tier-5":
			small++
			if tokens > 8000 {
				t.Errorf("tier-5 was sent about %d tokens, beyond its own usable input of 8000", tokens)
			}
			if r.Body["max_tokens"] != float64(1000) {
				t.Errorf("tier-5 request max_tokens = %v, want its own 1000", r.Body["max_tokens"])
			}
		case "tier-3":
			if tokens > 8000 {
				large++
				if !strings.Contains(string(r.Raw), "FIRSTNOTE FIRSTNOTE") {
					t.Error("the larger candidate's request lost the oldest history")
				}
			}
			if r.Body["max_tokens"] != float64(8192) {
				t.Errorf("tier-3 request max_tokens = %v, want its own 8192", r.Body["max_tokens"])
			}
		}
		row, ok := hashes[sha(r.Raw)]
		if !ok {
			t.Errorf("a %s request (%d bytes) is not byte for byte an admitted plan in the evidence", r.Model, len(r.Raw))
			continue
		}
		if row["request_bytes"].(float64) != float64(len(r.Raw)) || row["upstream_model"] != r.Model {
			t.Errorf("evidence %v does not describe the %s request of %d bytes", row, r.Model, len(r.Raw))
		}
	}
	if small == 0 || large == 0 {
		t.Fatalf("tier-5 requests %d, tier-3 requests beyond 8000 tokens %d: want both", small, large)
	}
	refused := e.events("candidate_not_admitted")
	if len(refused) == 0 || refused[0].Data["target"] != "gateway/tier-5" || refused[0].Data["usable_input"].(float64) != 8000 {
		t.Fatalf("candidate_not_admitted = %+v", refused)
	}
}

// TestContextRejectionRebuildsTheFailedCandidateFirst: tier-5 fails over
// (503) and tier-3 rejects the conversation as too long. After the one
// authoritative compaction the rebuilt request goes to tier-3 first, and
// tier-5, which failed in that pass, is not reopened for it.
func TestContextRejectionRebuildsTheFailedCandidateFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	for range 40 {
		e.srv.Enqueue("tier-5", llmtest.Reply{Status: 503, ErrorMessage: "busy"})
	}
	rejectionScript(e, finishRun()...)
	e.script.Add("summary", text("SUMMARY: wrote notes.txt and read it back."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	var planner []llmtest.Request
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" {
			planner = append(planner, r)
		}
	}
	// Each planner pass is tier-5's 503 then tier-3, except the rebuilt
	// one: find the rejected request and look at what followed it.
	rejected := -1
	for i, r := range planner {
		if r.Model == "tier-3" && !strings.Contains(string(r.Raw), "SUMMARY: wrote notes.txt") && i+1 < len(planner) &&
			strings.Contains(string(planner[i+1].Raw), "SUMMARY: wrote notes.txt") {
			rejected = i
			break
		}
	}
	if rejected < 0 {
		t.Fatalf("no compacted request follows a tier-3 request among %d planner requests", len(planner))
	}
	if next := planner[rejected+1]; next.Model != "tier-3" {
		t.Errorf("the rebuilt request went to %s first, want the rejecting tier-3", next.Model)
	}
	// The evidence of the rebuilt call has a single attempt, to tier-3.
	for _, row := range exchangeRows(t, e, "project", "planner") {
		if row["request_sha256"] == sha(planner[rejected+1].Raw) {
			if at := row["attempts"].([]any); len(at) != 1 || at[0].(map[string]any)["model"] != "tier-3" {
				t.Errorf("rebuilt call attempts = %v: tier-5 was reopened", at)
			}
		}
	}
	if cs := compactions(e); len(cs) != 1 || cs[0]["mode"] != "authoritative" {
		t.Errorf("compactions = %+v", cs)
	}
	// The summary fold went out as a plan too: its bytes are the ones its
	// evidence row names.
	summaries := map[string]bool{}
	for _, row := range exchangeRows(t, e, "project", "planner") {
		if row["kind"] == "summary" {
			summaries[row["request_sha256"].(string)] = true
		}
	}
	folds := 0
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "summary" && r.Model == "tier-3" {
			folds++
			if !summaries[sha(r.Raw)] {
				t.Errorf("the summary request of %d bytes is not the plan its evidence names", len(r.Raw))
			}
		}
	}
	if folds != 1 {
		t.Errorf("%d summary requests answered by tier-3, want 1", folds)
	}
}

// TestLocallyRefusedCandidateIsRebuiltAfterRejection: tier-5 cannot take
// the conversation (its own window) and is not sent it; tier-3 takes it,
// then rejects it as too long. The one authoritative compaction rebuilds
// the context-failed members — tier-3 first, then the locally refused
// tier-5 — so when tier-3 fails over on the rebuilt request, tier-5 gets
// the compacted conversation.
func TestLocallyRefusedCandidateIsRebuiltAfterRejection(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallFirstCandidate})
	e.script.Add("planner@project", call("write", map[string]any{"path": "n1.txt", "content": strings.Repeat("FIRSTNOTE ", 4000)}))
	// The summary source carries the 40,000-byte write whole: only tier-3
	// admits it, so the summary call goes there, between the rejection and
	// the rebuilt request.
	e.srv.Enqueue("tier-3",
		call("glob", map[string]any{"pattern": "*.txt"}),
		llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"},
		text("SUMMARY: wrote n1.txt and listed the text files."),
		llmtest.Reply{Status: 503, ErrorMessage: "busy"})
	e.script.Add("planner@project", finishRun()...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	var planner []llmtest.Request
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" {
			planner = append(planner, r)
		}
	}
	var models []string
	for _, r := range planner {
		m := r.Model
		if strings.Contains(string(r.Raw), "SUMMARY: wrote n1.txt") {
			m += "+summary"
		}
		if strings.Contains(string(r.Raw), "FIRSTNOTE FIRSTNOTE") {
			m += "+note"
		}
		models = append(models, m)
	}
	// The write (tier-5), the glob and the rejection (tier-3, too large
	// for tier-5), the rebuilt request to tier-3 (503), then tier-5.
	want := []string{"tier-5", "tier-3+note", "tier-3+note", "tier-3+summary", "tier-5+summary"}
	if len(models) < len(want) || strings.Join(models[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("planner requests went to %v, want %v first", models, want)
	}
	if cs := compactions(e); len(cs) != 1 || cs[0]["mode"] != "authoritative" {
		t.Errorf("compactions = %+v", cs)
	}
}
