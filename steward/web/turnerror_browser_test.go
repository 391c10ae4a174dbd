package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/watch"
)

// TestBrowserFailedTurn: a turn the provider refuses ends in a styled error
// card with the plain cause and the fix (a link to the set-up screen), the
// provider's own error one click away; the card comes back after a reload
// (it is in the transcript), and the failure is in Audit.
func TestBrowserFailedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	b.do(chromedp.Navigate(h.url()))
	b.wait(`document.documentElement.dataset.ready === '1'`)

	b.send("please refuse the key")
	b.wait(`!!document.querySelector('.msg.turn-error')`)
	const cause = "The model provider refused the API key."
	b.checkErrorCard("live", cause, "open the set-up screen or run 'steward setup'")
	b.shot("failed-turn-desktop")

	b.do(chromedp.Reload())
	b.wait(`document.documentElement.dataset.ready === '1' && !!document.querySelector('.msg.turn-error')`)
	b.checkErrorCard("after a reload", cause, "open the set-up screen or run 'steward setup'")
	b.noExceptions()

	h.checkTurnFailedRow(b, func(e audit.Event) bool { return e.Summary == cause && e.ChatID != "" }, "refused the API key")

	// The host stores an entry before it publishes its frame, so a page can
	// read the transcript with the turn's error (or reply) in it and then get
	// the frame: each shows once (two error cards were seen under load).
	counts := eval[map[string]int](b, `(async () => {
		const src = document.querySelector('script[type=module]').src.replace(/app\.js$/, 'chat.js');
		const { ChatView } = await import(src);
		const app = { chats: new Map(), pending: new Map(), toast() {},
			conn: { status: 'open', send() { return true; }, request() { return new Promise(() => {}); } } };
		const v = new ChatView(app, 'chat_race');
		v.load({ running: true, entries: [
			{ id: 'u1', kind: 'user', data: { messageId: 'u1', text: 'hi' } },
			{ id: 'a1', kind: 'assistant', data: { messageId: 'asst_1', text: 'first answer' } },
			{ id: 'e1', kind: 'error', data: { turnId: 'turn_2', error: 'HTTP 401', cause: 'refused', fix: '' } },
		] });
		v.onFrame({ type: 'assistant.message', chatId: 'chat_race', turnId: 'turn_1', messageId: 'asst_1', text: 'first answer' });
		v.onFrame({ type: 'turn.done', chatId: 'chat_race', turnId: 'turn_2', ok: false, error: 'HTTP 401', cause: 'refused' });
		// A later turn's failure is new: it shows.
		v.onFrame({ type: 'turn.done', chatId: 'chat_race', turnId: 'turn_3', ok: false, error: 'HTTP 500', cause: 'down' });
		return { errors: v.log.querySelectorAll('.msg.turn-error').length, answers: v.log.querySelectorAll('.msg.assistant').length };
	})()`)
	if counts["errors"] != 2 || counts["answers"] != 1 {
		t.Errorf("after frames already in the transcript: %d error cards (want 2: the stored one and a later turn's), %d answers (want 1)", counts["errors"], counts["answers"])
	}
}

// TestBrowserFailedWatchTurn: a watch turn the provider refuses shows in
// the watch's chat as the same styled error card as a failed chat turn —
// the plain cause, the fix with the set-up link and what the watch does
// next, the provider's error folded — live and after a reload, and Audit
// has its chat.turn_failed row.
func TestBrowserFailedWatchTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	b.do(chromedp.Navigate(h.url()))
	b.wait(`document.documentElement.dataset.ready === '1'`)
	// The user's chat, where a watch was created: this page follows it.
	b.send("watch my train to Torino")
	b.wait(`[...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('you said: watch my train'))`)
	chatID := strings.TrimPrefix(eval[string](b, `location.hash`), "#/c/")

	_, err := h.host.Manager().DeliverWatchTurn(context.Background(), watch.Turn{ChatID: chatID, WatchID: "w_train", EventID: "wev_1",
		Prompt: "[Steward watch event] the train is late; please refuse the key"})
	if err == nil || !strings.Contains(err.Error(), "Incorrect API key provided") {
		t.Fatalf("the watch turn: %v, want the provider's refusal", err)
	}
	const cause = "A watch could not write its notification. The model provider refused the API key."
	fix := []string{"open the set-up screen or run 'steward setup'", "The watch tries again at its next check"}
	// Only the user's message is one: the automatic event is not.
	users := `document.querySelectorAll('.msg.user').length`
	b.wait(`!!document.querySelector('.msg.turn-error')`)
	b.checkErrorCard("live", cause, fix...)
	if n := eval[int](b, users); n != 1 {
		t.Errorf("live: %d user messages, want 1", n)
	}
	b.shot("failed-watch-turn-desktop")

	b.do(chromedp.Reload())
	b.wait(`document.documentElement.dataset.ready === '1' && !!document.querySelector('.msg.turn-error')`)
	b.checkErrorCard("after a reload", cause, fix...)
	if n := eval[int](b, users); n != 1 {
		t.Errorf("after a reload: %d user messages, want 1", n)
	}
	b.noExceptions()

	h.checkTurnFailedRow(b, func(e audit.Event) bool { return e.Summary == cause && e.ChatID == chatID }, "A watch could not write its notification")
}

// checkErrorCard checks the page's one failed-turn card: the plain cause,
// a fix with each of fixParts and the set-up link, the provider's error
// folded in the details and nowhere else, the error colours and role alert.
func (b *browser) checkErrorCard(when, cause string, fixParts ...string) {
	t := b.t
	t.Helper()
	card := `document.querySelector('.msg.turn-error')`
	if n := eval[int](b, `document.querySelectorAll('.msg.turn-error').length`); n != 1 {
		t.Errorf("%s: %d error cards, want 1", when, n)
	}
	if got := eval[string](b, card+`.querySelector('.turn-error-cause').textContent.trim()`); got != cause {
		t.Errorf("%s: cause = %q", when, got)
	}
	fix := eval[string](b, card+`.querySelector('.turn-error-fix').textContent`)
	for _, part := range fixParts {
		if !strings.Contains(fix, part) {
			t.Errorf("%s: fix = %q, want %q in it", when, fix, part)
		}
	}
	if got := eval[string](b, card+`.querySelector('.turn-error-fix a')?.getAttribute('href') || ''`); got != "#/setup" {
		t.Errorf("%s: the fix links to %q, want #/setup", when, got)
	}
	// The technical chain is there, folded.
	if eval[bool](b, card+`.querySelector('details').open`) {
		t.Errorf("%s: the details are unfolded", when)
	}
	if raw := eval[string](b, card+`.querySelector('details pre').textContent`); !strings.Contains(raw, "Incorrect API key provided") {
		t.Errorf("%s: details = %q, want the provider's error", when, raw)
	}
	if got := eval[string](b, card+`.textContent`); strings.Contains(strings.SplitN(got, "Details", 2)[0], "model API error") {
		t.Errorf("%s: the raw chain shows outside the details: %q", when, got)
	}
	// Styled: the error colours, not the plain notice line.
	bg := eval[string](b, `getComputedStyle(`+card+`).backgroundColor`)
	want := eval[string](b, `(() => { const d = document.createElement('div'); d.style.background = 'var(--bad-soft)'; document.body.append(d); const c = getComputedStyle(d).backgroundColor; d.remove(); return c })()`)
	if bg != want || bg == "rgba(0, 0, 0, 0)" {
		t.Errorf("%s: card background %q, want the error colour %q", when, bg, want)
	}
	if role := eval[string](b, card+`.getAttribute('role')`); role != "alert" {
		t.Errorf("%s: role = %q", when, role)
	}
}

// checkTurnFailedRow checks that Audit holds exactly one chat.turn_failed
// event, that it is the one wanted, and that the Audit page's type filter
// shows it with text in it.
func (h *harness) checkTurnFailedRow(b *browser, wanted func(audit.Event) bool, text string) {
	t := b.t
	t.Helper()
	h.flush()
	page, err := h.audit.Query(context.Background(), audit.Filter{Type: "chat.turn_failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || !wanted(page.Events[0]) {
		t.Fatalf("audit events = %+v, want one chat.turn_failed with the cause", page.Events)
	}
	b.do(chromedp.Navigate(h.url() + "#/audit"))
	b.wait(`document.querySelector('.audit-page')?.dataset.loaded === '1'`)
	b.setValue("#audit-type", "chat.turn_failed")
	b.click(".filters", "Apply")
	b.wait(`(() => { const li = [...document.querySelectorAll('.timeline li')]; return li.length === 1 && li[0].dataset.type === 'chat.turn_failed' && li[0].textContent.includes(` + js(text) + `) })()`)
}
