package web_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/watch"
)

// The notification tests run inside the existing browser sessions (see
// TestBrowserDesktop and TestBrowserMobile): Chromium starts slowly.
//
// Headless Chromium has no push service: PushManager.subscribe() never
// settles there. The page's PushManager is replaced by pushStub, which
// answers with a subscription whose keys the test made; everything else —
// the permission, the service worker, the host's /push/* routes, the
// notification a push shows — is the real thing. Pushes reach the service
// worker through the DevTools protocol (ServiceWorker.deliverPushMessage).

// pushLog returns the recorded /push/* calls and push service deliveries.
func (h *harness) pushLog() (calls, sent []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.pushCalls...), append([]string(nil), h.pushSent...)
}

// waitFor polls a host-side condition; the deadline is a hang guard only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(45 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deliverWatch runs a watch delivery into chatID as the engine does.
func (h *harness) deliverWatch(t *testing.T, turn watch.Turn) watch.Delivered {
	t.Helper()
	d, err := h.host.Manager().DeliverWatchTurn(context.Background(), turn)
	if err != nil {
		t.Fatalf("deliver watch turn: %v", err)
	}
	return d
}

// pushStub replaces the page's PushManager with one that subscribes at
// once with the given endpoint and keys, remembering (in localStorage, so
// that it survives reloads) the options subscribe() was called with.
func pushStub(endpoint, p256dh, auth string) string {
	return fmt.Sprintf(`(() => {
	if (!('PushManager' in window) || window.__pushStub) return;
	window.__pushStub = true;
	const KEY = 'test.push.subscription';
	const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
	const unb64 = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) %% 4)), (c) => c.charCodeAt(0)).buffer;
	const make = (rec) => ({
		endpoint: rec.endpoint, expirationTime: null,
		options: { userVisibleOnly: rec.userVisibleOnly, applicationServerKey: unb64(rec.key) },
		toJSON: () => ({ endpoint: rec.endpoint, expirationTime: null, keys: rec.keys }),
		unsubscribe: async () => { localStorage.removeItem(KEY); return true; },
	});
	PushManager.prototype.subscribe = async function (opts) {
		const rec = { endpoint: %s, keys: { p256dh: %s, auth: %s }, userVisibleOnly: opts.userVisibleOnly, key: b64(opts.applicationServerKey) };
		localStorage.setItem(KEY, JSON.stringify(rec));
		return make(rec);
	};
	PushManager.prototype.getSubscription = async function () {
		const s = localStorage.getItem(KEY);
		return s ? make(JSON.parse(s)) : null;
	};
})()`, js(endpoint), js(p256dh), js(auth))
}

// setNotifications sets the origin's notification permission as the user
// would in the site settings.
func (b *browser) setNotifications(origin string, setting cdpbrowser.PermissionSetting) {
	b.t.Helper()
	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: setting, Origin: origin}); err != nil {
		b.t.Fatalf("set notification permission: %v", err)
	}
}

// openSystem shows the System page afresh (its controls read the state when drawn).
func (b *browser) openSystem() {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	b.wait(`document.body.dataset.route === 'new'`)
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/system'`))
	b.wait(`document.querySelector('.system-page .notifications')?.dataset.state`)
}

// notifyCases are the pure helpers of static/js/notify.js, run in the page
// on the app's origin (O) with the module as m. Each want is JSON.
var notifyCases = []struct{ name, expr, want string }{
	{"the host's payload", `m.notificationFromPayload(JSON.parse(` + jsonString(push.Notification{Title: "Treno 9547", Body: "Parte dal binario 4.",
		Tag: "watch:w1:e1", URL: "/?chat=chat_0123456789abcdef01", ChatID: "chat_0123456789abcdef01", Data: map[string]string{"watchId": "w1"}}) + `), { origin: O, icon: '/i.png' })`,
		`{"title":"Treno 9547","options":{"body":"Parte dal binario 4.","icon":"/i.png","tag":"watch:w1:e1","data":{"url":"/?chat=chat_0123456789abcdef01","chatId":"chat_0123456789abcdef01"}}}`},
	{"the chat from the url alone", `m.notificationFromPayload({ title: 'T', body: 'B', url: '/?chat=chat_abc' }, { origin: O }).options.data`,
		`{"url":"/?chat=chat_abc","chatId":"chat_abc"}`},
	{"a foreign url opens the app only", `m.notificationFromPayload({ body: 'B', url: 'https://evil.example/?chat=chat_abc' }, { origin: O }).options.data`,
		`{"url":"/","chatId":""}`},
	{"a hostile chat id is dropped", `m.notificationFromPayload({ body: 'B', chatId: 'chat_x/../../evil', url: 'javascript:alert(1)' }, { origin: O }).options.data`,
		`{"url":"/","chatId":""}`},
	{"no payload", `m.notificationFromPayload(m.parsePush(''), { origin: O })`,
		`{"title":"Steward","options":{"body":"Steward has something for you.","data":{"url":"/","chatId":""}}}`},
	{"plain text becomes the body", `m.notificationFromPayload(m.parsePush('not json {'), { origin: O })`,
		`{"title":"Steward","options":{"body":"not json {","data":{"url":"/","chatId":""}}}`},
	{"wrong types give the defaults", `m.notificationFromPayload({ title: 7, body: ['x'], tag: {}, chatId: 12 }, { origin: O })`,
		`{"title":"Steward","options":{"body":"Steward has something for you.","data":{"url":"/","chatId":""}}}`},
	{"an array is not a payload", `m.notificationFromPayload(m.parsePush('[1,2]'), { origin: O }).title`, `"Steward"`},
	{"long and control characters", `(() => { const n = m.notificationFromPayload({ title: 'a\u0000b\n' + 'x'.repeat(200), body: 'line 1\nline 2\u0007' + 'y'.repeat(400) }, { origin: O });
		return [[...n.title].length, n.title.slice(0, 4), n.title.endsWith('…'), [...n.options.body].length, n.options.body.slice(0, 14)] })()`,
		`[80,"a b ",true,240,"line 1\nline 2 "]`},
	{"click data", `[m.chatFromNotification({ chatId: 'chat_abc' }), m.chatFromNotification({ chatId: 'chat_<b>' }), m.chatFromNotification(null)]`,
		`["chat_abc","",""]`},
	{"messages", `[m.chatFromMessage(m.openChatMessage('chat_abc')), m.chatFromMessage({ type: 'other', chatId: 'chat_abc' }),
		m.chatFromMessage({ type: m.OPEN_CHAT, chatId: 'chat_a b' }), m.chatFromMessage('chat_abc'), m.chatFromMessage(null)]`,
		`["chat_abc","","","",""]`},
	{"the window a click focuses", `(() => { const w = (url, focused) => ({ type: 'window', url, focused });
		const a = w('https://evil.example/', true), b = w(O + '/#/usage', false), c = w(O + '/', true);
		return [m.pickWindow([a, b], O) === b, m.pickWindow([a, b, c], O) === c, m.pickWindow([a], O), m.pickWindow([], O)] })()`,
		`[true,true,null,null]`},
	{"chat urls", `[m.chatUrl('chat_abc'), m.chatUrl('chat_../x'), m.chatUrl('')]`, `["/?chat=chat_abc","/","/"]`},
	{"the chat parameter", `[m.chatParam(O + '/?chat=chat_abc&x=1'), m.chatParam(O + '/?chat=%3Cscript%3E'), m.chatParam(O + '/#/c/chat_abc')]`,
		`[{"present":true,"chatId":"chat_abc"},{"present":true,"chatId":""},{"present":false,"chatId":""}]`},
	{"the address bar without it", `[m.withoutChatParam(O + '/?chat=chat_abc&x=1#/usage', 'chat_abc'), m.withoutChatParam(O + '/?chat=bad#/usage', '')]`,
		`["/?x=1#/c/chat_abc","/#/usage"]`},
}

// jsonString is v as JSON in a JavaScript string literal, as a push
// message's text arrives.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return js(string(b))
}

// testNotifyModule imports static/js/notify.js on the app's origin — the
// module the service worker imports — and checks every case.
func testNotifyModule(t *testing.T, b *browser) {
	var fns []string
	for _, c := range notifyCases {
		fns = append(fns, fmt.Sprintf("[%s, (m, O) => %s]", js(c.name), c.expr))
	}
	got := eval[map[string]any](b, fmt.Sprintf(`(async () => {
		const src = document.querySelector('script[type=module]').src.replace(/app\.js$/, 'notify.js');
		const m = await import(src);
		const out = {};
		for (const [name, f] of [%s]) {
			try { out[name] = JSON.parse(JSON.stringify(f(m, location.origin))); } catch (e) { out[name] = 'threw ' + e; }
		}
		return out;
	})()`, strings.Join(fns, ",\n")))
	for _, c := range notifyCases {
		var want any
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", c.name, err)
		}
		if !reflect.DeepEqual(got[c.name], want) {
			g, _ := json.Marshal(got[c.name])
			t.Errorf("%s: got %s, want %s", c.name, g, c.want)
		}
	}
}

// newDeviceKeys returns a subscription's base64url p256dh and auth as a
// browser would create them.
func newDeviceKeys(t *testing.T) (p256dh, auth string) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	return base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(secret)
}

// testWatchTurnsInChats: a watch turn into a chat that is not on screen
// marks it unread in the list at once; opening it shows the automatic
// message. A watch turn into the chat on screen streams into it and leaves
// it read, on the host too.
func testWatchTurnsInChats(t *testing.T, b *browser, h *harness) string {
	ctx := context.Background()
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	chat, err := h.store.Create(ctx, "Treno per Torino", "user")
	if err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`document.querySelector('.chat-link[data-chat-id=%s]')`, js(chat.ID))
	h.deliverWatch(t, watch.Turn{ChatID: chat.ID, WatchID: "watch_1", EventID: "ev_1", Fallback: "Il treno 9547 parte dal binario 4."})
	// The page learns of the chat and its unread state from the broadcast alone.
	b.wait(link + `?.classList.contains('unread') && ` + link + `.querySelector('.dot')`)
	b.do(chromedp.Click(fmt.Sprintf(`a.chat-link[data-chat-id=%q]`, chat.ID)))
	b.wait(`[...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('binario 4'))`)
	b.wait(link + `.classList.contains('current') && !` + link + `.classList.contains('unread')`)
	if got, _ := h.store.Get(ctx, chat.ID); got.Unread {
		t.Error("opening the chat did not mark it read on the host")
	}

	h.deliverWatch(t, watch.Turn{ChatID: chat.ID, WatchID: "watch_1", EventID: "ev_2", Prompt: "[Steward watch event] the train left Milano"})
	b.lastAssistant("you said: [Steward watch event] the train left Milano")
	if n := eval[int](b, `[...document.querySelectorAll('.msg.user')].filter((m) => m.textContent.includes('Steward watch event')).length`); n != 0 {
		t.Errorf("the automatic event shows as %d user message(s)", n)
	}
	// The host marked the chat unread when the turn ended; the page on
	// screen read it again.
	waitFor(t, "the open chat to be read on the host", func() bool {
		c, err := h.store.Get(ctx, chat.ID)
		return err == nil && !c.Unread
	})
	b.wait(`document.querySelector('.chat-view').dataset.running === '0' && !` + link + `.classList.contains('unread')`)
	return chat.ID
}

// testChatURL: a window opened by a notification (/?chat=…) shows that chat
// once the connection is authenticated and drops the parameter; an invalid
// one is ignored and dropped; the token is never in the URL.
func testChatURL(t *testing.T, b *browser, h *harness, chatID string) {
	b.do(chromedp.Navigate(h.url() + "?chat=" + chatID))
	b.wait(fmt.Sprintf(`document.documentElement.dataset.ready === '1' && document.querySelector('.chat-link.current')?.dataset.chatId === %s`, js(chatID)))
	b.wait(`[...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('binario 4'))`)
	if got := eval[string](b, `location.pathname + location.search + location.hash`); got != "/#/c/"+chatID {
		t.Errorf("address after opening = %q, want /#/c/%s", got, chatID)
	}
	b.do(chromedp.Navigate(h.url() + "?chat=chat_x%2F..%2Fevil&keep=1#/usage"))
	b.wait(`document.documentElement.dataset.ready === '1' && document.querySelector('.usage-page')`)
	b.wait(`location.search === '?keep=1'`)
	if got := eval[string](b, `location.hash`); got != "#/usage" {
		t.Errorf("an invalid chat parameter changed the route to %q", got)
	}
	if u := eval[string](b, `location.href`); strings.Contains(u, hostToken) {
		t.Errorf("the token is in the URL %s", u)
	}
}

// testEnableNotifications: the one-time offer, the blocked state, enabling
// from the System page (permission, GET /push/public-key, subscribe with the
// host's key, POST /push/subscribe — in that order, with the token), a test
// push, the re-sync on load, and turning it off.
func testEnableNotifications(t *testing.T, b *browser, h *harness) {
	origin := strings.TrimSuffix(h.url(), "/")
	p256dh, auth := newDeviceKeys(t)
	endpoint := "https://push.example.test/send/device-1"
	stub := pushStub(endpoint, p256dh, auth)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: stub}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Evaluate[chromedp.Void](stub))
	bearer := "Bearer " + hostToken

	// First use: the sidebar offers notifications once.
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	b.wait(`document.querySelector('.notify-prompt')`)
	b.allLabelled("notification offer")
	// Headless Chromium denies a permission request nobody can see: the
	// blocked path.
	b.click(".notify-prompt", "Enable notifications")
	b.wait(`!document.querySelector('.notify-prompt') && Notification.permission === 'denied'`)
	b.wait(`[...document.querySelectorAll('.toast')].some((t) => t.textContent.includes('blocked'))`)
	b.openSystem()
	if st := eval[string](b, `document.querySelector('.notifications').dataset.state`); st != "blocked" {
		t.Errorf("state after a denied request = %q, want blocked", st)
	}
	if n := eval[int](b, `document.querySelectorAll('.notifications button').length`); n != 0 {
		t.Errorf("a blocked state offers %d buttons", n)
	}
	if calls, _ := h.pushLog(); len(calls) != 0 {
		t.Errorf("the host was called while notifications are blocked: %v", calls)
	}

	// The user allows notifications in the site settings.
	b.setNotifications(origin, cdpbrowser.PermissionSettingGranted)
	b.openSystem()
	b.wait(`document.querySelector('.notifications').dataset.state === 'off'`)
	if text := eval[string](b, `document.querySelector('.notifications').textContent`); strings.Contains(text, "null") || !strings.Contains(text, "off for this device") {
		t.Errorf("notifications section = %q", text)
	}
	b.click(".notifications", "Enable notifications")
	b.wait(`document.querySelector('.notifications').dataset.state === 'enabled'`)
	calls, _ := h.pushLog()
	if want := []string{"GET /push/public-key " + bearer, "POST /push/subscribe " + bearer}; !reflect.DeepEqual(calls, want) {
		t.Errorf("push calls = %q, want %q", calls, want)
	}
	subs := h.push.Subscriptions()
	if len(subs) != 1 || subs[0].Endpoint != endpoint || subs[0].Keys.P256dh != p256dh || subs[0].Keys.Auth != auth || subs[0].Label == "" {
		t.Errorf("host subscriptions = %+v, want this device's endpoint, keys and a label", subs)
	}
	type subscribed struct {
		Key             string `json:"key"`
		UserVisibleOnly bool   `json:"userVisibleOnly"`
	}
	got := eval[subscribed](b, `JSON.parse(localStorage.getItem('test.push.subscription'))`)
	if got.Key != h.push.PublicKey() || !got.UserVisibleOnly {
		t.Errorf("subscribe() got key %q userVisibleOnly %v; want the host's VAPID key %q, true", got.Key, got.UserVisibleOnly, h.push.PublicKey())
	}
	b.allLabelled("notifications enabled")

	b.click(".notifications", "Send a test notification")
	b.wait(`document.querySelector('.notifications [role=status]')?.textContent.includes('1 of 1 device accepted')`)
	if _, sent := h.pushLog(); len(sent) != 1 || !strings.HasSuffix(endpoint, sent[0]) {
		t.Errorf("the push service received %q, want one message for %s", sent, endpoint)
	}

	// A later load sends the subscription to the host again (a host that lost
	// it gets it back) and does not offer notifications again.
	b.do(chromedp.Reload())
	b.wait(`document.documentElement.dataset.ready === '1'`)
	waitFor(t, "the subscription re-sent on load", func() bool { c, _ := h.pushLog(); return len(c) >= 5 })
	calls, _ = h.pushLog()
	if want := []string{"GET /push/public-key " + bearer, "POST /push/subscribe " + bearer}; !reflect.DeepEqual(calls[3:5], want) {
		t.Errorf("calls on reload = %q, want %q", calls[3:], want)
	}
	if eval[bool](b, `!!document.querySelector('.notify-prompt')`) {
		t.Error("the notification offer shows again after an answer")
	}
}

// testPushAndClick: a push shows its notification (title, body, tag, icon,
// the chat in data); missing or malformed payloads show a plain one. A click
// on it, with the app open, tells the window to show the chat; forged
// messages are ignored.
func testPushAndClick(t *testing.T, b *browser, h *harness, chatID string) {
	origin := strings.TrimSuffix(h.url(), "/")
	regs := make(chan serviceworker.RegistrationID, 16)
	// What the service worker did, for the failure message of a push that
	// shows nothing.
	var swMu sync.Mutex
	var swLog []string
	logSW := func(format string, args ...any) {
		swMu.Lock()
		defer swMu.Unlock()
		swLog = append(swLog, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	if err := chromedp.Listen(b.ctx, func(ev any) {
		switch e := ev.(type) {
		case *serviceworker.EventWorkerVersionUpdated:
			for _, v := range e.Versions {
				logSW("version %s of registration %s: %s, %s", v.VersionID, v.RegistrationID, v.Status, v.RunningStatus)
			}
		case *serviceworker.EventWorkerErrorReported:
			logSW("error in registration %s: %s (%s:%d)", e.ErrorMessage.RegistrationID, e.ErrorMessage.ErrorMessage, e.ErrorMessage.SourceURL, e.ErrorMessage.LineNumber)
		case *serviceworker.EventWorkerRegistrationUpdated:
			for _, r := range e.Registrations {
				logSW("registration %s %s deleted=%v", r.RegistrationID, r.ScopeURL, r.IsDeleted)
				if !r.IsDeleted && r.ScopeURL == h.url() {
					select {
					case regs <- r.RegistrationID:
					default:
					}
				}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/usage'`))
	b.wait(`navigator.serviceWorker.ready.then(() => true)`)
	if _, err := chromedp.Call(b.ctx, serviceworker.Enable, struct{}{}); err != nil {
		t.Fatal(err)
	}
	var reg serviceworker.RegistrationID
	select {
	case reg = <-regs:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("no service worker registration reported")
	}
	deliver := func(data string) {
		t.Helper()
		if _, err := chromedp.Call(b.ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: origin, RegistrationID: reg, Data: data}); err != nil {
			t.Fatalf("deliver push: %v", err)
		}
	}
	payload, _ := json.Marshal(push.Notification{Title: "Treno 9547", Body: "Il treno 9547 parte dal binario 4.", Tag: "watch:watch_1:ev_1",
		URL: "/?chat=" + chatID, ChatID: chatID, Data: map[string]string{"watchId": "watch_1", "eventId": "ev_1"}})
	// The service worker's showNotification calls are recorded as they
	// happen, in the worker itself (attached to DevTools, so it is never
	// stopped for being idle): headless Chromium may drop shown
	// notifications from getNotifications() after a while (on a loaded
	// machine within the test's own steps), so the list cannot be read later.
	targets, err := chromedp.Targets(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var swTarget target.ID
	for _, tg := range targets {
		if tg.Type == "service_worker" && tg.URL == origin+"/sw.js" {
			swTarget = tg.TargetID
		}
	}
	if swTarget == "" {
		t.Fatal("no service worker target")
	}
	// Detached, not closed, at the end: closing the target would stop the
	// worker under the tests that follow.
	swCtx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(swTarget), chromedp.WithDetachOnCancel())
	defer cancel()
	evalIn[bool](t, swCtx, `(() => {
		if (self.__shown) return true;
		self.__shown = [];
		self.__closed = [];
		const show = ServiceWorkerRegistration.prototype.showNotification;
		ServiceWorkerRegistration.prototype.showNotification = async function (title, options) {
			await show.call(this, title, options);
			// The live Notification, kept for the click below.
			const list = await this.getNotifications(options?.tag ? { tag: options.tag } : undefined);
			self.__shown.push({ title, options, notification: list.find((n) => n.body === options?.body) || null });
		};
		const close = Notification.prototype.close;
		Notification.prototype.close = function () { self.__closed.push(this.tag); return close.call(this); };
		return true;
	})()`)
	// One push at a time, each waited for: pushes delivered back to back
	// can reach a service worker that is still starting up.
	for i, data := range []string{string(payload), "not json {", ""} {
		logSW("deliver push %d to registration %s", i+1, reg)
		deliver(data)
		for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(40 * time.Millisecond) { // a hang guard
			n := evalIn[int](t, swCtx, `self.__shown.length`)
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				swMu.Lock()
				events := strings.Join(swLog, "\n")
				swMu.Unlock()
				t.Fatalf("push %d: %d notifications shown, want %d\nservice worker events:\n%s%s", i+1, n, i+1, events, b.debug())
			}
		}
	}
	type shown struct {
		Title, Body, Tag, Icon string
		Data                   map[string]string
	}
	notes := evalIn[[]shown](t, swCtx, `self.__shown.map(({ title, options: o }) => ({ title, body: o.body, tag: o.tag, icon: o.icon, data: o.data }))`)
	byBody := map[string]shown{}
	for _, n := range notes {
		byBody[n.Body] = n
	}
	w := byBody["Il treno 9547 parte dal binario 4."]
	if w.Title != "Treno 9547" || w.Tag != "watch:watch_1:ev_1" || !strings.HasSuffix(w.Icon, "/icons/icon-192.png") ||
		!reflect.DeepEqual(w.Data, map[string]string{"url": "/?chat=" + chatID, "chatId": chatID}) {
		t.Errorf("watch notification = %+v", w)
	}
	if p := byBody["not json {"]; p.Title != "Steward" || p.Data["url"] != "/" {
		t.Errorf("plain-text push = %+v", p)
	}
	if d := byBody["Steward has something for you."]; d.Title != "Steward" || d.Data["url"] != "/" {
		t.Errorf("empty push = %+v (all: %+v)", d, notes)
	}

	// Clicking: the service worker's own handler runs on a script-made
	// event (no DevTools command clicks a notification). Such an event may
	// not waitUntil, focus or open a window — the handler's promise still
	// runs and posts to the open window, which is what is checked here.
	// Forged messages go first.
	b.do(chromedp.Evaluate[chromedp.Void](`window.__routes = []; addEventListener('hashchange', () => window.__routes.push(location.hash))`))
	clicked := evalIn[string](t, swCtx, fmt.Sprintf(`(async () => {
		for (const c of await self.clients.matchAll({ type: 'window' })) {
			c.postMessage({ type: 'steward.open-chat', chatId: 'chat_x/../../evil' });
			c.postMessage({ type: 'navigate', chatId: %[1]s });
			c.postMessage(%[1]s);
		}
		const n = self.__shown.find((x) => x.options?.tag === 'watch:watch_1:ev_1')?.notification;
		if (!n) return 'no live notification was kept for the watch push';
		self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n }));
		return n.tag;
	})()`, js(chatID)))
	if clicked != "watch:watch_1:ev_1" {
		t.Fatalf("click in the service worker: %q", clicked)
	}
	b.wait(fmt.Sprintf(`document.querySelector('.chat-link.current')?.dataset.chatId === %s && location.hash === %s`, js(chatID), js("#/c/"+chatID)))
	b.wait(`[...document.querySelectorAll('.msg.assistant')].some((m) => m.textContent.includes('binario 4'))`)
	if routes := eval[[]string](b, `window.__routes`); !reflect.DeepEqual(routes, []string{"#/c/" + chatID}) {
		t.Errorf("routes taken = %q; forged messages must be ignored", routes)
	}
	// The clicked notification, and only it, is closed.
	if closed := evalIn[[]string](t, swCtx, `self.__closed`); !reflect.DeepEqual(closed, []string{"watch:watch_1:ev_1"}) {
		t.Errorf("notifications closed = %q, want only the clicked one", closed)
	}
}

// testDisableNotifications: turning notifications off tells the host and
// ends the browser's subscription.
func testDisableNotifications(t *testing.T, b *browser, h *harness) {
	b.openSystem()
	b.wait(`document.querySelector('.notifications').dataset.state === 'enabled'`)
	before, _ := h.pushLog()
	b.click(".notifications", "Turn off notifications")
	b.wait(`document.querySelector('.notifications').dataset.state === 'off' && !localStorage.getItem('test.push.subscription')`)
	calls, _ := h.pushLog()
	if want := []string{"POST /push/unsubscribe Bearer " + hostToken}; !reflect.DeepEqual(calls[len(before):], want) {
		t.Errorf("calls = %q, want %q", calls[len(before):], want)
	}
	if subs := h.push.Subscriptions(); len(subs) != 0 {
		t.Errorf("the host still has %d subscription(s)", len(subs))
	}
}

// evalIn evaluates a promise-valued expression in a DevTools target (the
// service worker) and returns its value.
func evalIn[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
