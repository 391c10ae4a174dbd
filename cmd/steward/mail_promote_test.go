package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/mail/promote"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads/threadstest"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/scheduler"
)

// promoteHome is a STEWARD_HOME with a mail account whose mirror is
// built from generated Maildir messages.
func promoteHome(t *testing.T, settings map[string]string) (home string, m *threadstest.Mirror) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	m = threadstest.New(t, threadstest.Options{Home: home})
	yaml := fmt.Sprintf("accounts:\n  - name: personal\n    kind: maildir\n    root: %q\n    addresses: [me@example.com]\n", m.Root)
	if err := os.WriteFile(filepath.Join(home, "mail.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var env strings.Builder
	for k, v := range settings {
		fmt.Fprintf(&env, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(home, "config.env"), []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, m
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln := loopback(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func durableAnswer(summary string) string {
	b, _ := json.Marshal(map[string]any{"durable": true, "categories": []string{"commitment"}, "summary": summary,
		"facts": []string{}, "commitments": []any{}, "people": []any{}, "organizations": []string{}, "review_by": "", "attachments": []any{}})
	return string(b)
}

func TestMailPromoteNotConfiguredAndSchedulerJobAgree(t *testing.T) {
	var job scheduler.Job
	for _, j := range scheduler.DefaultJobs() {
		if j.Name == "mail-distill" {
			job = j
		}
	}
	if !slices.Equal(job.Args, []string{"mail", "promote", "--json"}) {
		t.Fatalf("the mail-distill job runs %q", job.Args)
	}
	// No mail accounts: exit 3, which the scheduler reports as skipped.
	env, _, stderr := testEnv(t, map[string]string{})
	if code := run(context.Background(), job.Args, env); code != scheduler.ExitNotConfigured {
		t.Fatalf("without mail accounts: exit %d, stderr %s", code, stderr)
	}
	// Promotion turned off.
	home, _ := promoteHome(t, map[string]string{"MAIL_PROMOTER_LLM_ENDPOINT": "off"})
	env, _, stderr = testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), job.Args, env); code != scheduler.ExitNotConfigured || !strings.Contains(stderr.String(), "MAIL_PROMOTER_LLM_ENDPOINT=off") {
		t.Fatalf("promotion off: exit %d, stderr %s", code, stderr)
	}
	// A bad --since is a usage error that says what is accepted.
	env, _, stderr = testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"mail", "promote", "--since", "yesterday-ish"}, env); code != 2 || !strings.Contains(stderr.String(), "30d") {
		t.Fatalf("bad --since: exit %d, stderr %s", code, stderr)
	}
}

// TestMailPromoteSurvivesSIGKILL kills `steward mail promote` in the
// middle of a batch and runs it again: every thread ends in exactly one
// outcome, each durable thread has exactly one note, and nothing promoted
// is lost.
func TestMailPromoteSurvivesSIGKILL(t *testing.T) {
	up := llmtest.NewServer(t)
	settings := map[string]string{"MAIL_PROMOTER_LLM_ENDPOINT": up.URL + "/chat/completions", "LLM_WIKI_API_BASE_URL": "http://" + freeAddr(t),
		"MAIL_EMBED_ENDPOINT": "off", "MAIL_CLASSIFY_ENDPOINT": "off", "WIKI_EMBED_ENDPOINT": "off"}
	home, m := promoteHome(t, settings)
	const n = 40
	base := time.Now().Add(-48 * time.Hour)
	for i := range n {
		m.Add(t, "INBOX", threadstest.Message{ID: fmt.Sprintf("t%d@x", i), From: fmt.Sprintf("Person %d <p%d@people.example>", i, i),
			To: []string{"me@example.com"}, Subject: fmt.Sprintf("Decision %d about the roof", i), Body: fmt.Sprintf("We decided option %d.", i),
			Date: base.Add(time.Duration(i) * time.Minute)}, "S")
	}
	m.Sync(t)
	up.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: durableAnswer("A roof decision."), Delay: 150 * time.Millisecond}
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "mail", "promote", "--json", "--since", "all", "--workers", "3")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(home, "wiki", "raw", "sources", "mail")
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(notes)
		return len(entries) >= 6
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if st := cmd.ProcessState; st == nil || st.Success() {
		t.Fatalf("the first run was not killed: %v\n%s", st, out.String())
	}
	callsBefore := len(up.Requests())
	if callsBefore >= n {
		t.Fatalf("the batch finished (%d calls) before the kill", callsBefore)
	}

	// Rerun to completion, in this process.
	up.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: durableAnswer("A roof decision.")}
	})
	env, stdout, stderr := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"mail", "promote", "--json", "--since", "all"}, env); code != 0 {
		t.Fatalf("rerun exit %d: %s", code, stderr)
	}
	var rep promote.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	if rep.Candidates != n || rep.Promoted+rep.Unchanged != n || rep.Deferred != 0 {
		t.Fatalf("rerun %+v", rep.Counts)
	}
	// Every thread: exactly one final state and exactly one note, named by its id.
	state, err := promote.OpenStore(context.Background(), promoterStatePath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	reader, err := threads.Open(context.Background(), m.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	list, _ := reader.Recent(context.Background(), threads.ListOptions{})
	want := map[string]bool{}
	for _, s := range list {
		st, err := state.Get(context.Background(), s.Key())
		if err != nil || st == nil || st.Outcome != promote.OutcomePromoted || st.Note != promote.NotePath(s.ID) {
			t.Fatalf("%s: state %+v %v", s.Key(), st, err)
		}
		want[filepath.Base(st.Note)] = true
	}
	entries, _ := os.ReadDir(notes)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		if !want[e.Name()] {
			t.Errorf("unexpected file in the notes folder: %s", e.Name())
		}
	}
	if len(got) != n || len(want) != n {
		t.Fatalf("%d files for %d threads: %q", len(got), n, got)
	}
	// The rerun asked the model only about what the killed run had not recorded.
	if calls := len(up.Requests()) - callsBefore; calls != rep.Promoted || rep.Promoted == n {
		t.Fatalf("rerun made %d calls for %d promotions", calls, rep.Promoted)
	}
}

// TestChatAnswersFromPromotedNote promotes a thread while `steward serve`
// runs (the wiki API rescans once), then drives a chat turn in which the
// model finds the note with wiki_search and opens the original message
// with read_message by the id the note records.
func TestChatAnswersFromPromotedNote(t *testing.T) {
	up := llmtest.NewServer(t)
	wikiAddr := freeAddr(t)
	home, m := promoteHome(t, map[string]string{"MAIL_PROMOTER_LLM_ENDPOINT": up.URL + "/chat/completions", "LLM_WIKI_API_BASE_URL": "http://" + wikiAddr,
		"MAIL_EMBED_ENDPOINT": "off", "MAIL_CLASSIFY_ENDPOINT": "off", "WIKI_EMBED_ENDPOINT": "off", "WIKI_AUTO_INGEST": "0", "STEWARD_SCHEDULER": "off"})
	writeGatewayConfig(t, home, up.URL)
	m.Add(t, "INBOX", threadstest.Message{ID: "boiler1@x", From: "Heating Co <service@heating.example>", To: []string{"me@example.com"},
		Subject: "Boiler service contract", Body: "Your boiler service contract number BX-4471 covers annual maintenance until 2028-03-31.",
		Date: time.Now().Add(-2 * time.Hour)}, "S")
	m.Sync(t)
	env, _, logs := testEnv(t, map[string]string{"STEWARD_HOME": home})
	base, token := runServe(t, env, home)
	waitFor(t, func() bool {
		tok, err := os.ReadFile(filepath.Join(home, "wiki-api-token"))
		if err != nil {
			return false
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+wikiAddr+"/health", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})

	up.Enqueue("tier-5", llmtest.Reply{Content: durableAnswer("The boiler service contract BX-4471 covers annual maintenance until 2028-03-31.")})
	penv, pout, perr := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"mail", "promote", "--json"}, penv); code != 0 {
		t.Fatalf("promote exit %d: %s", code, perr)
	}
	var rep promote.Report
	json.Unmarshal(pout.Bytes(), &rep)
	if rep.Promoted != 1 || rep.Rescan != "done" || len(rep.Items) != 1 {
		t.Fatalf("promote report %+v (rescan %q %s)", rep.Counts, rep.Rescan, rep.Error)
	}
	note, err := os.ReadFile(filepath.Join(home, "wiki", filepath.FromSlash(rep.Items[0].Note)))
	if err != nil {
		t.Fatal(err)
	}
	var msgID string
	for _, line := range strings.Split(string(note), "\n") {
		if v, ok := strings.CutPrefix(line, "  - id: "); ok && msgID == "" {
			msgID = strings.Trim(v, `"'`)
		}
	}
	if msgID == "" {
		t.Fatalf("no message id in the note:\n%s", note)
	}

	search, _ := json.Marshal(map[string]any{"query": "boiler contract", "includeSources": true})
	read, _ := json.Marshal(map[string]any{"id": msgID})
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "mcp__wiki__wiki_search", Arguments: string(search)}}}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c2", Function: llm.FunctionCall{Name: "mcp__mail__read_message", Arguments: string(read)}}}},
		llmtest.Reply{Content: "Your boiler contract BX-4471 runs until 2028-03-31."})
	waitFor(t, func() bool {
		ready, promotion := 0, false
		for _, s := range systemServices(base, token) {
			if (s.Name == "mcp:wiki" || s.Name == "mcp:mail") && s.State == "ok" {
				ready++
			}
			// The System page counts promotion outcomes and the last run.
			promotion = promotion || (s.Name == "mail promotion" && strings.Contains(s.Detail, "threads: 1 promoted") && strings.Contains(s.Detail, "last run"))
		}
		return ready == 2 && promotion
	})

	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	ws, send := dialHost(t, wctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "boiler"})
	results := map[string]string{}
	for {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v\nlogs:\n%s", err, logs)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			chatID := f["chat"].(map[string]any)["id"].(string)
			send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: "until when is my boiler contract valid?"})
		case protocol.TypeToolResult, protocol.TypeToolError:
			var ev protocol.ToolEvent
			json.Unmarshal(data, &ev)
			results[ev.Name] = ev.Status + " " + ev.Content
		case protocol.TypeTurnDone:
			if f["ok"] != true {
				t.Fatalf("turn.done = %v", f)
			}
			if r := results["mcp__wiki__wiki_search"]; !strings.HasPrefix(r, "done") || !strings.Contains(r, rep.Items[0].Note) {
				t.Fatalf("wiki_search did not find the note: %s", r)
			}
			if r := results["mcp__mail__read_message"]; !strings.HasPrefix(r, "done") || !strings.Contains(r, "BX-4471 covers annual maintenance") {
				t.Fatalf("read_message by the note's id: %s", r)
			}
			return
		}
	}
}

func TestPromotionServiceStatus(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		sum   promote.Summary
		state string
		has   []string
	}{
		{"never ran", promote.Summary{Threads: map[string]int{}}, "ok", []string{"threads: 0 promoted, 0 skipped, 0 filtered"}},
		{"clean run", promote.Summary{Threads: map[string]int{"promoted": 4, "skipped": 9, "filtered": 30},
			LastRun: &promote.Run{FinishedAt: at, Counts: promote.Counts{Candidates: 43, Promoted: 1, Unchanged: 42, ModelCalls: 1}, Rescan: "done"}},
			"ok", []string{"threads: 4 promoted, 9 skipped, 30 filtered", "last run 2026-12-02T01:00:00Z: 43 candidates — 1 promoted", "42 unchanged, 1 model calls"}},
		{"deferred", promote.Summary{Threads: map[string]int{}, LastRun: &promote.Run{FinishedAt: at, Counts: promote.Counts{Candidates: 2, Deferred: 2}}},
			"warning", []string{"2 deferred", "retried by the next run"}},
		{"rescan failed", promote.Summary{Threads: map[string]int{}, LastRun: &promote.Run{FinishedAt: at, Rescan: "failed", Error: "wiki API unavailable"}},
			"warning", []string{"wiki rescan failed: wiki API unavailable"}},
	} {
		s := promotionServiceStatus(&tc.sum)
		if s.Name != "mail promotion" || s.State != tc.state {
			t.Errorf("%s: %+v", tc.name, s)
		}
		for _, want := range tc.has {
			if !strings.Contains(s.Detail, want) {
				t.Errorf("%s: %q lacks %q", tc.name, s.Detail, want)
			}
		}
	}
}
