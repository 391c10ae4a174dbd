package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// actionConfig inserts a shell.run node "check" between the root's plan and
// assess nodes (routing on its exit code, its stdout accepted into the
// report record) and an after_activation_commit hook running hookScript.
func actionConfig(checkScript, hookScript string) func(string) string {
	return checkNodeConfig(`action: shell.run
            contract_version: 1
            config:
              script: '`+checkScript+`'
              timeout_seconds: 60
              env: {GREETING: hello}
            inputs:
              mode: {literal: strict}`, "exit_code", hookScript)
}

// checkNodeConfig inserts the action node "check" (its execution's action
// lines given) routing done results with FIELD == 0 to assess and others
// to BLOCKED.
func checkNodeConfig(execution, field, hookScript string) func(string) string {
	return func(cfg string) string {
		cfg = strings.Replace(cfg, `      assessment:
        format: markdown
`, `      assessment:
        format: markdown
      report:
        format: markdown
`, 1)
		cfg = strings.Replace(cfg, `          edges:
            done:
              target: {node: assess}
              prompt: {reference: prompts/nodes/assess.md}
            blocked:
              target: {terminal: BLOCKED}
            failed:
              target: {terminal: FAILED}
        assess:`, `          edges:
            done:
              target: {node: check}
            blocked:
              target: {terminal: BLOCKED}
            failed:
              target: {terminal: FAILED}
        check:
          execution:
            kind: action
            `+execution+`
          records:
            report: {mode: continue, gate: updated}
          output_record: report
          edges:
            done:
              cases:
                - id: clean
                  when: {field: `+field+`, op: eq, value: 0}
                  target: {node: assess}
                  prompt: {reference: prompts/nodes/assess.md}
              otherwise:
                target: {terminal: BLOCKED}
            failed:
              target: {terminal: FAILED}
        assess:`, 1)
		return strings.Replace(cfg, `      notification_recipient: plan
      entries:
        BACKLOG: {node: plan, prompt: {reference: prompts/entries/backlog.md}}`, `      notification_recipient: plan
      after_activation_commit:
        statuses: [done, blocked]
        execution:
          kind: action
          action: shell.run
          contract_version: 1
          config:
            script: '`+hookScript+`'
      entries:
        BACKLOG: {node: plan, prompt: {reference: prompts/entries/backlog.md}}`, 1)
	}
}

func TestActionNodeRoutesOnExitCodeAndHookRunsAfterDone(t *testing.T) {
	e := newEnv(t, envOptions{initEdit: actionConfig(
		`printf "greeting=%s mode=%s card=%s\r\n" "$GREETING" "$SAIVAGE_INPUT_MODE" "$SAIVAGE_CARD_ID"; echo warn >&2; exit 0`,
		`test "$(cat .saivage/cards/project/head.json | head -c 1)" = "{" && echo "$SAIVAGE_CARD_ID" > hook-ran.txt`)})
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "check, then assess"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Objective met."}),
		emit("done", "assessed", map[string]any{"verdict": "complete"}),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" || e.status("project") != "done" {
		t.Fatalf("run = %+v", sum)
	}
	// Command stdout became the report record, bytes exact (CRLF kept).
	if c, v := e.record("project", "report"); v != 1 || c != "greeting=hello mode=strict card=project\r\n" {
		t.Errorf("report = v%d %q", v, c)
	}
	// Evidence rows: entry, spawn, finish for the node and the hook.
	var inv string
	for _, typ := range []string{"action_entry", "action_spawn", "action_finish"} {
		evs := e.events(typ)
		if len(evs) != 2 || evs[0].Data["node"] != "check" || evs[1].Data["hook"] != "after_activation_commit" {
			t.Fatalf("%s rows = %+v", typ, evs)
		}
		inv = evs[0].Data["invocation"].(string)
	}
	// The accepted document embeds the exact action/output provenance.
	text := "greeting=hello mode=strict card=project\r\n"
	e.checkActionOutput("report", records.ActionOutput{Node: "check", Operation: "shell.run", ContractVersion: 1,
		Invocation: inv, Output: records.OutputCommandStdout, Bytes: len(text), SHA256: sha256Hex(text)})
	dir := filepath.Join(e.dir, ".saivage", "work", "cards", "project", "actions", inv)
	for file, want := range map[string]string{"stderr": "warn\n", "invocation.json": `"exit_code": 0`} {
		if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s = %q, %v", file, b, err)
		}
	}
	// The hook ran after the DONE publication.
	if b, err := os.ReadFile(filepath.Join(e.dir, "hook-ran.txt")); err != nil || string(b) != "project\n" {
		t.Errorf("hook output = %q, %v", b, err)
	}
	if h := e.events("hook_finished"); len(h) != 1 || h[0].Data["ok"] != true || h[0].Data["status"] != "done" {
		t.Errorf("hook_finished = %+v", h)
	}
}

func TestActionNonzeroExitRoutesAndFailingHookKeepsOutcome(t *testing.T) {
	e := newEnv(t, envOptions{initEdit: actionConfig(`echo "2 problems"; exit 3`, `echo broken >&2; exit 7`)})
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "check"}),
		emit("done", "planned", nil),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitRunEnded()
	// exit 3 took the otherwise case: BLOCKED, and the factual report stays.
	if st := e.status("project"); st != "blocked" {
		t.Fatalf("root is %s", st)
	}
	if c, v := e.record("project", "report"); v != 1 || c != "2 problems\n" {
		t.Errorf("report = v%d %q", v, c)
	}
	res := e.events("result_accepted")
	if last := res[len(res)-1]; last.Data["node"] != "check" || last.Data["data"].(map[string]any)["exit_code"] != float64(3) {
		t.Errorf("result = %+v", last)
	}
	// The hook failed; the outcome it followed is unchanged.
	h := e.events("hook_finished")
	if len(h) != 1 || h[0].Data["ok"] != false || h[0].Data["status"] != "blocked" {
		t.Errorf("hook_finished = %+v", h)
	}
	if st := e.status("project"); st != "blocked" {
		t.Errorf("root after the hook is %s", st)
	}
}

func TestActionOutputMustBeText(t *testing.T) {
	for _, tc := range []struct{ name, script, want string }{
		{"empty", `true`, "empty"},
		{"nul", `printf "a\000b"`, "NUL"},
		{"invalid utf8", `printf "\377\376"`, "UTF-8"},
		{"oversized", `head -c 1048577 /dev/zero | tr "\000" x`, "over 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{initEdit: actionConfig(tc.script, `true`)})
			e.script.Add("planner@project",
				call("write", map[string]any{"path": "record:plan", "content": "check"}),
				emit("done", "planned", nil),
			)
			if err := e.rt.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.waitRunEnded()
			if st := e.status("project"); st != "failed" {
				t.Fatalf("root is %s", st)
			}
			if _, v := e.record("project", "report"); v != 0 {
				t.Errorf("report accepted v%d", v)
			}
			fin := e.events("card_finished")
			if len(fin) != 1 || !strings.Contains(fin[0].Data["reason"].(string), tc.want) {
				t.Errorf("card_finished = %+v", fin)
			}
		})
	}
}

func TestCodeQualityActionsRouteOnLintErrors(t *testing.T) {
	mods := os.Getenv("SAIVAGE_TEST_QUALITY_MODULES")
	if mods == "" {
		t.Skip("SAIVAGE_TEST_QUALITY_MODULES is not set (.ci/run installs the analyzers)")
	}
	for _, tc := range []struct{ action, file, content, rule string }{
		{"code_quality.python_ruff", "app/main.py", "import os\n\n\ndef hello():\n    return 'hi'\n", "F401"},
		{"code_quality.javascript_eslint", "app/main.js", "export function hello() {\n  return greeting;\n}\n", "no-undef"},
		{"code_quality.typescript_eslint", "app/main.ts", "export function hello(name: any): string {\n  return `hi ${name}`;\n}\n", "@typescript-eslint/no-explicit-any"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			e := runQualityNode(t, quality.Runner{NodeModules: mods}, tc.action, tc.file, tc.content)
			// One lint error: errors != 0 takes the otherwise case.
			if st := e.status("project"); st != "blocked" {
				t.Fatalf("root is %s", st)
			}
			report, v := e.record("project", "report")
			if v != 1 || !strings.Contains(report, tc.file) || !strings.Contains(report, tc.rule) || !strings.Contains(report, "1 errors") {
				t.Errorf("report = v%d %q", v, report)
			}
			fin := e.events("action_finish")
			inv := fin[0].Data["invocation"].(string)
			dir := filepath.Join(e.dir, ".saivage", "work", "cards", "project", "actions", inv)
			rep, err := os.ReadFile(filepath.Join(dir, "report.json"))
			if err != nil || !strings.Contains(string(rep), `"rule": "`+tc.rule+`"`) {
				t.Errorf("report.json = %s, %v", rep, err)
			}
			invocation, err := os.ReadFile(filepath.Join(dir, "invocation.json"))
			if err != nil || !strings.Contains(string(invocation), `"`+tc.file+`"`) || !strings.Contains(string(invocation), `"exit_code": 0`) {
				t.Errorf("invocation.json = %s, %v", invocation, err)
			}
			e.checkActionOutput("report", records.ActionOutput{Node: "check", Operation: tc.action, ContractVersion: 1,
				Invocation: inv, Output: records.OutputReturnedText, Bytes: len(report), SHA256: sha256Hex(report)})
		})
	}
}

// runQualityNode runs a project whose check node is the code-quality
// action (its errors routing the root to blocked) with runner, over file
// (under app/) holding content, and waits for the run's end.
func runQualityNode(t *testing.T, runner quality.Runner, action, file, content string) *env {
	t.Helper()
	e := newEnv(t, envOptions{rtOpts: runtime.Options{Quality: runner},
		initEdit: checkNodeConfig("action: "+action+"\n            contract_version: 1\n            config: {paths: [app]}", "errors", "true")})
	if err := os.MkdirAll(filepath.Join(e.dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "lint"}),
		emit("done", "planned", nil),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitRunEnded()
	return e
}

// TestStopDuringActionSettlesAndWritesEvidence: Stop while a shell.run node
// runs kills its whole process group (a background child included), writes
// the cancelled invocation artifact and an action_cancelled evidence row,
// accepts no output and runs no successor or hook.
func TestStopDuringActionSettlesAndWritesEvidence(t *testing.T) {
	e := newEnv(t, envOptions{initEdit: actionConfig(
		`sleep 300 & echo $! > child.pid; echo started; wait`, `echo ran > hook-ran.txt`)})
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "check"}),
		emit("done", "planned", nil),
	)
	ctx := context.Background()
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(e.dir, "child.pid")
	e.waitFor("the action's background child", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	b, _ := os.ReadFile(pidFile)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the background child to be gone", func() bool {
		// A killed child reparented to init is reaped; kill -0 then fails.
		err := syscall.Kill(child, 0)
		if err == nil {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
			return strings.Contains(string(st), ") Z ")
		}
		return true
	})
	c := e.events("action_cancelled")
	if len(c) != 1 || c[0].Data["node"] != "check" || c[0].Data["settled"] != true ||
		c[0].Data["cause"] != "the runtime was stopped" || c[0].Data["pid"] == nil {
		t.Fatalf("action_cancelled rows = %+v", c)
	}
	inv := c[0].Data["invocation"].(string)
	fin := e.events("action_finish")
	if len(fin) != 1 || fin[0].Data["invocation"] != inv || fin[0].Data["cancelled"] != true {
		t.Errorf("action_finish rows = %+v", fin)
	}
	art, err := os.ReadFile(filepath.Join(e.dir, ".saivage", "work", "cards", "project", "actions", inv, "invocation.json"))
	if err != nil || !strings.Contains(string(art), `"cancelled": true`) || !strings.Contains(string(art), `"cause": "the runtime was stopped"`) {
		t.Errorf("invocation.json = %s, %v", art, err)
	}
	if out, err := os.ReadFile(filepath.Join(e.dir, ".saivage", "work", "cards", "project", "actions", inv, "stdout")); err != nil || string(out) != "started\n" {
		t.Errorf("stdout capture = %q, %v", out, err)
	}
	// Nothing accepted, no successor, no hook; the card stays running for
	// recovery.
	if _, v := e.record("project", "report"); v != 0 {
		t.Errorf("report accepted v%d", v)
	}
	for _, r := range e.events("result_accepted") {
		if r.Data["node"] == "check" {
			t.Errorf("check result accepted: %+v", r)
		}
	}
	if h := e.events("hook_finished"); len(h) != 0 {
		t.Errorf("hook ran: %+v", h)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "hook-ran.txt")); err == nil {
		t.Error("hook-ran.txt exists")
	}
	if st := e.status("project"); st != "running" {
		t.Errorf("root after Stop = %s", st)
	}
}

// eventTypes lists the app log's event types in order.
func (e *env) eventTypes() []string {
	e.t.Helper()
	var out []string
	for _, ev := range runtime.AppLogEvents(e.t, e.p, "") {
		out = append(out, ev.Type)
	}
	return out
}

// TestFailingHookAfterFailedKeepsOutcome: a FAILED publication (the
// action's output could not be accepted) dispatches a hook declared for
// failed after the outcome is published and before the run ends; the hook
// failing leaves the card failed with its original reason.
func TestFailingHookAfterFailedKeepsOutcome(t *testing.T) {
	edit := actionConfig(`printf "\377"`, `cp .saivage/cards/project/head.json hook-saw-head.json; echo broken >&2; exit 9`)
	e := newEnv(t, envOptions{initEdit: func(cfg string) string {
		return strings.Replace(edit(cfg), "statuses: [done, blocked]", "statuses: [failed]", 1)
	}})
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "check"}),
		emit("done", "planned", nil),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "failed" {
		t.Fatalf("run = %+v", sum)
	}
	// The hook saw the card head that publishes FAILED: the final one.
	saw, err := os.ReadFile(filepath.Join(e.dir, "hook-saw-head.json"))
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if final, err := os.ReadFile(filepath.Join(e.dir, ".saivage", "cards", "project", "head.json")); err != nil || string(final) != string(saw) {
		t.Errorf("the hook saw head %s, the final head is %s (%v)", saw, final, err)
	}
	h := e.events("hook_finished")
	if len(h) != 1 || h[0].Data["ok"] != false || h[0].Data["status"] != "failed" || h[0].Data["data"].(map[string]any)["exit_code"] != float64(9) {
		t.Fatalf("hook_finished = %+v", h)
	}
	// The outcome and its reason are the ones published before the hook.
	if st := e.status("project"); st != "failed" {
		t.Errorf("root after the hook is %s", st)
	}
	fin := e.events("card_finished")
	if len(fin) != 1 || fin[0].Data["status"] != "failed" || !strings.Contains(fin[0].Data["reason"].(string), "UTF-8") {
		t.Errorf("card_finished = %+v", fin)
	}
	if _, v := e.record("project", "report"); v != 0 {
		t.Errorf("report accepted v%d", v)
	}
	// Order: the node's finish, the hook's rows, the outcome's delivery
	// (card_finished), then the run's end.
	var order []string
	for _, typ := range e.eventTypes() {
		switch typ {
		case "action_finish", "card_finished", "hook_finished", "run_ended":
			order = append(order, typ)
		}
	}
	if want := []string{"action_finish", "action_finish", "hook_finished", "card_finished", "run_ended"}; !slices.Equal(order, want) {
		t.Errorf("event order = %v, want %v", order, want)
	}
}

// checkActionOutput checks the root's record name: its latest accepted
// document carries want, and current, history and the exact version all
// read the same content.
func (e *env) checkActionOutput(name string, want records.ActionOutput) {
	e.t.Helper()
	ref, err := e.p.Cards.RecordRef(context.Background(), "project", name)
	if err != nil {
		e.t.Fatal(err)
	}
	rs := e.p.Cards.Records()
	cur, err := rs.Current(ref)
	if err != nil {
		e.t.Fatal(err)
	}
	a, err := rs.Latest(ref, cur.Head)
	if err != nil || a.ActionOutput == nil || *a.ActionOutput != want || a.Author != "action-output:"+want.Node+"/"+want.Invocation {
		e.t.Fatalf("latest %s = %+v (provenance %+v), %v; want %+v", name, a, a.ActionOutput, err, want)
	}
	hist, err := rs.History(ref)
	if err != nil || len(hist) == 0 || hist[len(hist)-1].Content != cur.Content || cur.Content != a.Content || sha256Hex(a.Content) != want.SHA256 {
		e.t.Errorf("history/current of %s disagree: %+v, %q, %v", name, hist, cur.Content, err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
