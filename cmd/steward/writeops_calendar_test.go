package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
	"github.com/agentstack/agentstack/steward/writeops"
)

func toolJSON(t *testing.T, res *mcp.CallToolResult, err error, v any) {
	t.Helper()
	if err != nil || res.IsError {
		t.Fatalf("tool call: %v %+v", err, res)
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), v); err != nil {
		t.Fatal(err)
	}
}

// The connectors' write tools as the host runs them: the hidden preflight
// normalises the proposal, the tool journals and writes into the vdir, the
// sync/index jobs read it back, and `steward writeops confirm-calendar`
// confirms both the event and the contact.
func TestCalendarAndContactWritesThroughTheCommands(t *testing.T) {
	env, home, _, errb := pimEnv(t)
	ctx := context.Background()
	os.MkdirAll(filepath.Join(home, "cals", "home"), 0o700)
	os.MkdirAll(filepath.Join(home, "cards", "friends"), 0o700)
	pimWrite(t, filepath.Join(home, "calendar.yaml"), "timezone: Europe/Rome\nembed: off\nsources:\n"+
		"  - {name: dav, kind: ics, path: "+filepath.Join(home, "cals")+", account: me@dav}\n")
	pimWrite(t, filepath.Join(home, "contacts.yaml"), "embed: off\nsources:\n  - {name: dav, kind: vcard, path: "+filepath.Join(home, "cards")+"}\n")

	server, err := calendarMCP(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptooltest.Connect(t, server)
	args := map[string]any{"calendar": "home", "title": "Plumber", "start": "2026-05-06T12:00:00Z", "end": "2026-05-06T13:00:00Z"}
	var norm calendar.CreateEventParams
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_event_preflight", Arguments: args})
	toolJSON(t, res, err, &norm)
	if norm.CalendarID != "dav/home" || norm.Start != "2026-05-06T14:00:00+02:00" || norm.TimeZone != "Europe/Rome" {
		t.Fatalf("preflight %+v", norm)
	}
	var made calendar.WriteResult
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_event", Arguments: norm})
	toolJSON(t, res, err, &made)
	if made.State != string(writeops.StateReturned) || made.UID == "" {
		t.Fatalf("create_event: %+v", made)
	}
	if _, err := os.Stat(filepath.Join(home, "cals", "home", made.UID+".ics")); err != nil {
		t.Fatalf("no event file: %v", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_event_preflight", Arguments: map[string]any{
		"calendar": "home", "title": "x", "start": "2026-05-06T12:00:00Z", "end": "2026-05-06T11:00:00Z"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "before or when it starts") {
		t.Errorf("invalid proposal: %v %+v", err, res)
	}

	cserver, err := contactsMCP(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	cc := mcptooltest.Connect(t, cserver)
	var person contacts.WriteResult
	res, err = cc.CallTool(ctx, &mcp.CallToolParams{Name: "create_contact", Arguments: map[string]any{
		"first": "Luca", "last": "Neri", "emails": []map[string]any{{"value": "luca@neri.example", "label": "home"}}}})
	toolJSON(t, res, err, &person)
	if person.State != string(writeops.StateReturned) || person.NativeID == "" {
		t.Fatalf("create_contact: %+v", person)
	}

	for _, job := range [][]string{{"calendar", "sync"}, {"contacts", "index"}, {"writeops", "confirm-calendar"}} {
		if code := run(ctx, job, env); code != 0 {
			t.Fatalf("%v exited %d: %s", job, code, errb)
		}
	}
	j, err := openJournal(ctx, env, audit.ActorUser)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, id := range []string{made.OperationID, person.OperationID} {
		op, err := j.Get(ctx, id)
		if err != nil || op.State != writeops.StateConfirmed {
			t.Errorf("%s: %s %q %v", id, op.State, op.Note, err)
		}
	}
}

// Every watch capability of a Steward connector names a real tool whose
// input schema has each allowed and required field: a renamed argument must
// not leave a grant that can never be satisfied (or one that passes a field
// the tool ignores).
func TestWriteCapabilitiesMatchToolSchemas(t *testing.T) {
	env, _, _, _ := pimEnv(t)
	ctx := context.Background()
	props := map[string]map[string]bool{}
	for _, name := range mcpNames() {
		server, err := mcpServers[name](ctx, env)
		if err != nil {
			t.Fatalf("connector %s: %v", name, err)
		}
		cs := mcptooltest.Connect(t, server)
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			var schema struct {
				Properties map[string]any `json:"properties"`
			}
			b, _ := json.Marshal(tool.InputSchema)
			json.Unmarshal(b, &schema)
			fields := map[string]bool{}
			for f := range schema.Properties {
				fields[f] = true
			}
			props["mcp__"+name+"__"+tool.Name] = fields
		}
	}
	checked := 0
	for _, c := range writeCapabilities() {
		fields, ok := props[c.Tool]
		if !strings.HasPrefix(c.Tool, "mcp__calendar__") && !strings.HasPrefix(c.Tool, "mcp__contacts__") {
			continue
		}
		checked++
		if !ok {
			t.Errorf("capability %s names no tool", c.Tool)
			continue
		}
		for _, f := range append(append([]string{}, c.Allowed...), c.Required...) {
			if !fields[f] {
				t.Errorf("capability %s allows %q, which the tool's schema does not have", c.Tool, f)
			}
		}
	}
	if checked != 5 {
		t.Errorf("%d calendar and contacts capabilities, want 5", checked)
	}
}
