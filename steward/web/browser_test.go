package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/searchprep"
	"github.com/agentstack/agentstack/steward/watch"
)

// The browser tests drive headless Chromium against a real host with the
// scripted provider: one desktop session and one 360 px mobile session,
// each a sequence of steps over the same page, waiting on DOM conditions.

// send types text into the composer and presses Enter.
func (b *browser) send(text string) {
	b.t.Helper()
	b.do(chromedp.WaitEnabled("#composer-input"), chromedp.Focus("#composer-input"), chromedp.SendKeys("#composer-input", text), enter(false))
}

// enter presses Enter (with Shift) as a keyboard does: one keyDown carrying
// the text, which the page may cancel. (SendKeys sends the text in a
// separate char event that a cancelled keydown does not stop.)
func enter(shift bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		p := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter", Text: "\r", UnmodifiedText: "\r",
			WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
		if shift {
			p.Modifiers = 8
		}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
			return err
		}
		p.Type, p.Text, p.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p)
		return err
	})
}

// click clicks the button (or link) with this exact visible text inside scope (a CSS selector).
func (b *browser) click(scope, text string) {
	b.t.Helper()
	xp := fmt.Sprintf(`//*[self::button or self::a][normalize-space()=%s]`, xpathString(text))
	if scope != "" {
		b.wait(fmt.Sprintf(`document.querySelector(%s)`, js(scope)))
		id := eval[string](b, fmt.Sprintf(`(() => { const el = document.querySelector(%s); el.dataset.scope = el.dataset.scope || String(Math.random()).slice(2); return el.dataset.scope })()`, js(scope)))
		xp = fmt.Sprintf(`//*[@data-scope=%s]`, xpathString(id)) + xp
	}
	b.do(chromedp.Click(xp, chromedp.NodeVisible))
}

func xpathString(s string) string {
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	return `"` + s + `"`
}

// pendingApproval waits for a pending approval card and returns its id.
func (b *browser) pendingApproval() string {
	b.t.Helper()
	b.wait(`document.querySelector('.approval-card[data-state="pending"]')`)
	return eval[string](b, `document.querySelector('.approval-card[data-state="pending"]').dataset.approvalId`)
}

func card(id string) string { return fmt.Sprintf(`article[data-approval-id=%s]`, js(id)) }

// lastAssistant waits until the newest assistant message is final and contains want.
func (b *browser) lastAssistant(want string) {
	b.t.Helper()
	b.wait(fmt.Sprintf(`(() => { const m = [...document.querySelectorAll('.msg.assistant')].pop();
		return m && !m.classList.contains('streaming') && m.textContent.includes(%s) && document.querySelector('.chat-view').dataset.running === '0' })()`, js(want)))
}

// unlabelled lists visible controls without an accessible name.
const unlabelled = `[...document.querySelectorAll('button, input, textarea, select, a[href]')]
	.filter((el) => el.type === 'file' || el.getClientRects().length > 0)
	.filter((el) => !(el.getAttribute('aria-label') || (el.labels && el.labels.length) || el.textContent.trim() || el.title ||
		el.getAttribute('aria-labelledby') || (el.tagName === 'INPUT' && el.placeholder)))
	.map((el) => el.outerHTML.slice(0, 120))`

func (b *browser) allLabelled(page string) {
	b.t.Helper()
	if bad := eval[[]string](b, unlabelled); len(bad) > 0 {
		b.t.Errorf("%s: controls without an accessible name: %v", page, bad)
	}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return m
}

func TestBrowserDesktop(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)

	// The time to a usable chat is measured (docs/benchmarks.md), never
	// asserted: here only that the app marks the moment it becomes usable.
	t.Run("pairs itself on loopback and marks when it is usable", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url()))
		b.wait(`document.documentElement.dataset.ready === '1'`)
		if tok := eval[string](b, `localStorage.getItem('steward.token')`); tok != hostToken {
			t.Errorf("stored token = %q, want the host's", tok)
		}
		if u := eval[string](b, `location.href`); strings.Contains(u, hostToken) {
			t.Errorf("the token is in the URL %s", u)
		}
		ready := eval[float64](b, `performance.getEntriesByName('steward-ready')[0].startTime`)
		dcl := eval[float64](b, `performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd`)
		t.Logf("load to usable chat (empty cache, loopback): %.0f ms (DOMContentLoaded %.0f ms)", ready, dcl)
		if ready <= 0 || dcl <= 0 {
			t.Errorf("steward-ready mark at %.0f ms, DOMContentLoaded at %.0f ms: want both recorded", ready, dcl)
		}
		if eval[bool](b, `getComputedStyle(document.getElementById('bottom-nav')).display !== 'none'`) {
			t.Error("the bottom navigation shows on a desktop")
		}
		b.allLabelled("empty chat")
	})

	t.Run("streams the answer; Enter sends, Shift+Enter adds a line", func(t *testing.T) {
		b.t = t
		hold := h.holdNext()
		b.do(chromedp.Focus("#composer-input"), chromedp.SendKeys("#composer-input", "Hello there"), enter(true),
			chromedp.SendKeys("#composer-input", "second line"), enter(false))
		// The first chunk is on screen while the model is still answering.
		b.wait(`document.querySelector('.msg.assistant.streaming .bubble')?.textContent.length > 0`)
		partial := eval[string](b, `document.querySelector('.msg.assistant.streaming .bubble').textContent`)
		if !strings.HasPrefix("Streaming **works**, and you said: Hello there", partial) {
			t.Errorf("streamed text %q is not a prefix of the answer", partial)
		}
		close(hold)
		b.lastAssistant("you said: Hello there")
		if got := eval[string](b, `document.querySelector('.msg.assistant strong')?.textContent`); got != "works" {
			t.Errorf("Markdown bold rendered as %q", got)
		}
		if got := eval[string](b, `document.querySelector('.msg.user .bubble').textContent`); got != "Hello there\nsecond line" {
			t.Errorf("user message = %q, want two lines", got)
		}
		if got := eval[string](b, `location.hash`); !strings.HasPrefix(got, "#/c/chat_") {
			t.Errorf("location = %q, want the new chat", got)
		}
		b.wait(`document.querySelector('.chat-link.current')?.textContent === 'Hello there'`)
	})

	t.Run("tool cards, rich results", func(t *testing.T) {
		b.t = t
		b.send("search mail for the invoice")
		b.lastAssistant("Done: 1 message")
		sel := `.tool-card[data-status="done"]`
		if eval[bool](b, `document.querySelector('.tool-card details').open`) {
			t.Error("a tool card is expanded by default")
		}
		if got := eval[string](b, `document.querySelector('.tool-card .rich .rich-title').textContent`); !strings.Contains(got, `Invoice <img src=x onerror=`) {
			t.Errorf("rich email card title = %q", got)
		}
		b.do(chromedp.Click(sel + " summary"))
		b.wait(`document.querySelector('.tool-card details').open`)
		out := eval[string](b, `document.querySelector('.tool-card pre.output').textContent`)
		if !strings.Contains(out, `<img src=x onerror="window.__xss='tool'">`) {
			t.Errorf("tool output = %q", out)
		}
		if got := eval[string](b, `document.querySelector('.tool-card .tool-name').textContent`); got != "mcp__mail__search_mail" {
			t.Errorf("tool card name = %q", got)
		}
		titles := eval[[]string](b, `[...document.querySelectorAll('.tool-card .rich .rich-title')].map((e) => e.textContent.trim())`)
		if len(titles) != 3 || !strings.HasPrefix(titles[1], "invoice-2026-11.pdf") || titles[2] != "Pay the invoice" {
			t.Errorf("rich cards = %q, want an email, a file and an event", titles)
		}
	})

	t.Run("journaled write card links to the journal", func(t *testing.T) {
		b.t = t
		b.send("journal a write")
		b.lastAssistant("Done: Accepted, operation")
		card := `[...document.querySelectorAll('.tool-card .rich-write_operation')].pop()`
		if got := eval[string](b, card+`.querySelector('.writeop-state').textContent`); got != "script_returned" {
			t.Fatalf("state badge %q", got)
		}
		id := strings.TrimPrefix(eval[string](b, card+`.querySelector('.writeop-link').textContent`), "journal ")
		if _, err := h.journal.Confirm(context.Background(), id, map[string]string{"mirrorId": "42"}); err != nil {
			t.Fatal(err)
		}
		b.do(chromedp.Evaluate[chromedp.Void](card + `.querySelector('.writeop-link').click()`))
		b.wait(card + `.querySelector('.writeop-state').textContent === 'confirmed'`)
		if got := eval[string](b, card+`.querySelector('.writeop-detail').textContent`); !strings.Contains(got, "observed in the mirror or index") {
			t.Errorf("detail after following the link = %q", got)
		}
	})

	t.Run("question card", func(t *testing.T) {
		b.t = t
		b.send("ask me which train")
		b.wait(`document.querySelector('.question-card')?.textContent.includes('Which train?')`)
		b.click(".question-card", "The 17:05")
		b.lastAssistant("Done: The user answered: The 17:05")
	})

	t.Run("approve", func(t *testing.T) {
		b.t = t
		b.send("send mail to Anna")
		id := b.pendingApproval()
		b.allLabelled("approval card")
		b.click(card(id), "Approve")
		b.wait(fmt.Sprintf(`document.querySelector(%s).dataset.verdict === 'approved'`, js(card(id))))
		b.lastAssistant("Done: Queued for sending.")
		got := h.got("mcp__mail__send_email")
		if len(got) != 1 || !reflect.DeepEqual(decode(t, got[0]), map[string]any{"to": "anna@polimi.it", "body": "See you Monday.", "cc": "boss@polimi.it"}) {
			t.Errorf("the tool ran with %v, want the model's arguments", got)
		}
		b.shot("chat-desktop")
	})

	t.Run("approve with edits; an emptied optional field stays absent", func(t *testing.T) {
		b.t = t
		b.send("send mail, I will edit it")
		id := b.pendingApproval()
		b.click(card(id), "Edit…")
		c := card(id)
		b.wait(fmt.Sprintf(`document.querySelector(%s + ' .edit-form')`, js(c)))
		if kind := eval[string](b, fmt.Sprintf(`document.querySelector(%s + ' [name="priority"]').type`, js(c))); kind != "number" {
			t.Errorf("the integer field is an input of type %q", kind)
		}
		if tag := eval[string](b, fmt.Sprintf(`document.querySelector(%s + ' [name="body"]').tagName`, js(c))); tag != "TEXTAREA" {
			t.Errorf("the body field is a %s", tag)
		}
		b.setValue(c+` [name="body"]`, "See you Monday at 10.")
		b.setValue(c+` [name="cc"]`, "")
		b.click(c, "Approve with edits")
		b.lastAssistant("Done: (The user edited the arguments")
		got := h.got("mcp__mail__send_email")
		if len(got) != 2 || !reflect.DeepEqual(decode(t, got[1]), map[string]any{"to": "anna@polimi.it", "body": "See you Monday at 10."}) {
			t.Fatalf("the tool ran with %v; want the edited body and no cc or priority", got)
		}
		b.wait(fmt.Sprintf(`document.querySelector(%s + ' .effective')?.textContent.includes('See you Monday at 10.')`, js(c)))
		if eval[bool](b, fmt.Sprintf(`document.querySelector(%s + ' .effective').textContent.includes('cc')`, js(c))) {
			t.Error("the effective input shows a cc")
		}
	})

	t.Run("deny with a note", func(t *testing.T) {
		b.t = t
		b.send("send mail, but I will deny it")
		id := b.pendingApproval()
		b.click(card(id), "Deny…")
		b.do(chromedp.SendKeys(card(id)+" textarea", "Not this week"))
		b.click(card(id)+" form", "Deny")
		b.wait(fmt.Sprintf(`document.querySelector(%s).dataset.verdict === 'denied'`, js(card(id))))
		b.lastAssistant("Done: NOT DONE")
		if n := len(h.got("mcp__mail__send_email")); n != 2 {
			t.Errorf("a denied call ran: %d calls", n)
		}
		if got := eval[string](b, fmt.Sprintf(`document.querySelector(%s + ' .outcome').textContent`, js(card(id)))); !strings.Contains(got, "Not this week") {
			t.Errorf("outcome = %q", got)
		}
		b.wait(`[...document.querySelectorAll('.tool-card')].pop().dataset.status === 'blocked'`)
	})

	t.Run("request a revision", func(t *testing.T) {
		b.t = t
		b.send("send mail, please revise")
		id := b.pendingApproval()
		b.click(card(id), "Request revision…")
		b.do(chromedp.SendKeys(card(id)+" textarea", "Make it shorter"))
		b.click(card(id)+" form", "Request revision")
		b.wait(fmt.Sprintf(`document.querySelector(%s).dataset.verdict === 'revise'`, js(card(id))))
		b.lastAssistant("Done:")
		if n := len(h.got("mcp__mail__send_email")); n != 2 {
			t.Errorf("a revision ran the tool: %d calls", n)
		}
	})

	t.Run("a pending approval survives a reload", func(t *testing.T) {
		b.t = t
		b.send("send mail, then reload")
		id := b.pendingApproval()
		b.shot("approval-desktop")
		b.do(chromedp.Reload())
		b.wait(`document.documentElement.dataset.ready === '1'`)
		b.wait(fmt.Sprintf(`document.querySelector(%s)?.dataset.state === 'pending'`, js(card(id))))
		b.click(card(id), "Approve")
		b.lastAssistant("Done: Queued for sending.")
		if n := len(h.got("mcp__mail__send_email")); n != 3 {
			t.Errorf("after the reload the approval ran %d calls, want 3", n)
		}
	})

	t.Run("reconnects after a network drop and restores the pending approval", func(t *testing.T) {
		b.t = t
		b.send("send mail, then drop")
		id := b.pendingApproval()
		connects := eval[string](b, `document.documentElement.dataset.connects`)
		b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).dataset.old = '1'`, js(card(id)))))
		h.ln.dropAll()
		b.wait(fmt.Sprintf(`document.documentElement.dataset.connects !== %s && document.documentElement.dataset.conn === 'open'`, js(connects)))
		// The chat was reloaded from the host: a fresh card for the same approval.
		b.wait(fmt.Sprintf(`(() => { const c = document.querySelector(%s); return c && !c.dataset.old && c.dataset.state === 'pending' })()`, js(card(id))))
		b.click(card(id), "Approve")
		b.lastAssistant("Done: Queued for sending.")
		if n := len(h.got("mcp__mail__send_email")); n != 4 {
			t.Errorf("%d calls, want 4", n)
		}
	})

	t.Run("reconnects after the host restarts and restores the open chat", func(t *testing.T) {
		b.t = t
		users := eval[int](b, `document.querySelectorAll('.msg.user').length`)
		connects := eval[string](b, `document.documentElement.dataset.connects`)
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.msg').forEach((m) => { m.dataset.old = '1' })`))
		h.restart()
		b.wait(fmt.Sprintf(`document.documentElement.dataset.connects !== %s && document.documentElement.dataset.conn === 'open'`, js(connects)))
		b.wait(fmt.Sprintf(`document.querySelectorAll('.msg.user:not([data-old])').length === %d`, users))
		b.send("still there?")
		b.lastAssistant("you said: still there?")
	})

	t.Run("upload by button and drop, chips in the message", func(t *testing.T) {
		b.t = t
		path := filepath.Join(t.TempDir(), "notes.txt")
		if err := os.WriteFile(path, []byte("meeting notes"), 0o600); err != nil {
			t.Fatal(err)
		}
		b.do(chromedp.SetUploadFiles("#file-input", []string{path}))
		b.wait(`[...document.querySelectorAll('.composer .chip[data-state="done"]')].some((c) => c.textContent.includes('notes.txt'))`)
		b.do(chromedp.Evaluate[chromedp.Void](`(() => {
			const dt = new DataTransfer();
			dt.items.add(new File(['dropped content'], 'dropped.txt', { type: 'text/plain' }));
			const el = document.querySelector('.chat-view');
			el.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
			el.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
		})()`))
		b.wait(`document.querySelectorAll('.composer .chip[data-state="done"]').length === 2`)
		b.send("Here are two files")
		b.lastAssistant("you said: Here are two files")
		chips := eval[string](b, `[...document.querySelectorAll('.msg.user')].pop().querySelector('.chips').textContent`)
		if !strings.Contains(chips, "notes.txt") || !strings.Contains(chips, "dropped.txt") {
			t.Errorf("message chips = %q", chips)
		}
		if n := eval[int](b, `document.querySelectorAll('.composer .chip').length`); n != 0 {
			t.Errorf("%d chips left in the composer after sending", n)
		}
		// A chip downloads its file through the authenticated route.
		b.do(chromedp.Evaluate[chromedp.Void](`HTMLAnchorElement.prototype.click = function () { window.__download = [this.download, window.__blob] };
			const create = URL.createObjectURL; URL.createObjectURL = (blob) => { window.__blob = blob; return create(blob) }`))
		b.do(chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.msg.user')].pop().querySelector('.chips').id = 'last-chips'`))
		b.click("#last-chips", "notes.txt 13 B")
		b.wait(`Array.isArray(window.__download)`)
		if got := eval[string](b, `window.__download[1].text().then((t) => window.__download[0] + ': ' + t)`); got != "notes.txt: meeting notes" {
			t.Errorf("downloaded %q", got)
		}
		reqs := h.provider.Requests()
		last := string(reqs[len(reqs)-1].Raw)
		if !strings.Contains(last, `[Attached file \"notes.txt\"`) || !strings.Contains(last, `[Attached file \"dropped.txt\"`) {
			t.Errorf("the model was not told about both files: %.300s", last)
		}
	})

	t.Run("copy the transcript as JSON", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Evaluate[chromedp.Void](`navigator.clipboard.writeText = (text) => { window.__copied = text; return Promise.resolve() }`))
		b.click(".view-header", "Copy JSON")
		b.wait(`typeof window.__copied === 'string'`)
		var tr struct {
			ChatID  string `json:"chatId"`
			Entries []struct {
				Kind string          `json:"kind"`
				Data json.RawMessage `json:"data"`
			} `json:"entries"`
		}
		if err := json.Unmarshal([]byte(eval[string](b, `window.__copied`)), &tr); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, e := range tr.Entries {
			kinds[e.Kind]++
		}
		if !strings.HasPrefix(tr.ChatID, "chat_") || kinds["user"] < 8 || kinds["assistant"] < 8 || kinds["tool"] < 6 || kinds["approval"] < 6 {
			t.Errorf("copied transcript of %s has %v", tr.ChatID, kinds)
		}
	})

	t.Run("abort a running turn", func(t *testing.T) {
		b.t = t
		hold := h.holdNext()
		defer close(hold)
		b.send("answer slowly please")
		b.wait(`document.querySelector('.msg.assistant.streaming .bubble')?.textContent.length > 0`)
		b.click(".composer", "Stop")
		b.wait(`[...document.querySelectorAll('.msg.notice')].pop()?.textContent === 'Stopped.' && document.querySelector('.chat-view').dataset.running === '0'`)
	})

	t.Run("a conversation too long for the model is summarised, marked and expandable", func(t *testing.T) {
		b.t = t
		b.send("this is too long for you")
		b.lastAssistant("you said: this is too long for you")
		b.wait(`document.querySelector('details.msg.summary')?.textContent.includes('Earlier conversation summarised')`)
		if open := eval[bool](b, `document.querySelector('details.msg.summary').open`); open {
			t.Error("the summary is expanded before the user asks")
		}
		b.do(chromedp.Click(`details.msg.summary > summary`, chromedp.NodeVisible))
		b.wait(`document.querySelector('details.msg.summary').open && document.querySelector('details.msg.summary strong')?.textContent === 'streaming'`)
		// The entry is stored: a reload shows it at the same place, before the answer.
		b.do(chromedp.Reload())
		b.wait(`(() => { const s = document.querySelector('details.msg.summary'); const a = [...document.querySelectorAll('.msg.assistant')].pop();
			return s && a && a.textContent.includes('too long for you') && (s.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING) })()`)
	})

	t.Run("model HTML never reaches the DOM", func(t *testing.T) {
		b.t = t
		b.click("#sidebar", "+ New chat")
		b.wait(`location.hash === '#/new' && document.activeElement?.id === 'composer-input'`)
		b.send("show xss please")
		b.lastAssistant("raw anchor")
		text := eval[string](b, `[...document.querySelectorAll('.msg.assistant')].pop().textContent`)
		for _, want := range []string{`<img src=x onerror="window.__xss='img'">`, `<script>window.__xss='script'</script>`, `<svg onload=`} {
			if !strings.Contains(text, want) {
				t.Errorf("the answer does not show %q as text: %q", want, text)
			}
		}
		if n := eval[int](b, `document.querySelectorAll('main img, main script, main svg:not(.icon), main iframe, main object, main embed').length`); n != 0 {
			t.Errorf("%d active elements were created from model text", n)
		}
		if attrs := eval[[]string](b, `[...document.querySelectorAll('main *')].flatMap((el) => [...el.attributes].filter((a) => a.name.startsWith('on')).map((a) => el.tagName + ' ' + a.name))`); len(attrs) != 0 {
			t.Errorf("event handler attributes in the page: %v", attrs)
		}
		hrefs := eval[[]string](b, `[...document.querySelectorAll('.msg.assistant a')].map((a) => a.getAttribute('href') + ' ' + a.target + ' ' + a.rel)`)
		want := []string{"https://example.org/docs _blank noopener noreferrer", "https://tracker.example/pixel.png?u=1 _blank noopener noreferrer"}
		if !reflect.DeepEqual(hrefs, want) {
			t.Errorf("links = %q, want %q (javascript: dropped, the image only a link)", hrefs, want)
		}
		if eval[bool](b, `performance.getEntriesByType('resource').some((e) => e.name.includes('tracker.example'))`) {
			t.Error("the page loaded the model's image")
		}
		// Anything that could have run has had its chance: a later round trip.
		b.send("one more")
		b.lastAssistant("you said: one more")
		if v := eval[string](b, `String(window.__xss)`); v != "undefined" {
			t.Errorf("injected code ran: window.__xss = %s", v)
		}
	})

	t.Run("the Markdown renderer only builds safe elements (seeds and random input)", func(t *testing.T) {
		b.t = t
		seeds, err := os.ReadFile("testdata/markdown_seeds.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		var list []string
		for _, line := range strings.Split(strings.TrimSpace(string(seeds)), "\n") {
			var s string
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("seed %q: %v", line, err)
			}
			list = append(list, s)
		}
		arg, _ := json.Marshal(list)
		type result struct {
			Count int      `json:"count"`
			Worst float64  `json:"worst"`
			Bad   []string `json:"bad"`
		}
		res := eval[result](b, fmt.Sprintf(`(%s)(%s, 3000)`, markdownFuzz, arg))
		t.Logf("rendered %d inputs; slowest %.1f ms", res.Count, res.Worst)
		if res.Count != len(list)+3000 || len(res.Bad) > 0 {
			t.Errorf("%d inputs rendered; problems: %q", res.Count, res.Bad)
		}
		if v := eval[string](b, `String(window.__xss)`); v != "undefined" {
			t.Errorf("rendering ran injected code: window.__xss = %s", v)
		}
	})

	t.Run("rename, unread quick-send chats, delete", func(t *testing.T) {
		b.t = t
		b.click(".view-header", "Rename")
		b.setValue(`.rename input`, "Hostile answers")
		b.click(".rename", "Save")
		b.wait(`document.querySelector('.chat-link.current')?.textContent === 'Hostile answers' && document.querySelector('.chat-title').textContent === 'Hostile answers'`)

		req, _ := http.NewRequest(http.MethodPost, h.url()+"quick-send", bytes.NewReader([]byte(`{"text":"quick hello from the phone"}`)))
		req.Header.Set("Authorization", "Bearer "+hostToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		b.wait(`[...document.querySelectorAll('.chat-link.unread')].some((a) => a.textContent.includes('quick hello from the phone'))`)
		b.do(chromedp.Click(`a.chat-link.unread`))
		b.lastAssistant("you said: quick hello")
		b.wait(`document.querySelector('.chat-link.current') && !document.querySelector('.chat-link.current').classList.contains('unread')`)
		chats := eval[int](b, `document.querySelectorAll('.chat-link').length`)
		b.click(".view-header", "Delete")
		b.click(".view-header", "Confirm delete")
		b.wait(fmt.Sprintf(`document.querySelectorAll('.chat-link').length === %d && location.hash === '#/'`, chats-1))
		// Most recent first: the chat written in last leads the list.
		if first := eval[string](b, `document.querySelector('.chat-link').textContent`); first != "Hostile answers" {
			t.Errorf("first chat = %q, want the most recently updated", first)
		}
	})

	t.Run("usage page", func(t *testing.T) {
		b.t = t
		// A caller that does not say who it is: its spend is called out.
		res, err := http.Post(h.gwSrv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"tier-5","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h.flush()
		b.do(chromedp.Click(`.sidebar-foot a[data-nav="usage"]`))
		b.wait(`document.querySelector('.usage-page')?.dataset.loaded === '7d'`)
		text := eval[string](b, `document.querySelector('.usage-page').textContent`)
		for _, want := range []string{"mcp__mail__send_email", "mcp__mail__search_mail", "host/chat", "host/quick-send", "scripted/scripted-1", "unknown/unknown"} {
			if !strings.Contains(text, want) {
				t.Errorf("the usage page lacks %q", want)
			}
		}
		if got := eval[string](b, `document.querySelector('.callout.unlabelled')?.textContent || ''`); !strings.Contains(got, "in 1 request recorded as “unknown”") {
			t.Errorf("unlabelled spend callout = %q", got)
		}
		if n := eval[int](b, `document.querySelectorAll('.usage-page svg.chart rect.bar').length`); n < 1 {
			t.Errorf("the cost chart has %d bars", n)
		}
		b.click(".usage-page", "30 days")
		b.wait(`document.querySelector('.usage-page').dataset.loaded === '30d'`)
		b.allLabelled("usage")
		b.shot("usage-desktop")
	})

	t.Run("audit page", func(t *testing.T) {
		b.t = t
		h.flush()
		b.do(chromedp.Click(`.sidebar-foot a[data-nav="audit"]`))
		b.wait(`document.querySelector('.audit-page')?.dataset.loaded === '1'`)
		for _, typ := range []string{"approval.request", "tool.result", "chat.message", "file.upload"} {
			if !eval[bool](b, fmt.Sprintf(`!!document.querySelector('.timeline li[data-type=%s]')`, js(typ))) {
				t.Errorf("no %s event in the timeline", typ)
			}
		}
		b.setValue("#audit-type", "approval.response")
		b.setValue("#audit-tool", "mcp__mail__send_email")
		b.click(".filters", "Apply")
		b.wait(`(() => { const li = [...document.querySelectorAll('.timeline li')]; return li.length >= 6 && li.every((x) => x.dataset.type === 'approval.response') })()`)
		b.do(chromedp.Click(`.timeline li button`))
		b.wait(`document.querySelector('.detail .payload')?.textContent.includes('verdict')`)
		b.allLabelled("audit")
		b.shot("audit-desktop")
	})

	t.Run("system page", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Click(`.sidebar-foot a[data-nav="system"]`))
		b.wait(`document.querySelector('.system-page')?.dataset.loaded === '1'`)
		row := eval[string](b, `[...document.querySelectorAll('.system-page tr')].find((tr) => tr.textContent.includes('mcp__mail__send_email'))?.textContent || ''`)
		if !strings.Contains(row, "gate") || !strings.Contains(row, "mail") {
			t.Errorf("send_email inventory row = %q", row)
		}
		if st := eval[string](b, `document.querySelector('.service[data-name="gateway"]')?.dataset.state`); st != "ok" {
			t.Errorf("gateway state = %q", st)
		}
		testSystemBackground(t, b, h)
		b.allLabelled("system")
		b.shot("system-desktop")
		testSystemSectionsFit(t, b, "desktop")
		// The preparation banner goes once every task has finished.
		h.bg.setPrep(searchprep.State{State: searchprep.Done, Tasks: []searchprep.Task{
			{Name: "mail", State: searchprep.Done}, {Name: searchprep.ModelTask, State: searchprep.Done},
			{Name: "calendar", State: searchprep.Skipped}, {Name: "contacts", State: searchprep.Done}}})
		b.wait(`document.getElementById('prep-banner')?.hidden === true`)
	})

	t.Run("notify.js: payloads, clicks, messages and URLs (the module the service worker imports)", func(t *testing.T) {
		b.t = t
		testNotifyModule(t, b)
	})

	var watchChat string
	t.Run("watch turns mark their chat unread and show in it", func(t *testing.T) {
		b.t = t
		watchChat = testWatchTurnsInChats(t, b, h)
	})

	t.Run("a notification's URL opens its chat after authentication", func(t *testing.T) {
		b.t = t
		testChatURL(t, b, h, watchChat)
	})

	t.Run("enable notifications: offer, blocked, subscribe, test push, re-sync", func(t *testing.T) {
		b.t = t
		testEnableNotifications(t, b, h)
	})

	t.Run("a push shows its notification; a click opens the chat", func(t *testing.T) {
		b.t = t
		testPushAndClick(t, b, h, watchChat)
	})

	t.Run("turn notifications off", func(t *testing.T) {
		b.t = t
		testDisableNotifications(t, b, h)
	})

	// Measured, not asserted (a loaded CI machine must not fail it): the
	// browser is warm, its HTTP cache, service worker and cache storage empty.
	t.Run("load time with an empty cache", func(t *testing.T) {
		b.t = t
		var runs []float64
		for range 7 {
			b.wait(`(async () => {
				for (const r of await navigator.serviceWorker.getRegistrations()) await r.unregister();
				for (const k of await caches.keys()) await caches.delete(k);
				return true })()`)
			if _, err := chromedp.Call(b.ctx, network.ClearBrowserCache, cdp.Empty{}); err != nil {
				t.Fatal(err)
			}
			b.do(chromedp.Navigate(h.url()))
			b.wait(`document.documentElement.dataset.ready === '1'`)
			// What loads before the app is usable came from the network. (Modules
			// loaded later, such as notifications.js, may come from the service
			// worker the page just installed.)
			if n := eval[[]string](b, `performance.getEntriesByType('resource').filter((e) => /\/assets\/.*\.(js|css)$/.test(e.name) && e.transferSize === 0 &&
				e.startTime < performance.getEntriesByName('steward-ready')[0].startTime).map((e) => e.name + ' ' + e.initiatorType)`); len(n) > 0 {
				t.Errorf("assets from a cache: %v", n)
			}
			runs = append(runs, eval[float64](b, `performance.getEntriesByName('steward-ready')[0].startTime`))
		}
		sort.Float64s(runs)
		t.Logf("load to usable chat, empty cache, warm browser, %d runs: median %.0f ms, min %.0f, max %.0f", len(runs), runs[len(runs)/2], runs[0], runs[len(runs)-1])
		b.noExceptions()
	})
}

// testUsageAt360 checks the Usage page on a phone with the harness's tiny
// costs (fractions of a cent): the chart's scale is a round figure above
// the highest day, its labels are readable and do not overlap, every amount
// is written the same way, and By model shows the tier asked for beside
// the upstream model that answered.
func testUsageAt360(t *testing.T, b *browser) {
	t.Helper()
	ticks := eval[[]string](b, `[...document.querySelectorAll('.chart text.tick')].map((e) => e.textContent)`)
	top := eval[float64](b, `Math.max(...[...document.querySelectorAll('.chart rect.bar title')].map((e) => parseFloat(e.textContent.split('$')[1])))`)
	if len(ticks) != 3 || ticks[0] != "$0.00" {
		t.Fatalf("axis ticks = %q, want $0.00, a half and a top", ticks)
	}
	var axisTop float64
	fmt.Sscanf(strings.TrimPrefix(ticks[2], "$"), "%g", &axisTop)
	mant := axisTop / math.Pow(10, math.Floor(math.Log10(axisTop)))
	if top <= 0 || axisTop < top || axisTop > 5*top || !slices.ContainsFunc([]float64{1, 2, 5}, func(m float64) bool { return math.Abs(m-mant) < 1e-6 }) {
		t.Errorf("axis top %q for a highest day of $%g: want a round figure (1, 2 or 5 × 10^k) just above it", ticks[2], top)
	}
	money := regexp.MustCompile(`^-?\$(\d{1,3}(,\d{3})*\.\d{2}|0\.0*[1-9]\d?)$`)
	amounts := eval[[]string](b, `[...document.querySelectorAll('.chart text.tick'), ...document.querySelectorAll('.usage-page .stat .value')].map((e) => e.textContent).filter((s) => s.includes('$'))
		.concat([...document.querySelectorAll('.usage-page table')].flatMap((t) => { const i = [...t.querySelectorAll('th')].findIndex((th) => th.textContent === 'Cost'); return i < 0 ? [] : [...t.querySelectorAll('tbody tr')].map((r) => r.children[i]?.textContent || '') }))`)
	for _, a := range amounts {
		if !money.MatchString(a) {
			t.Errorf("amount %q is not written like the others ($0.00, $1,234.50, or $0.0012 under a cent)", a)
		}
	}
	if small := eval[[]string](b, `[...document.querySelectorAll('.chart text')].filter((e) => e.getBoundingClientRect().height < 9).map((e) => e.textContent)`); len(small) != 0 {
		t.Errorf("chart labels smaller than 9 px on screen at 360 px: %q", small)
	}
	if overlap := eval[bool](b, `(() => { const r = [...document.querySelectorAll('.chart text.day')].map((e) => e.getBoundingClientRect()); return r.some((a, i) => i > 0 && a.left < r[i - 1].right) })()`); overlap {
		t.Error("day labels overlap at 360 px")
	}
	rows := eval[[][]string](b, `(() => { const t = [...document.querySelectorAll('.usage-page table')].find((t) => t.querySelector('caption')?.textContent === 'By model'); return t ? [[...t.querySelectorAll('th')].map((e) => e.textContent), ...[...t.querySelectorAll('tbody tr')].map((r) => [...r.children].map((c) => c.textContent))] : [] })()`)
	if len(rows) < 2 || !slices.Equal(rows[0][:2], []string{"Tier", "Upstream model"}) || rows[1][0] != "tier-5" || rows[1][1] != "scripted/scripted-1" {
		t.Errorf("By model = %q, want Tier and Upstream model columns with tier-5 → scripted/scripted-1", rows)
	}
}

func TestBrowserMobile(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 360, 740, true)
	h := newHarness(t)

	t.Run("a device the host does not pair asks for the token once, then opens the notification's chat", func(t *testing.T) {
		b.t = t
		h.refusePair.Store(true)
		// The phone opens the app from a watch notification (/?chat=…)
		// before it was ever paired: the chat opens once the token is in.
		chat, err := h.store.Create(context.Background(), "Treno", "user")
		if err != nil {
			t.Fatal(err)
		}
		h.deliverWatch(t, watch.Turn{ChatID: chat.ID, WatchID: "watch_m", EventID: "ev_m", Fallback: "Il treno 2071 è in ritardo di 5 minuti."})
		b.do(chromedp.Navigate(h.url() + "?chat=" + chat.ID))
		b.wait(`document.querySelector('#pair-token')`)
		b.setValue("#pair-token", "wrong-token-0123456789")
		b.click(".pair-form", "Pair")
		b.wait(`document.querySelector('.pair-form [role=alert]')?.textContent.includes('refused')`)
		if tok := eval[string](b, `localStorage.getItem('steward.token') || ''`); tok != "" {
			t.Errorf("a refused token was kept: %q", tok)
		}
		if q := eval[string](b, `location.search`); q != "?chat="+chat.ID {
			t.Errorf("the chat parameter is gone before authentication: %q", q)
		}
		b.setValue("#pair-token", hostToken)
		b.click(".pair-form", "Pair")
		b.wait(`document.documentElement.dataset.ready === '1'`)
		if tok := eval[string](b, `localStorage.getItem('steward.token')`); tok != hostToken {
			t.Errorf("stored token = %q", tok)
		}
		b.wait(fmt.Sprintf(`location.search === '' && location.hash === %s`, js("#/c/"+chat.ID)))
		b.wait(`[...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('in ritardo di 5 minuti'))`)
		// A reload keeps the pairing without asking again.
		b.do(chromedp.Reload())
		b.wait(`document.documentElement.dataset.ready === '1' && !document.querySelector('#pair-token')`)
	})

	t.Run("bottom navigation at 360 px", func(t *testing.T) {
		b.t = t
		if d := eval[string](b, `getComputedStyle(document.getElementById('bottom-nav')).display`); d != "flex" {
			t.Errorf("bottom navigation display = %q", d)
		}
		if d := eval[string](b, `getComputedStyle(document.querySelector('.sidebar-foot')).display`); d != "none" {
			t.Errorf("the desktop sidebar footer shows on a phone: %q", d)
		}
		// "/" on a phone (the app opened from the home screen) continues
		// the last chat, with its composer; Chats is lit.
		last := eval[string](b, `location.hash`)
		b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
		b.wait(fmt.Sprintf(`location.hash === %s && document.querySelector('.main textarea')?.offsetParent !== null`, js(last)))
		if cur := eval[[]string](b, `[...document.querySelectorAll('#bottom-nav > .current, #more-button.current')].map((e) => e.dataset.nav || e.id)`); !reflect.DeepEqual(cur, []string{"chats"}) {
			t.Errorf("bottom bar highlights %v on / (the last chat), want [chats]", cur)
		}
		// Also when the app starts on "/": the chat list arrives after the
		// first route, and the last chat opens then.
		b.do(chromedp.Navigate(h.url()))
		b.wait(fmt.Sprintf(`document.documentElement.dataset.ready === '1' && location.hash === %s && [...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('in ritardo'))`, js(last)))
		// New starts a chat: a composer on #/new, New lit.
		b.do(chromedp.Click(`#bottom-nav a[data-nav="chat"]`))
		b.wait(`location.hash === '#/new' && document.querySelector('.main textarea')?.offsetParent !== null && !document.querySelector('.msg')`)
		if cur := eval[[]string](b, `[...document.querySelectorAll('#bottom-nav > .current, #more-button.current')].map((e) => e.dataset.nav || e.id)`); !reflect.DeepEqual(cur, []string{"chat"}) {
			t.Errorf("bottom bar highlights %v on New, want [chat]", cur)
		}
		b.send("Hello from the phone")
		b.lastAssistant("you said: Hello from the phone")
		// An open chat is under Chats, not New.
		b.wait(`location.hash.startsWith('#/c/')`)
		if cur := eval[[]string](b, `[...document.querySelectorAll('#bottom-nav > .current, #more-button.current')].map((e) => e.dataset.nav || e.id)`); !reflect.DeepEqual(cur, []string{"chats"}) {
			t.Errorf("bottom bar highlights %v in an open chat, want [chats]", cur)
		}
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("the chat is %d px wide at a 360 px viewport", w)
		}
		b.shot("chat-mobile")
	})

	t.Run("approval card on a phone", func(t *testing.T) {
		b.t = t
		b.send("send mail from the phone")
		id := b.pendingApproval()
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("the approval card makes the page %d px wide", w)
		}
		b.shot("approval-mobile")
		b.click(card(id), "Approve")
		b.lastAssistant("Done: Queued for sending.")
	})

	t.Run("chats, usage, and More → audit and system", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Click(`#bottom-nav a[data-nav="chats"]`))
		b.wait(`getComputedStyle(document.getElementById('sidebar')).display !== 'none' && document.querySelectorAll('.chat-link').length === 2`)
		// The one-time notification offer fits a phone's chat list.
		b.wait(`document.querySelector('#sidebar .notify-prompt')`)
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("the chat list with the notification offer is %d px wide", w)
		}
		b.shot("chats-mobile")
		// "Not now" is remembered: after a reload the chat list starts with
		// the chats, not the offer.
		b.click("#sidebar .notify-prompt", "Not now")
		b.wait(`!document.querySelector('.notify-prompt')`)
		b.do(chromedp.Reload())
		b.wait(`document.documentElement.dataset.ready === '1'`)
		b.do(chromedp.Click(`#bottom-nav a[data-nav="chats"]`))
		b.wait(`document.querySelectorAll('.chat-link').length === 2`)
		if eval[bool](b, `!!document.querySelector('.notify-prompt')`) {
			t.Error("the notification offer came back after Not now and a reload")
		}
		h.flush()
		b.do(chromedp.Click(`#bottom-nav a[data-nav="usage"]`))
		b.wait(`document.querySelector('.usage-page')?.dataset.loaded`)
		testUsageAt360(t, b)
		b.shot("usage-mobile")
		for _, page := range []string{"audit", "system"} {
			b.do(chromedp.Click(`#more-button`))
			b.wait(`!document.getElementById('more-menu').hidden && document.getElementById('more-button').getAttribute('aria-expanded') === 'true'`)
			b.do(chromedp.Click(fmt.Sprintf(`#more-menu a[data-nav=%q]`, page)))
			b.wait(fmt.Sprintf(`document.querySelector('.%s-page')?.dataset.loaded === '1' && document.getElementById('more-menu').hidden`, page))
			if w := eval[int](b, `document.documentElement.scrollWidth`); w > 360 {
				t.Errorf("the %s page is %d px wide", page, w)
			}
			if cur := eval[[]string](b, `[...document.querySelectorAll('#bottom-nav > .current, #more-button.current')].map((e) => e.dataset.nav || e.id)`); !reflect.DeepEqual(cur, []string{"more-button"}) {
				t.Errorf("bottom bar highlights %v on %s, want only More", cur, page)
			}
			// The page title is larger than any section heading under it.
			if bad := eval[[]string](b, fmt.Sprintf(`(() => {
				const px = (e) => parseFloat(getComputedStyle(e).fontSize);
				const title = px(document.getElementById('%s-title'));
				return [...document.querySelectorAll('.%s-page h3')].filter((e) => px(e) >= title).map((e) => e.textContent);
			})()`, page, page)); len(bad) != 0 {
				t.Errorf("on %s these section headings are as large as the page title: %q", page, bad)
			}
			b.shot(page + "-mobile")
			if page == "system" {
				testSystemSectionsFit(t, b, "mobile")
			}
			if page == "audit" {
				// Every filter's example placeholder fits its field.
				if cut := eval[[]string](b, `(() => {
					const ctx = document.createElement('canvas').getContext('2d');
					return [...document.querySelectorAll('.filters input[placeholder]')].filter((el) => {
						const cs = getComputedStyle(el, '::placeholder');
						ctx.font = cs.font || getComputedStyle(el).font;
						const room = el.clientWidth - parseFloat(getComputedStyle(el).paddingLeft) - parseFloat(getComputedStyle(el).paddingRight);
						return ctx.measureText(el.placeholder).width > room;
					}).map((el) => el.placeholder);
				})()`); len(cut) != 0 {
					t.Errorf("these Audit filter placeholders are cut at 360 px: %q", cut)
				}
			}
		}
	})

	t.Run("the service worker caches the app shell only", func(t *testing.T) {
		b.t = t
		b.wait(`navigator.serviceWorker.ready.then(() => true)`)
		paths := eval[[]string](b, `(async () => {
			const key = (await caches.keys()).find((k) => k.startsWith('steward-shell-'));
			const c = await caches.open(key);
			return (await c.keys()).map((r) => new URL(r.url).pathname);
		})()`)
		hasShell := false
		for _, p := range paths {
			hasShell = hasShell || p == "/"
			if p != "/" && p != "/manifest.webmanifest" && !strings.HasPrefix(p, "/assets/") {
				t.Errorf("the service worker cached %s, which is not app shell", p)
			}
		}
		if !hasShell || len(paths) < 10 {
			t.Errorf("cached shell = %v", paths)
		}
		mf := eval[string](b, `fetch(document.querySelector('link[rel=manifest]').href).then((r) => r.json()).then((m) => m.display + ' ' + m.icons.length)`)
		if mf != "standalone 4" {
			t.Errorf("manifest = %q", mf)
		}
		b.noExceptions()
	})
}

// markdownFuzz renders the seed corpus and n random strings built from
// Markdown and HTML fragments, into a detached element (images there would
// still load, and their handlers run), and lists any element, attribute or
// link target outside what the renderer may produce.
const markdownFuzz = `async (seeds, n) => {
	const src = document.querySelector('script[type=module]').src;
	const { renderMarkdown } = await import(src.replace(/app\.js$/, 'markdown.js'));
	const TAGS = new Set(['P', 'BR', 'STRONG', 'EM', 'DEL', 'CODE', 'PRE', 'A', 'UL', 'OL', 'LI', 'BLOCKQUOTE', 'H3', 'H4', 'H5', 'H6',
		'HR', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DIV', 'svg', 'path']);
	const ATTRS = new Set(['href', 'target', 'rel', 'class', 'start', 'scope', 'viewBox', 'width', 'height', 'aria-hidden', 'd']);
	const parts = ['<', '>', 'img', ' src=x', ' onerror=', '"', "'", 'script', '</', '[', ']', '(', ')', '!', 'javascript:', 'JaVaScRiPt:',
		'https://a.example/', 'mailto:x@y.z', 'data:text/html,', '*', '**', '_', '__', '~~', '\x60', '\x60\x60\x60', '\n', '\n\n', '# ', '> ',
		'- ', '1. ', '|', '---', '\\', ' ', 'text', 'window.__xss=1', '&lt;', 'on', '=', '  '];
	let x = 20261130;
	const rnd = () => { x = (Math.imul(x, 1103515245) + 12345) >>> 0; return x / 4294967296; };
	const inputs = [...seeds];
	for (let i = 0; i < n; i++) {
		let s = '';
		for (let j = 1 + Math.floor(rnd() * 48); j > 0; j--) s += parts[Math.floor(rnd() * parts.length)];
		inputs.push(s);
	}
	const bad = [];
	let worst = 0;
	for (const s of inputs) {
		const t0 = performance.now();
		const box = document.createElement('div');
		try {
			box.append(renderMarkdown(s));
		} catch (e) {
			bad.push('throws ' + e + ' on ' + JSON.stringify(s));
			continue;
		}
		worst = Math.max(worst, performance.now() - t0);
		for (const el of box.querySelectorAll('*')) {
			if (!TAGS.has(el.tagName)) bad.push(el.tagName + ' from ' + JSON.stringify(s));
			for (const a of el.attributes) {
				if (!ATTRS.has(a.name)) bad.push('attribute ' + a.name + ' from ' + JSON.stringify(s));
				if (a.name === 'href' && !/^(https?:|mailto:)/.test(a.value)) bad.push('href ' + a.value + ' from ' + JSON.stringify(s));
			}
		}
	}
	return { count: inputs.length, worst, bad: bad.slice(0, 10) };
}`
