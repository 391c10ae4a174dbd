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
