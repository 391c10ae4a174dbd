package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/browsertest"
	"github.com/agentstack/agentstack/llm/llmtest"
	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

var screenshotDir = flag.String("screenshots", "", "write cockpit screenshots (PNG) into this directory, e.g. ../../docs/screenshots")

// browser is one headless Chromium session (Debian's chromium, the flags
// CI uses, a fresh profile).
type browser struct {
	t    *testing.T
	ctx  context.Context
	page *browsertest.Browser
}

// newBrowser starts Chromium (the CI's flags, a fresh profile) with a
// viewport of width×height; it skips the test when none is installed.
func newBrowser(t *testing.T, width, height int64, mobile bool) *browser {
	t.Helper()
	page := browsertest.Start(t, browsertest.Options{Width: width, Height: height, Mobile: mobile})
	return &browser{t: t, ctx: page.Ctx, page: page}
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v%s", err, b.debug())
	}
}

// wait polls a JavaScript condition until it is truthy.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(40*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v%s", what, expr, err, b.debug())
	}
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v%s", expr, err, b.debug())
	}
	return v
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.wait("clickable "+sel, fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el || el.disabled) return false; el.click(); return true })()`, sel))
}

func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	b.wait("input "+sel, fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.value = %q; return true })()`, sel, value))
}

func (b *browser) debug() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + ' conn=' + document.documentElement.dataset.conn + ' runtime=' + document.documentElement.dataset.runtime + '\n' + document.getElementById('main').innerText.slice(0, 1500)`))
	return fmt.Sprintf("\n--- page ---\n%s\n--- exceptions: %v", text, b.page.Exceptions())
}

func (b *browser) noExceptions() {
	b.t.Helper()
	if ex := b.page.Exceptions(); len(ex) > 0 {
		b.t.Errorf("the page threw: %v", ex)
	}
}

// shot writes a full-page screenshot when -screenshots is set.
func (b *browser) shot(name string) {
	b.t.Helper()
	if *screenshotDir == "" {
		return
	}
	b.wait("two frames", `new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(*screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// servedProject is a real saivage start (in this process) over an
// initialised Git project whose provider is the scripted test double.
type servedProject struct {
	api
	dir    string
	vars   map[string]string
	script *rtt.Script
	cancel context.CancelFunc
	done   chan int
	errb   *syncBuffer
	out    *syncBuffer
	code   *int
}

func startServedProject(t *testing.T, token string) *servedProject {
	t.Helper()
	return startServed(t, token, serveOptions{objective: "Greeting files in the repository."})
}

// serveOptions vary startServed: the init objective ("" initialises
// without one), extra saivage start arguments and environment.
type serveOptions struct {
	objective string
	// template is the init template; classic-git gets a clean checkout of
	// main with one commit first.
	template  string
	startArgs []string
	vars      map[string]string
	// configEdit rewrites config.yaml before the server starts.
	configEdit func(string) string
}

func startServed(t *testing.T, token string, so serveOptions) *servedProject {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	if so.template == "" {
		if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
	}
	srv := llmtest.NewServer(t)
	script := rtt.NewScript(t, srv)
	port := freePort(t)
	vars := map[string]string{"SAIVAGE_ROOT": dir, "SAIVAGE_AUTH_TOKEN": token, "SAIVAGE_PORT": port,
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	for k, v := range so.vars {
		vars[k] = v
	}
	initArgs := []string{"init"}
	if so.template != "" {
		gitRepo(t, dir)
		initArgs = append(initArgs, "--template", so.template)
	}
	if so.objective != "" {
		initArgs = append(initArgs, "--objective", so.objective)
	}
	if code, _, errs := runCLI(t, vars, initArgs...); code != 0 {
		t.Fatal(errs)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	b = bytes.ReplaceAll(b, []byte("http://127.0.0.1:4000/v1"), []byte(srv.URL))
	if so.configEdit != nil {
		b = []byte(so.configEdit(string(b)))
	}
	os.WriteFile(cfgPath, b, 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	p := &servedProject{api: api{t: t, url: "http://127.0.0.1:" + port, token: token}, dir: dir, vars: vars, script: script,
		cancel: cancel, done: make(chan int, 1), errb: &syncBuffer{}}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	p.out = &out
	go func() {
		p.done <- run(ctx, append([]string{"start"}, so.startArgs...), &env{stdout: &out, stderr: p.errb, lookupEnv: lookup})
	}()
	t.Cleanup(func() { p.stop() })
	poll(t, "the server", func() bool {
		select {
		case code := <-p.done:
			t.Fatalf("start exited with %d: %s %s", code, out.String(), p.errb.String())
		default:
		}
		resp, err := http.Get(p.url + "/health/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200 && strings.Contains(out.String(), "saivage serving")
	})
	return p
}

// stop interrupts saivage start and returns its exit status.
func (p *servedProject) stop() int {
	if p.code == nil {
		p.cancel()
		code := -1
		select {
		case code = <-p.done:
		case <-time.After(60 * time.Second):
			p.t.Error("saivage start did not stop")
		}
		p.code = &code
	}
	return *p.code
}

func (p *servedProject) status() string {
	var st struct{ Status string }
	p.get("/api/runtime/status", &st)
	return st.Status
}

// signIn opens the cockpit and signs in with the operator token, and
// returns how long the first tree level took to appear (performance clock).
func (b *browser) signIn(url, token string) float64 {
	b.t.Helper()
	b.do(chromedp.Navigate(url + "/"))
	b.wait("the sign-in dialog", `document.getElementById('signin').open`)
	b.setValue("#token-input", token)
	b.click("#signin-form button[type=submit]")
	b.wait("the root of the tree", `!!document.querySelector('li[data-card="project"] .tree-children:not([hidden])')`)
	return eval[float64](b, `performance.now()`)
}

// TestCockpitBrowser drives the cockpit of a real saivage start through a
// multi-card run: the Analyst panel creates a goal (the tree grows live),
// a busy Analyst restores the draft, Run/Pause/Stop/Run from the page
// change the runtime, a card's detail follows the run live, the five
// facets show the run's evidence, Files refuses a secret and System and
// Debug render.
func TestCockpitBrowser(t *testing.T) {
	p := startServedProject(t, "cockpit-token-0123456789")
	os.WriteFile(filepath.Join(p.dir, ".env"), []byte("DEPLOY_KEY=sk-do-not-show-0123456789abcdef\n"), 0o600)
	hold := make(chan struct{})
	executorHold := make(chan struct{})
	stopHold := make(chan struct{})
	t.Cleanup(func() { close(stopHold) })
	p.script.Add("analyst",
		rtt.Call("create_card", map[string]any{"parent_id": "project", "type": "goal", "title": "Greeting files",
			"records": map[string]string{"brief": "Create hello.txt in the repository."}}),
		rtt.Text("Created goal **project.a**."),
		llmtest.Reply{Content: "Still thinking about it.", Hold: hold},
	)
	p.script.Add("planner@project",
		// The first Run is stopped from the page while this call streams.
		llmtest.Reply{Content: "Looking at the project first.", Hold: stopHold},
		rtt.Call("activate_card", map[string]any{"card_id": "project.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "project.a: greeting files."}),
		rtt.Emit("done", "all goals done", nil),
		rtt.Call("write", map[string]any{"path": "record:assessment", "content": "The objective is met."}),
		rtt.Emit("done", "objective met", map[string]any{"verdict": "complete"}),
	)
	p.script.Add("planner@project.a",
		rtt.Call("create_card", map[string]any{"title": "hello.txt", "records": map[string]string{"brief": "Write hello.txt with 'hello'."}}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "1. hello.txt"}),
		rtt.Emit("done", "done", nil),
	)
	p.script.Add("reviewer@project.a", rtt.Emit("done", "goal accepted", map[string]any{"verdict": "approved"}))
	p.script.Add("executor@project.a.a",
		llmtest.Reply{Content: "Writing the file.", ToolCalls: rtt.Call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}).ToolCalls, Hold: executorHold},
		rtt.Call("run_command", map[string]any{"command": "grep -c hello hello.txt && echo verified-by-grep"}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "hello.txt written; **grep** confirms it."}),
		rtt.Emit("done", "hello.txt done", nil),
	)
	p.script.Add("reviewer@project.a.a",
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Approved."}),
		rtt.Emit("done", "approved", map[string]any{"verdict": "approved"}),
	)

	b := newBrowser(t, 1280, 900, false)
	b.signIn(p.url, p.token)
	// Measured, not asserted: a load with an empty HTTP cache (the token
	// is kept) until the root's children are shown.
	if _, err := chromedp.Call(b.ctx, network.ClearBrowserCache, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	// The page records the moment the first row of the root's level is in
	// the DOM (polling from the test would add its own round trips).
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `new MutationObserver((_, obs) => {
		if (document.querySelector('li[data-card="project"] .tree-children:not([hidden]) li')) { window.__treeAt = performance.now(); obs.disconnect(); }
	}).observe(document, { subtree: true, childList: true, attributes: true })`}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate(p.url + "/"))
	b.wait("the root of the tree", `!!document.querySelector('li[data-card="project"] .tree-children:not([hidden]) li') && window.__treeAt > 0`)
	t.Logf("page load to an interactive tree: %.0f ms after navigation start (observed by the test at %.0f ms); %s",
		eval[float64](b, `window.__treeAt`), eval[float64](b, `performance.now()`),
		eval[string](b, `performance.getEntriesByType('resource').map((e) => e.name.replace(location.origin, '') + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration)).join(', ')`))
	// boot.js started the home page's first reads before the modules
	// loaded, and the views used each of them (none fetched twice).
	if !eval[bool](b, `window.saivagePrefetch instanceof Map && window.saivagePrefetch.size === 0`) {
		t.Errorf("the prefetched first reads were not all used: %s", b.debug())
	}
	b.wait("the live socket", `document.documentElement.dataset.conn === 'live'`)
	b.wait("the stopped runtime", `document.documentElement.dataset.runtime === 'stopped'`)
	if !eval[bool](b, `document.querySelector('[data-control=run]').disabled === false && document.querySelector('[data-control=pause]').disabled`) {
		t.Errorf("controls of a stopped runtime: %s", b.debug())
	}

	// The Analyst creates a goal: the tree grows without a reload.
	b.setValue("#analyst-input", "Create a goal for the greeting files.")
	b.click(".composer button[type=submit]")
	b.wait("the new goal in the tree", `!!document.querySelector('li[data-card="project.a"]')`)
	b.click(`li[data-card="project.a"] .twisty`)
	b.wait("the goal's empty level", `(document.querySelector('li[data-card="project.a"] .tree-children')?.textContent || '').includes('No children')`)
	b.wait("the Analyst's answer", `[...document.querySelectorAll('.analyst .msg.assistant')].some((m) => m.textContent.includes('Created goal'))`)
	if !eval[bool](b, `!!document.querySelector('.analyst details.tool[data-tool=create_card]')`) {
		t.Errorf("the create_card call is not rendered: %s", b.debug())
	}
	// A held turn, then a second submission: 409 busy restores the draft.
	b.setValue("#analyst-input", "Anything else?")
	b.click(".composer button[type=submit]")
	b.wait("the busy Analyst", `document.querySelector('.analyst').dataset.busy === 'true'`)
	b.setValue("#analyst-input", "Are you there?")
	b.click(".composer button[type=submit]")
	b.wait("the busy refusal", `document.querySelector('.analyst').dataset.refused === 'Busy'`)
	if got := eval[string](b, `document.getElementById('analyst-input').value`); got != "Are you there?" {
		t.Errorf("draft after 409 = %q", got)
	}
	if eval[bool](b, `[...document.querySelectorAll('.analyst .optimistic')].some((m) => m.textContent.includes('Are you there?'))`) {
		t.Error("the refused message stayed in the transcript")
	}
	close(hold)
	b.wait("the Analyst idle", `document.querySelector('.analyst').dataset.busy === 'false'`)
	b.setValue("#analyst-input", "")

	// Run, then Stop from the page while the root Planner's call streams.
	b.click("[data-control=run]")
	b.wait("running", `document.documentElement.dataset.runtime === 'running'`)
	poll(t, "the root Planner's held call", func() bool { return p.script.Count("planner@project") == 1 })
	b.click("[data-control=stop]")
	b.wait("stopped", `document.documentElement.dataset.runtime === 'stopped'`)
	if s := p.status(); s != "stopped" {
		t.Fatalf("runtime after Stop = %s", s)
	}

	// A new Run from the page recovers the root; the executor's first call
	// is held, so Pause goes through pausing to paused.
	b.click("[data-control=run]")
	b.wait("the task in the tree", `!!document.querySelector('li[data-card="project.a.a"]')`)
	poll(t, "the executor's held call", func() bool { return p.script.Count("executor@project.a.a") == 1 })
	b.shot("cockpit-home-desktop")
	b.click("[data-control=pause]")
	b.wait("pausing", `['pausing','paused'].includes(document.documentElement.dataset.runtime)`)
	close(executorHold)
	b.wait("paused", `document.documentElement.dataset.runtime === 'paused'`)
	if s := p.status(); s != "paused" {
		t.Fatalf("runtime after Pause = %s", s)
	}
	// Resume from the task's page and watch its detail update live.
	b.do(chromedp.Navigate(p.url + "/#/card/project.a.a"))
	b.wait("the card view", `!!document.querySelector('.card-view[data-card="project.a.a"] .card-head h1 .badge')`)
	before := eval[string](b, `document.querySelector('.card-head h1 .badge').textContent`)
	b.click(".card-view [data-control=resume]")
	b.wait("the task done, live", `document.querySelector('.card-head h1 .badge').textContent === 'done'`)
	t.Logf("task status went %s → done without a reload", before)
	poll(t, "the Run to end", func() bool { return p.status() == "stopped" })

	// The five facets.
	b.click(`.tabs a[data-facet=conversations]`)
	b.wait("the executor's conversation", `!!document.querySelector('.conversation details.tool[data-tool=run_command]')`)
	b.wait("the run_command result", `document.querySelector('.conversation details.tool[data-tool=run_command] .tool-state').textContent === 'returned'`)
	b.shot("cockpit-card-conversations-desktop")
	b.click(`.tabs a[data-facet=executions]`)
	b.wait("execution rows", `document.querySelectorAll('.executions tr[data-invocation]').length >= 4`)
	b.wait("the run_command row", `(() => { const r = [...document.querySelectorAll('.executions tr[data-invocation]')].find((x) => x.textContent.includes('run_command')); if (!r) return false; r.querySelector('button').click(); return true })()`)
	b.click(`.execution-detail button[data-preview=output]`)
	b.wait("the command output", `(document.querySelector('.execution-detail .file-text')?.textContent || '').includes('verified-by-grep')`)
	b.shot("cockpit-card-executions-desktop")
	b.click(`.tabs a[data-facet=records]`)
	b.click(`.records button[data-record=summary]`)
	b.wait("the summary record", `(document.querySelector('.record-text')?.textContent || '').includes('grep** confirms')`)
	b.wait("the versions", `document.querySelectorAll('.records .versions li').length >= 1`)
	b.shot("cockpit-card-records-desktop")
	b.click(`.tabs a[data-facet=evidence]`)
	b.wait("the exchange", `(document.querySelector('.exchange')?.textContent || '').includes('Provider / model')`)
	b.click(`.tabs a[data-facet=overview]`)
	b.wait("the overview", `(document.querySelector('.overview')?.textContent || '').includes('summary')`)
	b.shot("cockpit-card-overview-desktop")

	// The session route and its instructions disclosure.
	b.do(chromedp.Navigate(p.url + "/#/session/" + "agent%3Aexecutor%3Aproject.a.a"))
	b.wait("the session", `!!document.querySelector('.session-view details.tool')`)
	b.click(`.instructions summary`)
	b.wait("the instructions", `document.querySelectorAll('.instructions .binding').length >= 1`)

	// Files: the secret is refused, a repository file previews.
	b.do(chromedp.Navigate(p.url + "/#/files"))
	b.wait("the listing", `!!document.querySelector('.files-view tr[data-path="hello.txt"]')`)
	if eval[bool](b, `!!document.querySelector('.files-view tr[data-path=".env"], .files-view tr[data-path=".saivage"]')`) {
		t.Error("the listing shows private entries")
	}
	b.setValue(`.files-view input[name=p]`, ".env")
	b.click(`.files-view form button[type=submit]`)
	b.wait("the refusal", `document.querySelector('.file-preview .error')?.dataset.code === 'PrivatePath'`)
	if eval[bool](b, `document.body.innerText.includes('sk-do-not-show')`) {
		t.Error("the secret reached the page")
	}
	b.wait("hello.txt preview", `(() => { const r = document.querySelector('.files-view tr[data-path="hello.txt"] button'); r.click(); return true })()`)
	b.wait("the preview", `(document.querySelector('.file-preview .file-text')?.textContent || '') === 'hello\n'`)

	// System and Debug.
	b.do(chromedp.Navigate(p.url + "/#/system"))
	b.wait("events", `document.querySelectorAll('.system-view tbody tr').length > 5`)
	b.shot("cockpit-system-desktop")
	b.click(`.tabs a[data-section=doctor]`)
	b.click(`.system-view button.primary`)
	b.wait("the doctor", `(document.querySelector('.system-view p.ok')?.textContent || '').includes('Healthy')`)
	b.do(chromedp.Navigate(p.url + "/#/debug"))
	b.wait("the graphs", `document.querySelectorAll('.debug-view svg.graph .state').length > 5`)
	b.shot("cockpit-debug-desktop")
	b.noExceptions()

	// 360 px: the same pages fit the width.
	m := newBrowser(t, 360, 760, true)
	m.signIn(p.url, p.token)
	for _, page := range []struct{ hash, ready, shot string }{
		{"#/", `!!document.querySelector('li[data-card="project.a.a"]') || (() => { const t = document.querySelector('li[data-card="project.a"] .twisty'); if (t && t.getAttribute('aria-expanded') === 'false') t.click(); return false })()`, "cockpit-home-mobile"},
		{"#/card/project.a.a/conversations", `!!document.querySelector('.conversation details.tool')`, "cockpit-card-mobile"},
		{"#/system", `document.querySelectorAll('.system-view tbody tr').length > 5`, "cockpit-system-mobile"},
	} {
		m.do(chromedp.Navigate(p.url + "/" + page.hash))
		m.wait(page.shot, page.ready)
		if w := eval[float64](m, `document.documentElement.scrollWidth`); w > 362 {
			t.Errorf("%s overflows 360 px: scrollWidth %v", page.hash, w)
		}
		m.shot(page.shot)
	}
	m.noExceptions()
}

// TestCockpitShellSize records the shell's size (measured, not asserted
// beyond the budget the issue states).
func TestCockpitShellSize(t *testing.T) {
	p := startServedProject(t, "cockpit-token-0123456789")
	os.WriteFile(filepath.Join(p.dir, ".env"), []byte("DEPLOY_KEY=sk-do-not-show-0123456789abcdef\n"), 0o600)
	total := 0
	for _, path := range []string{"/", "/contracts.js", "/assets/app.css", "/assets/icon.svg", "/assets/js/boot.js", "/assets/js/app.js", "/assets/js/api.js", "/assets/js/dom.js",
		"/assets/js/live.js", "/assets/js/home.js", "/assets/js/card.js", "/assets/js/system.js", "/assets/js/transcript.js"} {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d", path, resp.StatusCode)
		}
		total += buf.Len()
	}
	t.Logf("cockpit shell: %d bytes uncompressed (%s KiB)", total, strconv.FormatFloat(float64(total)/1024, 'f', 1, 64))
	if total > 300<<10 {
		t.Errorf("the shell is %d bytes, over the 300 KB budget", total)
	}
	if code := p.do("GET", "/nope", "", nil); code != 404 {
		t.Errorf("unknown route = %d", code)
	}
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") {
		t.Errorf("url %s", p.url)
	}
}

// TestCockpitLiveLatency measures (logs, never asserts) how long a card
// publication takes to become visible on a subscribed page: from the
// card_created event the server logs right after publishing, to the
// moment the new row appears in the tree (same machine clock).
func TestCockpitLiveLatency(t *testing.T) {
	p := startServedProject(t, "cockpit-token-0123456789")
	os.WriteFile(filepath.Join(p.dir, ".env"), []byte("DEPLOY_KEY=sk-do-not-show-0123456789abcdef\n"), 0o600)
	const n = 20
	for i := range n {
		p.script.Add("analyst",
			rtt.Call("create_card", map[string]any{"parent_id": "project", "type": "goal", "title": fmt.Sprintf("Goal %d", i),
				"records": map[string]string{"brief": "Latency probe."}}),
			rtt.Text("Created."))
	}
	b := newBrowser(t, 1280, 900, false)
	// A wrapper the test uses to cut the page's sockets and hold it offline.
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
		const Real = window.WebSocket; window.__sockets = []; window.__block = false;
		window.WebSocket = function (url, protocols) {
			const ws = new Real(window.__block ? url.replace('ticket=', 'ticket=refused-') : url, protocols);
			window.__sockets.push(ws); return ws; };
		window.WebSocket.OPEN = Real.OPEN; window.WebSocket.prototype = Real.prototype; })()`}); err != nil {
		t.Fatal(err)
	}
	b.signIn(p.url, p.token)
	b.wait("the live socket", `document.documentElement.dataset.conn === 'live'`)
	eval[bool](b, `(() => { window.__seen = {}; new MutationObserver(() => document.querySelectorAll('li[data-card]').forEach((li) => { window.__seen[li.dataset.card] ??= Date.now(); })).observe(document.body, { subtree: true, childList: true }); return true })()`)
	for range n {
		var out struct{ Result struct{ Error string } }
		if code := p.do("POST", "/api/chat", `{"message":"Create one more goal.","wait":true}`, &out); code != 200 || out.Result.Error != "" {
			t.Fatalf("chat = %d %+v", code, out)
		}
	}
	b.wait("every goal", fmt.Sprintf(`Object.keys(window.__seen).length >= %d`, n+1))
	seen := eval[map[string]float64](b, `window.__seen`)
	var evs struct {
		Events []struct {
			Ts   time.Time
			Data map[string]any
		}
	}
	p.get("/api/events?type=card_created&limit=1000", &evs)
	var lat []float64
	for _, e := range evs.Events {
		id, _ := e.Data["card"].(string)
		if at, ok := seen[id]; ok {
			lat = append(lat, at-float64(e.Ts.UnixMilli()))
		}
	}
	if len(lat) != n {
		t.Fatalf("matched %d of %d publications", len(lat), n)
	}
	if testing.Verbose() {
		reqs := eval[[][]float64](b, `performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/cards/project/children')).map((e) => [performance.timeOrigin + e.startTime, e.duration, e.requestStart - e.startTime, e.responseStart - e.requestStart])`)
		for _, e := range evs.Events {
			ts := float64(e.Ts.UnixMilli())
			for _, r := range reqs {
				if r[0] >= ts {
					t.Logf("%v: children request %.0f ms after publication, took %.0f ms (queued %.0f, server %.0f); visible at +%.0f",
						e.Data["card"], r[0]-ts, r[1], r[2], r[3], seen[e.Data["card"].(string)]-ts)
					break
				}
			}
		}
	}
	slices.Sort(lat)
	t.Logf("publication → visible row, %d samples: p50 %.0f ms, p95 %.0f ms, max %.0f ms", n, lat[n/2], lat[n*95/100-1], lat[n-1])

	// Reconnect: a publication while the page is offline sends it no hint;
	// the reconnect refetches what the page shows.
	eval[bool](b, `(() => { window.__block = true; window.__sockets.forEach((s) => s.close()); return true })()`)
	b.wait("the socket down", `document.documentElement.dataset.conn !== 'live'`)
	p.script.Add("analyst",
		rtt.Call("create_card", map[string]any{"parent_id": "project", "type": "goal", "title": "Made while offline"}),
		rtt.Text("Created."))
	if code := p.do("POST", "/api/chat", `{"message":"One more while you are away.","wait":true}`, nil); code != 200 {
		t.Fatalf("chat = %d", code)
	}
	time.Sleep(500 * time.Millisecond) // a hint, had one been sent, would have arrived
	if eval[bool](b, `[...document.querySelectorAll('li[data-card] .card-title')].some((e) => e.textContent === 'Made while offline')`) {
		t.Fatal("the page saw the offline publication without a socket")
	}
	eval[bool](b, `(() => { window.__block = false; return true })()`)
	b.wait("the socket back", `document.documentElement.dataset.conn === 'live'`)
	b.wait("the refetch after reconnect", `[...document.querySelectorAll('li[data-card] .card-title')].some((e) => e.textContent === 'Made while offline')`)
	b.noExceptions()
}

// TestCockpitShowsSourceFacts: on a classic-git project the card detail
// shows each card's source facts (private ref redacted, commit ids) and
// the delivered commit, which is the delivery branch's commit naming it.
func TestCockpitShowsSourceFacts(t *testing.T) {
	p := startServed(t, "cockpit-token-0123456789", serveOptions{objective: "A greeting.", template: "classic-git"})
	p.script.Add("planner@project",
		rtt.Call("create_card", map[string]any{"title": "Greeting", "records": map[string]string{"brief": "hello.txt"}}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "One goal."}),
		rtt.Emit("done", "planned", nil),
		rtt.Call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		rtt.Emit("done", "met", map[string]any{"verdict": "complete"}),
	)
	p.script.Add("planner@project.a",
		rtt.Call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello.txt"}}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "1. hello.txt"}),
		rtt.Emit("done", "done", nil),
	)
	p.script.Add("reviewer@project.a", rtt.Emit("done", "met", map[string]any{"verdict": "approved"}))
	p.script.Add("executor@project.a.a",
		rtt.Call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
		rtt.Call("checkpoint_source", map[string]any{}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "Wrote hello.txt."}),
		rtt.Emit("done", "wrote", nil),
	)
	p.script.Add("reviewer@project.a.a",
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Good."}),
		rtt.Emit("done", "approved", map[string]any{"verdict": "approved"}),
	)
	if code := p.do("POST", "/api/runtime/run", "", nil); code != 200 && code != 202 {
		t.Fatalf("run: %d", code)
	}
	poll(t, "the Run to end", func() bool { return p.status() == "stopped" })
	out, err := exec.Command("git", "-C", p.dir, "log", "-1", "--format=%H %s", "main").Output()
	if err != nil || !strings.Contains(string(out), "project.a.a") {
		t.Fatalf("main: %s %v", out, err)
	}
	delivered := strings.Fields(string(out))[0]
	b := newBrowser(t, 1280, 900, false)
	b.signIn(p.url, "cockpit-token-0123456789")
	b.do(chromedp.Navigate(p.url + "/#/card/project.a.a"))
	b.wait("the source facts", `!!document.querySelector('section.source dd[data-fact=delivered] code')`)
	got := eval[string](b, `document.querySelector('section.source dd[data-fact=delivered] code').title`)
	if got != delivered {
		t.Errorf("delivered commit shown = %q, main = %q", got, delivered)
	}
	text := eval[string](b, `document.querySelector('section.source').innerText`)
	if !strings.Contains(text, "[private ref]") || strings.Contains(text, "refs/saivage") || !strings.Contains(text, delivered[:12]) {
		t.Errorf("source section = %q", text)
	}
	b.do(chromedp.Navigate(p.url + "/#/card/project"))
	b.wait("the root's source facts", `!!document.querySelector('.card-view[data-card="project"] section.source')`)
	if root := eval[string](b, `document.querySelector('section.source').innerText`); !strings.Contains(root, "main") {
		t.Errorf("root source section = %q", root)
	}
	b.shot("cockpit-card-source")
	b.noExceptions()
}
