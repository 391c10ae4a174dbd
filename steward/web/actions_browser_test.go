package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/push"
)

// actionsFixture is the harness with an Action Center: a real actions.db,
// its routes on the host, execute_action_step and a gated reply tool.
type actionsFixture struct {
	h     *harness
	store *actions.Store
	ids   map[string]int64
}

func newActionsFixture(t *testing.T) *actionsFixture {
	h := newHarness(t)
	ctx := context.Background()
	store, err := actions.Open(ctx, actions.Path(h.home), actions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := &actionsFixture{h: h, store: store, ids: map[string]int64{}}
	open := func(context.Context) (*actions.Store, error) { return store, nil }
	h.mounts = append(h.mounts, func(hh *host.Host) { actions.Mount(hh.Handle, open) })
	h.extraTools = append(h.extraTools,
		actions.ExecuteTool(actions.ExecuteOptions{Open: open, Dispatch: policy.CallWrapped}),
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "mcp__mail__reply_email",
			Parameters: json.RawMessage(`{"type":"object","required":["messageId","body"],"properties":{"messageId":{"type":"string"},"body":{"type":"string"}}}`)},
			Fn: func(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
				h.mu.Lock()
				h.calls["mcp__mail__reply_email"] = append(h.calls["mcp__mail__reply_email"], string(args))
				h.mu.Unlock()
				return agent.ToolResult{Content: "Reply accepted, operation wop_1"}, nil
			}},
		// create_flow as the actions MCP server offers it, saving into the same store.
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "mcp__actions__create_flow",
			Parameters: json.RawMessage(`{"type":"object","required":["name","trigger","guidance"],"properties":{"name":{"type":"string"},"trigger":{"type":"string"},"guidance":{"type":"string"},"exclusions":{"type":"string"}}}`)},
			Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
				var req actions.FlowRequest
				if err := json.Unmarshal(args, &req); err != nil {
					return agent.ToolResult{Content: err.Error(), IsError: true}, nil
				}
				fl, err := store.CreateFlow(ctx, actions.FlowFromRequest(req))
				if err != nil {
					return agent.ToolResult{Content: err.Error(), IsError: true}, nil
				}
				return agent.ToolResult{Content: fmt.Sprintf("Flow %d saved: %s", fl.ID, fl.Name)}, nil
			}})
	// The model calls execute_action_step when the chat asks it to.
	h.provider.Handle(func(req llmtest.Request) llmtest.Reply {
		msgs, _ := req.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		content, _ := last["content"].(string)
		var id, alt, step int
		if last["role"] == "user" && strings.Contains(content, "Save a flow") {
			args, _ := json.Marshal(actions.FlowRequest{Name: "Shop receipts", Trigger: "a shop confirms an order I placed",
				Guidance: "propose filing the receipt in the Purchases wiki page", Exclusions: "subscriptions"})
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "flow1", Type: "function", Function: llm.FunctionCall{Name: "mcp__actions__create_flow", Arguments: string(args)}}}}
		}
		if last["role"] == "user" {
			if _, err := fmt.Sscanf(content[strings.Index(content, "Execute step"):], "Execute step %d of alternative %d of Action Center item #%d", &step, &alt, &id); err == nil {
				args, _ := json.Marshal(map[string]int{"id": id, "alternative": alt, "step": step})
				return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "exec1", Type: "function", Function: llm.FunctionCall{Name: actions.ExecuteToolName, Arguments: string(args)}}}}
			}
		}
		return h.script(req)
	})
	h.restart() // the host picks up the routes and tools
	now := time.Now()
	yesterday, tomorrow := now.Add(-24*time.Hour), now.Add(20*time.Hour)
	replyArgs, _ := json.Marshal(map[string]string{"messageId": "42", "body": "Thursday at 10 works for me."})
	for _, it := range []actions.Item{
		{SourceKey: "mail:thread:1", Kind: "reply-needed", Title: "Answer Anna about Thursday", Summary: "Anna asks whether Thursday at 10 works.",
			Priority: actions.PriorityHigh, SourceAt: now, Proposal: []actions.Alternative{{Summary: "Accept", Confidence: 0.9, Steps: []actions.Step{
				{Label: "Reply yes", Type: "tool", Tool: "mcp__mail__reply_email", Args: replyArgs}}}}},
		{SourceKey: "mail:thread:2", Kind: "payment", Title: "Pay the October invoice", Summary: "The invoice was due yesterday.", DueAt: &yesterday, SourceAt: now},
		{SourceKey: "calendar:ev1", Kind: actions.KindEventReminder, Title: "Upcoming event: Dentist", Summary: "Starts tomorrow", DueAt: &tomorrow,
			Priority: actions.PriorityHigh, SourceAt: now},
		{SourceKey: "mail:thread:3", Kind: "task", Title: "Send the slides", Summary: "Already sent.", SourceAt: now},
	} {
		id, _, err := store.Upsert(ctx, it, false)
		if err != nil {
			t.Fatal(err)
		}
		f.ids[it.SourceKey] = id
	}
	if err := store.SetStatus(ctx, f.ids["mail:thread:3"], actions.StatusDone); err != nil {
		t.Fatal(err)
	}
	return f
}

func (b *browser) actionRows() int {
	b.t.Helper()
	return eval[int](b, `document.querySelectorAll('.actions-list .action-row').length`)
}

// waitLoads waits until the page has loaded its list more than n times.
func (b *browser) waitLoads(n int) {
	b.t.Helper()
	b.wait(fmt.Sprintf(`Number(document.querySelector('.actions-page')?.dataset.loaded || 0) > %d && !document.querySelector('.actions-page[aria-busy]')`, n))
}

func (b *browser) card(status string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector('.action-counts [data-status=%s] .value').textContent`, js(status)))
}

func (b *browser) loads() int {
	return eval[int](b, `Number(document.querySelector('.actions-page')?.dataset.loaded || 0)`)
}

func TestBrowserActionCenter(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	f := newActionsFixture(t)
	h := f.h
	ctx := context.Background()

	t.Run("open items by default with visible/total counts and a badge", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url() + "#/actions"))
		b.wait(`document.documentElement.dataset.ready === '1'`)
		b.waitLoads(0)
		if n := b.actionRows(); n != 3 {
			t.Fatalf("%d rows, want the 3 open items", n)
		}
		if got := b.card("new"); got != "3" {
			t.Errorf("new card %q", got)
		}
		if got := b.card("done"); got != "0/1" {
			t.Errorf("done card %q, want visible/total 0/1", got)
		}
		b.wait(`document.getElementById('actions-badge').textContent === '3'`)
		b.allLabelled("actions")
	})

	t.Run("both flags filter, persist across a reload and are reapplied on reconnect", func(t *testing.T) {
		b.t = t
		n := b.loads()
		b.do(chromedp.Click(`#actions-hide-expired`))
		b.waitLoads(n)
		if rows, card := b.actionRows(), b.card("new"); rows != 2 || card != "2/3" {
			t.Fatalf("hide expired: %d rows, new card %q", rows, card)
		}
		n = b.loads()
		b.do(chromedp.Click(`#actions-show-done`))
		b.waitLoads(n)
		if rows, card := b.actionRows(), b.card("done"); rows != 3 || card != "1" {
			t.Fatalf("show done + hide expired: %d rows, done card %q", rows, card)
		}
		b.wait(`document.getElementById('actions-badge').textContent === '2'`) // badges use the visible count
		if got := eval[string](b, `localStorage.getItem('steward.actions.showDone') + localStorage.getItem('steward.actions.hideExpired')`); got != "11" {
			t.Fatalf("stored flags %q", got)
		}
		b.shot("actions-desktop")

		b.do(chromedp.Reload())
		b.wait(`document.documentElement.dataset.ready === '1'`)
		b.waitLoads(0)
		if !eval[bool](b, `document.getElementById('actions-show-done').checked && document.getElementById('actions-hide-expired').checked`) {
			t.Fatal("the flags were not restored after a reload")
		}
		if rows := b.actionRows(); rows != 3 {
			t.Fatalf("after reload %d rows", rows)
		}

		// Another tab clears "hide expired"; the next connection reapplies
		// the stored flags.
		eval[bool](b, `(localStorage.setItem('steward.actions.hideExpired', '0'), true)`)
		connects := eval[int](b, `Number(document.documentElement.dataset.connects)`)
		n = b.loads()
		h.ln.dropAll()
		b.wait(fmt.Sprintf(`Number(document.documentElement.dataset.connects) > %d`, connects))
		b.waitLoads(n)
		if rows := b.actionRows(); rows != 4 || eval[bool](b, `document.getElementById('actions-hide-expired').checked`) {
			t.Fatalf("after reconnect %d rows (want 4), hide-expired box %v", rows, eval[bool](b, `document.getElementById('actions-hide-expired').checked`))
		}
	})

	t.Run("selecting an item marks it read and opens its detail", func(t *testing.T) {
		b.t = t
		id := f.ids["mail:thread:1"]
		b.do(chromedp.Click(fmt.Sprintf(`.action-row[data-action-id="%d"]`, id)))
		b.wait(fmt.Sprintf(`document.querySelector('.action-detail')?.dataset.actionId === '%d' && document.querySelector('.detail-status').textContent === 'read'`, id))
		if it, _ := f.store.Get(ctx, id); it.Status != actions.StatusRead {
			t.Fatalf("stored status %s", it.Status)
		}
		if got := eval[string](b, `document.querySelector('.action-detail h3').textContent`); got != "Answer Anna about Thursday" {
			t.Errorf("detail title %q", got)
		}
		if eval[bool](b, `document.querySelector('.action-detail').textContent.includes('null')`) {
			t.Error("the detail pane prints null")
		}
		b.wait(`document.getElementById('actions-badge').textContent === '2'`)
		b.shot("actions-detail-desktop")
	})

	t.Run("executing a step goes through the approval card", func(t *testing.T) {
		b.t = t
		id := f.ids["mail:thread:1"]
		b.click(".action-detail", "Execute")
		card := b.pendingApproval()
		args := eval[string](b, fmt.Sprintf(`document.querySelector(%s).textContent`, js(`article[data-approval-id="`+card+`"]`)))
		if !strings.Contains(args, "mcp__mail__reply_email") || !strings.Contains(args, "Thursday at 10 works for me.") {
			t.Fatalf("approval card %q", args)
		}
		if len(h.got("mcp__mail__reply_email")) != 0 {
			t.Fatal("the reply ran before approval")
		}
		b.shot("actions-approval-desktop")
		b.click(fmt.Sprintf(`article[data-approval-id=%s]`, js(card)), "Approve")
		b.lastAssistant("Done:")
		if got := h.got("mcp__mail__reply_email"); len(got) != 1 || !strings.Contains(got[0], "Thursday at 10") {
			t.Fatalf("reply calls %v", got)
		}
		it, _ := f.store.Get(ctx, id)
		if it.Status != actions.StatusDone || len(it.Diagnostics) != 1 || !strings.Contains(it.Diagnostics[0], "(ran)") {
			t.Fatalf("item after execution %+v", it)
		}
	})

	t.Run("a push for a new action opens the item", func(t *testing.T) {
		b.t = t
		id, _, err := f.store.Upsert(ctx, actions.Item{SourceKey: "mail:thread:9", Kind: "task", Title: "Confirm the venue", Summary: "The venue asks for a confirmation.", SourceAt: time.Now()}, false)
		if err != nil {
			t.Fatal(err)
		}
		// The notification the host would send, routed as the service worker does.
		var sent []string
		rec := notifierFunc(func(n string) { sent = append(sent, n) })
		if n, err := f.store.NotifyNew(ctx, rec); err != nil || n == 0 {
			t.Fatalf("notify: %d %v", n, err)
		}
		url := actions.ActionURL(id)
		if !strings.Contains(strings.Join(sent, " "), url) {
			t.Fatalf("notifications %v lack %s", sent, url)
		}
		routed := eval[string](b, fmt.Sprintf(`import(%s).then((m) => m.actionUrl(m.actionFromPayload({url: %s, data: {actionId: %s}}, location.origin)))`,
			js(eval[string](b, `document.querySelector('script[type=module]').src.replace('app.js', 'notify.js')`)), js(url), js(fmt.Sprint(id))))
		if routed != url {
			t.Fatalf("service-worker routing gave %q, want %q", routed, url)
		}
		b.do(chromedp.Navigate(h.url()[:len(h.url())-1] + url))
		b.wait(fmt.Sprintf(`document.querySelector('.action-detail')?.dataset.actionId === '%d'`, id))
		if href := eval[string](b, `location.href`); strings.Contains(href, "action=") {
			t.Errorf("the parameter was not consumed: %s", href)
		}
		if it, _ := f.store.Get(ctx, id); it.Status != actions.StatusRead {
			t.Errorf("opened item status %s", it.Status)
		}
	})
	t.Run("a flow is saved through its dedicated card, with the user's edits", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url()))
		b.send("Save a flow for shop receipts like the steps I just described")
		id := b.pendingApproval()
		sel := func(rest string) string { return fmt.Sprintf(`.flow-card[data-approval-id=%s] %s`, js(id), rest) }
		b.wait(fmt.Sprintf(`document.querySelector(%s)?.value === 'Shop receipts'`, js(sel(`[name=name]`))))
		for field, want := range map[string]string{"trigger": "a shop confirms an order I placed", "guidance": "propose filing the receipt in the Purchases wiki page", "exclusions": "subscriptions"} {
			if got := eval[string](b, fmt.Sprintf(`document.querySelector(%s).value`, js(sel(`[name=`+field+`]`)))); got != want {
				t.Errorf("%s prefilled %q, want %q", field, got, want)
			}
		}
		if fl, _ := f.store.Flows(ctx, false); len(fl) != 0 {
			t.Fatalf("a flow was saved before approval: %+v", fl)
		}
		// A required field left empty is refused on the card; nothing is sent.
		b.setValue(sel(`[name=guidance]`), "  ")
		b.click(fmt.Sprintf(`.flow-card[data-approval-id=%s]`, js(id)), "Save flow")
		b.wait(fmt.Sprintf(`document.querySelector(%s).textContent === 'Guidance is required.'`, js(sel(`.error`))))
		if st := eval[string](b, fmt.Sprintf(`document.querySelector('.flow-card[data-approval-id=%s]').dataset.state`, js(id))); st != "pending" {
			t.Fatalf("card state %s after an invalid save", st)
		}
		b.setValue(sel(`[name=name]`), "Receipts from shops")
		b.wait(fmt.Sprintf(`document.querySelector(%s).textContent === ''`, js(sel(`.error`))))
		b.setValue(sel(`[name=guidance]`), "propose filing the receipt and adding the amount to the budget")
		b.shot("actions-flow-card-desktop")
		b.click(fmt.Sprintf(`.flow-card[data-approval-id=%s]`, js(id)), "Save flow")
		b.lastAssistant("Receipts from shops")
		fl, err := f.store.Flows(ctx, false)
		if err != nil || len(fl) != 1 || fl[0].Name != "Receipts from shops" || fl[0].Guidance != "propose filing the receipt and adding the amount to the budget" ||
			fl[0].Trigger != "a shop confirms an order I placed" || fl[0].Exclusions != "subscriptions" || fl[0].Version != 1 {
			t.Fatalf("saved flows %+v %v", fl, err)
		}
		b.wait(fmt.Sprintf(`document.querySelector('.flow-card[data-approval-id=%s]').dataset.state === 'resolved' &&
			document.querySelector(%s)?.textContent === 'Receipts from shops'`, js(id), js(sel(`dd[data-field=name]`))))
		b.allLabelled("flow card")
	})
	t.Run("the System page switches calendar reminders and the language", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url() + "#/system"))
		b.wait(`document.querySelector('.action-settings')?.dataset.calendarEnabled === 'true'`)
		b.do(chromedp.Click(`#actions-calendar-enabled`))
		b.wait(`document.querySelector('.action-settings').dataset.calendarEnabled === 'false'`)
		b.do(chromedp.SetValue(`#actions-language`, "it"))
		eval[bool](b, `(document.getElementById('actions-language').dispatchEvent(new Event('change')), true)`)
		b.wait(`document.querySelector('.action-settings').dataset.textLanguage === 'it'`)
		st, err := f.store.Settings(ctx)
		if err != nil || st.CalendarEnabled || !st.Enabled || st.TextLanguage != "it" || st.UpdatedAt == nil {
			t.Fatalf("stored settings %+v %v", st, err)
		}
		b.allLabelled("system")
	})
	b.noExceptions()
}

// notifierFunc records each notification's URL and title.
type notifierFunc func(string)

func (f notifierFunc) Send(_ context.Context, n push.Notification) push.Report {
	f(n.URL + " " + n.Title)
	return push.Report{}
}
