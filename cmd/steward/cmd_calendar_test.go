package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

// pimEnv is a cliEnv over a private STEWARD_HOME.
func pimEnv(t *testing.T) (*cliEnv, string, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"STEWARD_HOME": home}
	var out, errb bytes.Buffer
	env := &cliEnv{Stdout: &out, Stderr: &errb, loadOpts: config.LoadOptions{
		Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}}
	env.Log = newLogger(&errb, "warn")
	return env, home, &out, &errb
}

func pimWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCalendarSyncCommandAndMCP(t *testing.T) {
	env, home, out, errb := pimEnv(t)
	gw := llmtest.NewServer(t)
	ics := filepath.Join(home, "cals", "work", "standup.ics")
	pimWrite(t, ics, "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:s@x\nSUMMARY:Standup about the certification\n"+
		"DTSTART;TZID=W. Europe Standard Time:20260323T093000\nDTEND;TZID=W. Europe Standard Time:20260323T100000\n"+
		"RRULE:FREQ=WEEKLY;BYDAY=MO\nEND:VEVENT\nEND:VCALENDAR\n")
	pimWrite(t, filepath.Join(home, "calendar.yaml"), "timezone: Europe/Rome\nembed: "+gw.URL+"\nsources:\n"+
		"  - {name: dav, kind: ics, path: "+filepath.Join(home, "cals")+", account: me@dav}\n")
	ctx := context.Background()
	if code := run(ctx, []string{"calendar", "sync", "--json"}, env); code != 0 {
		t.Fatalf("calendar sync exited %d: %s", code, errb)
	}
	var rep calendar.SyncReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Added != 1 || rep.Embedded != 1 || !rep.Complete {
		t.Fatalf("report %s (%v)", out, err)
	}
	reqs := gw.Requests()
	if len(reqs) == 0 || reqs[0].Model != "local-embed" || reqs[0].Header.Get("X-Usage-Service") != "calendar" {
		t.Errorf("embedding requests %+v", reqs)
	}
	if _, err := os.Stat(filepath.Join(home, "calendar-index.sqlitedb")); err != nil {
		t.Errorf("index not at STEWARD_HOME/calendar-index.sqlitedb: %v", err)
	}

	server, err := calendarMCP(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptooltest.Connect(t, server)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_events", Arguments: map[string]any{
		"query": "certification", "start": "2026-03-30T00:00:00+02:00", "end": "2026-04-14T00:00:00+02:00"}})
	if err != nil || res.IsError {
		t.Fatalf("search_events: %v %+v", err, res)
	}
	var page calendar.SearchResult
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &page)
	if page.Ranking != "hybrid" || len(page.Events) != 3 || page.Events[0].OccurrenceStart != "2026-03-30T09:30:00+02:00" {
		t.Errorf("search over the synced index: %+v", page)
	}

	// An unreadable source fails the command with the reason and keeps the data.
	out.Reset()
	errb.Reset()
	pimWrite(t, filepath.Join(home, "calendar.yaml"), "embed: off\nsources:\n"+
		"  - {name: dav, kind: ics, path: "+filepath.Join(home, "cals")+", account: me@dav}\n"+
		"  - {name: mac, kind: apple, path: "+filepath.Join(home, "missing.sqlitedb")+"}\n")
	if code := run(ctx, []string{"calendar", "sync"}, env); code != 1 || !strings.Contains(errb.String(), "could not be read") ||
		!strings.Contains(errb.String(), "check the path") || !strings.Contains(out.String(), "1 unchanged") {
		t.Errorf("missing source: exit %d\nstdout %s\nstderr %s", code, out, errb)
	}
	if code := run(ctx, []string{"calendar"}, env); code != 2 {
		t.Errorf("calendar without a job exited %d", code)
	}
}

func TestContactsIndexCommandAndMCP(t *testing.T) {
	env, home, out, errb := pimEnv(t)
	pimWrite(t, filepath.Join(home, "vcards", "a.vcf"), "BEGIN:VCARD\nVERSION:3.0\nFN:Anna Verdi\nORG:Politecnico di Milano\n"+
		"EMAIL;TYPE=pref:anna.verdi@polimi.it\nEND:VCARD\n")
	pimWrite(t, filepath.Join(home, "vcards", "b.vcf"), "BEGIN:VCARD\nVERSION:3.0\nFN:Anna V.\nTITLE:Researcher\n"+
		"EMAIL;TYPE=pref:Anna.Verdi@polimi.it\nEND:VCARD\n")
	pimWrite(t, filepath.Join(home, "contacts.yaml"), "embed: off\nsources:\n  - {name: dav, kind: vcard, path: "+filepath.Join(home, "vcards")+"}\n")
	ctx := context.Background()
	if code := run(ctx, []string{"contacts", "index", "--json"}, env); code != 0 {
		t.Fatalf("contacts index exited %d: %s", code, errb)
	}
	var rep contacts.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Records != 2 || rep.People != 1 || rep.Merged != 1 {
		t.Fatalf("report %s (%v)", out, err)
	}
	server, err := contactsMCP(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptooltest.Connect(t, server)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "resolve_recipient", Arguments: map[string]any{"description": "Anna from Polimi"}})
	if err != nil || res.IsError {
		t.Fatalf("resolve_recipient: %v %+v", err, res)
	}
	var r contacts.Resolution
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &r)
	if len(r.Candidates) != 1 || r.Candidates[0].Title != "Researcher" || len(r.Candidates[0].Emails) != 1 {
		t.Errorf("resolution %+v", r)
	}
}

// TestMCPConnectorsBeforeFirstIndex: before the first index a tool says
// why: "not configured" (one line) while no source is, then — on the same
// running server, once a configuration file appears — "not built yet".
func TestMCPConnectorsBeforeFirstIndex(t *testing.T) {
	ctx := context.Background()
	env, home, _, _ := pimEnv(t)
	configs := map[string]string{
		"calendar": "embed: off\nsources:\n  - {name: ics, kind: ics, path: " + filepath.Join(home, "cal.ics") + "}\n",
		"contacts": "embed: off\nsources:\n  - {name: dav, kind: vcard, path: " + filepath.Join(home, "vcards") + "}\n",
	}
	for name, factory := range map[string]mcpServerFactory{"calendar": calendarMCP, "contacts": contactsMCP} {
		server, err := factory(ctx, env)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cs := mcptooltest.Connect(t, server)
		tool := map[string]string{"calendar": "list_calendars", "contacts": "search_contacts"}[name]
		for _, want := range []string{"not configured: no %s sources", "%s index not built yet"} {
			if strings.HasPrefix(want, "%s index") {
				pimWrite(t, filepath.Join(home, name+".yaml"), configs[name])
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, fmt.Sprintf(want, name)) {
				t.Errorf("%s before indexing, want %q: %v %+v", name, fmt.Sprintf(want, name), err, res)
				continue
			}
			if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, "for example") {
				t.Errorf("%s: the tool error carries the configuration example: %q", name, text)
			}
		}
	}
}

func TestPimBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds benchmark indexes")
	}
	env, home, out, errb := pimEnv(t)
	for _, suite := range []string{"calendar", "contacts"} {
		report := filepath.Join(home, suite+".json")
		if code := run(context.Background(), []string{"bench", suite, "--scales", "1", "--dim", "16", "--samples", "3", "--out", report}, env); code != 0 {
			t.Fatalf("bench %s exited %d: %s", suite, code, errb)
		}
		var rep pimBenchReport
		data, err := os.ReadFile(report)
		if err != nil || json.Unmarshal(data, &rep) != nil || len(rep.Scales) != 1 || len(rep.Scales[0].Cases) < 2 {
			t.Fatalf("%s report: %v %s", suite, err, data)
		}
		for _, c := range rep.Scales[0].Cases {
			if len(c.Go.Samples) != 4 || c.Go.MedianMs <= 0 {
				t.Errorf("%s %s: %+v", suite, c.Name, c.Go)
			}
			if c.C == nil && c.CSkipped == "" {
				t.Errorf("%s %s: neither a C baseline nor a reason", suite, c.Name)
			}
			if c.C != nil && c.C.Returned != c.Go.Returned {
				t.Errorf("%s %s: C returned %d rows, Go %d", suite, c.Name, c.C.Returned, c.Go.Returned)
			}
		}
	}
	if !strings.Contains(out.String(), "Calendar FTS5 candidates") || !strings.Contains(out.String(), "Contacts vector KNN") {
		t.Errorf("summary:\n%s", out)
	}
}
