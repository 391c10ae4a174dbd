package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/documents"
	mailsearch "github.com/agentstack/agentstack/steward/connectors/mail/search"
	"github.com/agentstack/agentstack/steward/connectors/shell"
	"github.com/agentstack/agentstack/steward/connectors/trains"
	"github.com/agentstack/agentstack/steward/policy"
)

// eventStart is the start of the event cards, in the event's own zone.
const eventStart = "2026-12-03T09:00:00+01:00"

// connectorCards are the results of the eight card tools as the MCP bridge
// hands them to the host: the connector's structured content (its own Go
// types, with the kinds its MCP server sets) beside the text the model reads.
func (h *harness) connectorCards() map[string]any {
	// Outside STEWARD_HOME, which the sensitive-path guard protects.
	dir := filepath.Join(filepath.Dir(h.home), "card-files")
	os.MkdirAll(dir, 0o700)
	report, notes := filepath.Join(dir, "report-2026.pdf"), filepath.Join(dir, "notes.txt")
	os.WriteFile(report, []byte("%PDF-1.4 report bytes"), 0o600)
	os.WriteFile(notes, []byte("the notes' content"), 0o600)
	ev := calendar.EventSummary{Kind: "event", UID: "ev1@x", Title: "Budget review", Start: eventStart, End: "2026-12-03T10:00:00+01:00",
		Location: "Room 4", Calendar: "Work", Account: "iCloud"}
	email := mailsearch.Summary{Kind: "email", ID: "42", Subject: "Invoice for November", Sender: "Billing <billing@example.org>",
		Date: "2026-11-29T09:30:00Z", Account: "work", Mailbox: "INBOX", Snippet: "Your invoice is attached.", ThreadID: "7",
		MailURL: "message://%3Cinvoice%40example.org%3E"}
	return map[string]any{
		// Served as "mail2" because the harness's own mcp__mail__search_mail is taken.
		"mcp__mail2__search_mail": &mailsearch.Result{Kind: "search_results", Messages: []mailsearch.Summary{email},
			Page: mailsearch.Page{Limit: 8, Returned: 1, Total: 1, Mode: "browse"}},
		"mcp__mail__read_message": &mailsearch.MessageView{Kind: "email", ID: "42", Subject: "Invoice for November", Sender: "Billing <billing@example.org>",
			To: "me@example.org", Date: "2026-11-29T09:30:00Z", Account: "work", Mailbox: "INBOX", Body: "Dear customer, your invoice is attached.",
			BodyState: "full", MailURL: email.MailURL, Attachments: []mailsearch.AttachmentView{{ID: "1", Filename: "invoice.pdf", Size: 48213}}},
		"mcp__calendar__search_events": &calendar.SearchResult{Kind: "search_results", Mode: "window", Events: []calendar.EventSummary{ev}},
		"mcp__calendar__read_event":    &calendar.Event{EventSummary: ev, Notes: "Bring the numbers."},
		"mcp__shell__find_files": &shell.FindResult{Kind: "search_results", Root: dir, Files: []shell.FoundFile{
			{Kind: "file", Path: report, Name: "report-2026.pdf", Type: "file", Size: 21, Modified: "2026-11-30T10:00:00Z"}}},
		"mcp__documents__document_info": &documents.InfoResult{Kind: "file", Name: "notes.txt", Path: notes, Format: documents.FormatText,
			Size: 18, Modified: "2026-11-30T10:00:00Z", Pages: 1, Characters: 18},
		"mcp__contacts__search_contacts": &contacts.SearchResult{Kind: "search_results", Contacts: []contacts.ContactSummary{{Kind: "contact",
			UID: "c1", Name: "Anna Verdi", Organization: "Politecnico di Milano", Title: "Professor",
			Emails: []contacts.Labeled{{Label: "work", Value: "anna@polimi.it"}}, Phones: []contacts.Labeled{{Label: "mobile", Value: "+39 333 123 4567"}}}}},
		"mcp__trains__find_next_train": &trains.FindResult{Kind: "train", Status: "found", Message: "found", Train: &trains.Snapshot{
			Train: trains.TrainInfo{Number: 2033, Category: "RV"}, From: trains.Endpoint{Name: "MILANO CENTRALE"}, To: trains.Endpoint{Name: "TORINO PORTA NUOVA"},
			ScheduledDeparture: "2026-12-01T17:05:00+01:00", Platform: "7", PlatformStatus: "confirmed", DelayMinutes: 5}},
		// Another MCP server's file card: shown, but never opened through the host.
		"mcp__other__find_files": &shell.FindResult{Kind: "search_results", Root: dir, Files: []shell.FoundFile{
			{Kind: "file", Path: notes, Name: "notes.txt", Type: "file", Size: 18}}},
	}
}

// readOnlyHints are the readOnlyHint annotations of the connectors' reads
// that the harness serves (the card tools and the mail search), as the
// connectors' MCP servers declare them.
func (h *harness) readOnlyHints() policy.StaticHints {
	hints := policy.StaticHints{"mcp__mail__search_mail": true}
	for name := range h.connectorCards() {
		hints[name] = true
	}
	return hints
}

// cardTools serves connectorCards as tools.
func (h *harness) cardTools() []agent.Tool {
	var out []agent.Tool
	for name, v := range h.connectorCards() {
		structured, err := json.Marshal(v)
		if err != nil {
			h.t.Fatal(err)
		}
		data, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": string(structured)}}, "structuredContent": json.RawMessage(structured)})
		out = append(out, agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)},
			Fn: func(_ context.Context, _ json.RawMessage) (agent.ToolResult, error) {
				return agent.ToolResult{Content: string(structured), Data: data}, nil
			}})
	}
	return out
}

// cardCalls is the model calling every card tool at once.
func (h *harness) cardCalls() llmtest.Reply {
	var calls []llm.ToolCall
	i := 0
	for name := range h.connectorCards() {
		i++
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("card_%d", i), Type: "function", Function: llm.FunctionCall{Name: name, Arguments: "{}"}})
	}
	return llmtest.Reply{ToolCalls: calls}
}

func TestBrowserConnectorCards(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 900, false)
	h := newHarness(t)
	b.do(chromedp.Navigate(h.url()))
	b.wait(`document.documentElement.dataset.ready === '1'`)
	b.send("show cards")
	// The two unknown servers' tools (mail2, other) wait for approval, as
	// any tool the policy does not know.
	for range 2 {
		id := b.pendingApproval()
		b.click(card(id), "Approve")
		b.wait(fmt.Sprintf(`document.querySelector(%s).dataset.state === 'resolved'`, js(card(id))))
	}
	b.lastAssistant("Done:")
	b.wait(`document.querySelectorAll('.tool-card[data-status="done"]').length === 9`)

	cardOf := func(tool string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('.tool-card')].find((c) => c.querySelector('.tool-name').textContent === %s)`, js(tool))
	}
	kinds := map[string]string{
		"mcp__mail2__search_mail": "search_results", "mcp__mail__read_message": "email", "mcp__calendar__search_events": "search_results",
		"mcp__calendar__read_event": "event", "mcp__shell__find_files": "search_results", "mcp__documents__document_info": "file",
		"mcp__contacts__search_contacts": "search_results", "mcp__trains__find_next_train": "train",
	}
	for tool, kind := range kinds {
		if got := eval[string](b, cardOf(tool)+`?.querySelector('.rich')?.className || ''`); got != "rich rich-"+kind {
			t.Errorf("%s renders %q, want a %s card", tool, got, kind)
		}
	}

	// Mail: the message opens in Mail through its message:// link.
	for _, tool := range []string{"mcp__mail2__search_mail", "mcp__mail__read_message"} {
		if href := eval[string](b, cardOf(tool)+`.querySelector('a.card-action')?.getAttribute('href') || ''`); href != "message://%3Cinvoice%40example.org%3E" {
			t.Errorf("%s: open-in-Mail link %q", tool, href)
		}
		if title := eval[string](b, cardOf(tool)+`.querySelector('.rich-title').textContent.trim()`); title != "Invoice for November" {
			t.Errorf("%s: title %q", tool, title)
		}
	}

	// Events: the time is shown in the browser's (here the test's) zone.
	start, _ := time.Parse(time.RFC3339, eventStart)
	local := start.In(time.Local)
	for _, tool := range []string{"mcp__calendar__search_events", "mcp__calendar__read_event"} {
		text := eval[string](b, cardOf(tool)+`.querySelector('.event-time').textContent`)
		if !strings.Contains(text, local.Format("3:04")) || !strings.Contains(text, "Room 4") {
			t.Errorf("%s: event time %q, want %s local time", tool, text, local.Format("15:04 MST"))
		}
	}

	// Files: opened through the file token registry, never by path.
	for tool, want := range map[string]string{"mcp__shell__find_files": "%PDF-1.4 report bytes", "mcp__documents__document_info": "the notes' content"} {
		got := eval[string](b, fmt.Sprintf(`(async () => { const btn = %s.querySelector('button.card-action');
			if (!btn || !btn.dataset.token) return 'no open button';
			const r = await fetch('/file/' + btn.dataset.token, { headers: { Authorization: 'Bearer ' + %s } });
			return await r.text(); })()`, cardOf(tool), js(hostToken)))
		if got != want {
			t.Errorf("%s: opening the file gave %q, want %q", tool, got, want)
		}
	}
	if n := eval[int](b, cardOf("mcp__other__find_files")+`.querySelectorAll('button.card-action').length`); n != 0 {
		t.Errorf("another server's file card has %d open buttons; only built-in connectors' files may be opened", n)
	}

	// Contacts: mail and call links.
	if links := eval[[]string](b, cardOf("mcp__contacts__search_contacts")+`.querySelectorAll('a.card-action').length ? [...`+cardOf("mcp__contacts__search_contacts")+`.querySelectorAll('a.card-action')].map((a) => a.getAttribute('href')) : []`); strings.Join(links, " ") != "mailto:anna%40polimi.it tel:+393331234567" {
		t.Errorf("contact links %q", links)
	}

	// Trains: platform and train, with a copy action.
	train := cardOf("mcp__trains__find_next_train")
	if text := eval[string](b, train+`.querySelector('.rich').textContent`); !strings.Contains(text, "RV 2033") || !strings.Contains(text, "platform 7") || !strings.Contains(text, "5 min late") {
		t.Errorf("train card %q", text)
	}
	b.do(chromedp.Click(`//button[contains(., 'Copy platform and train')]`))
	b.wait(train + `.querySelector('button.card-action').textContent.trim() !== 'Copy platform and train'`)

	b.allLabelled("connector cards")
	b.noExceptions()
	for tool := range kinds {
		b.do(chromedp.Evaluate[chromedp.Void](cardOf(tool) + `.scrollIntoView({ block: 'center' })`))
		b.shot("card-" + strings.TrimPrefix(strings.ReplaceAll(tool, "__", "-"), "mcp-"))
	}
}
