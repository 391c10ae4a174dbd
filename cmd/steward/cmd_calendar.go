package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
	_ "time/tzdata" // calendars name zones the host may lack

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
)

// calendarConnector finds calendar.yaml (CALENDAR_CONFIG) and the index
// (CALENDAR_INDEX_DB).
var calendarConnector = pimConnector[calendar.Config]{
	name: "calendar", configVar: "CALENDAR_CONFIG", indexVar: "CALENDAR_INDEX_DB",
	load: calendar.LoadConfig, embedSetting: func(c *calendar.Config) string { return c.Embed },
}

func init() {
	calendarConnector.register(pimCommands[calendar.Config]{
		summary: "sync the calendar index from Apple Calendar or iCalendar sources",
		job: pimJob[calendar.Config]{
			verb: "sync",
			description: "Reads the sources in calendar.yaml (CALENDAR_CONFIG; on macOS Apple's Calendar.sqlitedb when the file is absent)\n" +
				"and publishes them into the calendar index (CALENDAR_INDEX_DB) in one transaction, then embeds new or changed\n" +
				"events through the gateway's local-embed model unless embeddings are off. A source that cannot be read keeps\n" +
				"its indexed events and makes the command fail with the reason.",
			jsonHelp: "print the sync report as JSON",
			build: func(ctx context.Context, c *calendar.Config, indexPath string, emb vecindex.Embedder, log *slog.Logger) (*pimOutcome, error) {
				rep, err := syncCalendar(ctx, c, indexPath, calendar.SyncOptions{Embedder: emb, Log: log})
				if err != nil {
					return nil, err
				}
				return &pimOutcome{report: rep, itemErrors: rep.ItemErrors, embedError: rep.EmbedError, sourceErrors: rep.SourceErrors,
					summary: fmt.Sprintf("calendar sync %d: %d items; %d added, %d updated, %d unchanged, %d deleted, %d kept, %d re-identified; %d embedded",
						rep.Generation, rep.Items, rep.Added, rep.Updated, rep.Unchanged, rep.Deleted, rep.Kept, rep.Rematched, rep.Embedded)}, nil
			},
		},
		mcp:          calendarMCP,
		benchSummary: "calendar FTS5 and vector KNN at the spec's scale (694 events) and 10×, against C SQLite",
		bench:        calendarBench,
	})
}

// syncCalendar reads the sources of c into the index at indexPath.
func syncCalendar(ctx context.Context, c *calendar.Config, indexPath string, opts calendar.SyncOptions) (*calendar.SyncReport, error) {
	idx, err := calendar.OpenIndex(ctx, indexPath)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	return idx.Sync(ctx, c, opts)
}

func calendarMCP(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
	indexPath, emb, err := calendarConnector.queryEmbedder(env)
	if err != nil {
		return nil, err
	}
	open, _ := calendar.OpenService(indexPath, calendar.ServiceOptions{Embedder: emb})
	open = unbuiltBecauseUnconfigured(open, calendar.ErrNoIndex, func() error { return calendarConnector.unconfigured(env) })
	return calendar.NewWritableMCPServer(open, calendarWriter(env, indexPath), version), nil
}

// calendarBench reproduces the spec's Calendar rows.
var calendarBench = pimBenchSuite{
	name: "calendar", records: 694, noun: "events",
	description: "Builds synthetic calendar indexes (694 events × each scale, the spec's measured size, with 1,024-dimension\n" +
		"vectors) through the real sync, then times the spec's Calendar rows: FTS5 candidates for \"meeting\" (cap 500)\n" +
		"and vector KNN (cap 500), one first query plus warm samples, on a read-only connection. The same SQL runs\n" +
		"through C SQLite of the same release on the same file as a baseline when steward is built with\n" +
		"-tags 'csqlite fts5' (cgo). Writes a JSON report.",
	write: func(dir string, n int) (string, error) {
		path := filepath.Join(dir, "bench.ics")
		return path, os.WriteFile(path, benchCalendarICS(n), 0o600)
	},
	index: func(ctx context.Context, path, indexPath string, n int, emb vecindex.Embedder) error {
		rep, err := syncCalendar(ctx, &calendar.Config{Timezone: "Europe/Rome", Sources: []calendar.SourceConfig{{Name: "bench", Kind: calendar.KindICS, Path: path, Account: "bench"}}},
			indexPath, calendar.SyncOptions{Embedder: emb})
		if err == nil && rep.Embedded != n {
			err = fmt.Errorf("embedded %d of %d events (%s)", rep.Embedded, n, rep.EmbedError)
		}
		return err
	},
	cases: func(query []byte) []pimSQLCase {
		return []pimSQLCase{
			{Name: "Calendar FTS5 candidates, cap 500", Spec: "58 / 22.42 ms / 0.057 ms / 0.071 ms",
				SQL: `SELECT rowid FROM events_fts WHERE events_fts MATCH '"meeting"' ORDER BY bm25(events_fts, 10.0, 4.0, 1.0, 2.0, 1.0) LIMIT 500`},
			{Name: "Calendar vector KNN, cap 500", Spec: "500 / 79.27 ms / 1.79 ms / 2.16 ms",
				SQL: `SELECT rowid, distance FROM events_vec WHERE embedding MATCH ? AND k = 500 ORDER BY distance`, Args: []any{query}},
		}
	},
}

// benchCalendarICS generates n events resembling a personal calendar: a
// mix of meetings, appointments and all-day items, about one in twelve
// titled or described as a meeting, one in ten recurring.
func benchCalendarICS(n int) []byte {
	r := rand.New(rand.NewPCG(694, 2026))
	kinds := []string{"Lunch with %s", "Call with %s", "Dentist", "Review of %s proposal", "Train to %s", "Gym", "Dinner at %s",
		"Project sync: %s", "Flight to %s", "Certification workshop", "School pickup", "Interview %s", "Budget planning", "Doctor %s"}
	names := []string{"Marco", "Anna", "Giulia", "Luca", "Chiara", "Paolo", "Sara", "Francesco", "Elena", "Davide", "Torino", "Milano",
		"Roma", "Polimi", "ACME", "Fastweb", "Bologna", "Napoli"}
	words := strings.Fields("agenda notes follow up budget timeline risks decisions owners draft slides contract invoice travel " +
		"hotel booking reminder bring documents parking entrance floor room zoom link dial password confirm reschedule")
	var b strings.Builder
	b.WriteString("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Steward//bench//EN\r\n")
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		title := kinds[r.IntN(len(kinds))]
		if strings.Contains(title, "%s") {
			title = fmt.Sprintf(title, names[r.IntN(len(names))])
		}
		if r.IntN(12) == 0 {
			title = "Team meeting " + names[r.IntN(len(names))]
		}
		var notes []string
		for range 20 + r.IntN(60) {
			notes = append(notes, words[r.IntN(len(words))])
		}
		start := base.Add(time.Duration(r.IntN(540*24)) * time.Hour).Add(time.Duration(r.IntN(4)) * 15 * time.Minute)
		fmt.Fprintf(&b, "BEGIN:VEVENT\r\nUID:bench-%d@steward\r\nSUMMARY:%s\r\nLOCATION:%s\r\nDESCRIPTION:%s\r\n", i, title,
			names[r.IntN(len(names))], strings.Join(notes, " "))
		if r.IntN(15) == 0 {
			d := start.Truncate(24 * time.Hour)
			fmt.Fprintf(&b, "DTSTART;VALUE=DATE:%s\r\nDTEND;VALUE=DATE:%s\r\n", d.Format("20060102"), d.AddDate(0, 0, 1).Format("20060102"))
		} else {
			fmt.Fprintf(&b, "DTSTART;TZID=Europe/Rome:%s\r\nDTEND;TZID=Europe/Rome:%s\r\n", start.Format("20060102T150405"),
				start.Add(time.Duration(30+30*r.IntN(4))*time.Minute).Format("20060102T150405"))
		}
		if r.IntN(10) == 0 {
			fmt.Fprintf(&b, "RRULE:FREQ=WEEKLY;COUNT=%d\r\n", 4+r.IntN(20))
		}
		b.WriteString("END:VEVENT\r\n")
	}
	b.WriteString("END:VCALENDAR\r\n")
	return []byte(b.String())
}
