package calendar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// Target is a calendar a write can go to.
type Target struct {
	Source     string `json:"source"`
	Kind       string `json:"kind"`
	Account    string `json:"account"`
	CalendarID string `json:"calendarId"`
	Title      string `json:"title"`
	// Dir is the vdir collection folder of an ics source.
	Dir string `json:"dir,omitempty"`
	// NotWritable says why writes cannot go here ("" when they can).
	NotWritable string `json:"notWritable,omitempty"`
}

// QualifiedID is source/calendarId, unique across sources.
func (t Target) QualifiedID() string { return t.Source + "/" + t.CalendarID }

// targets lists the calendars of cfg that writes can name: each collection
// folder of an ics vdir source (also an empty one, which the read index does
// not know yet), and on macOS the indexed calendars of Apple sources.
func targets(ctx context.Context, cfg *Config, idx *Index, goos string) ([]Target, error) {
	var out []Target
	for _, src := range cfg.Sources {
		switch src.Kind {
		case KindICS:
			info, err := os.Stat(src.Path)
			if err != nil {
				return nil, sourceError("list calendars of", src.Path, err)
			}
			if !info.IsDir() {
				out = append(out, Target{Source: src.Name, Kind: src.Kind, Account: src.Account,
					CalendarID: strings.TrimSuffix(filepath.Base(src.Path), filepath.Ext(src.Path)), Title: filepath.Base(src.Path),
					NotWritable: "source " + src.Name + " is a single .ics file; Steward writes one file per event into a vdir folder, so point the source at a folder"})
				continue
			}
			dirs, err := localsource.Collections(src.Path, ".ics")
			if err != nil {
				return nil, sourceError("list calendars of", src.Path, err)
			}
			for _, d := range dirs {
				out = append(out, Target{Source: src.Name, Kind: src.Kind, Account: src.Account, CalendarID: filepath.Base(d),
					Title: localsource.DisplayName(d), Dir: d})
			}
		case KindApple:
			cals, err := idx.calendarsOf(ctx, src.Name)
			if err != nil {
				return nil, err
			}
			for _, c := range cals {
				t := Target{Source: src.Name, Kind: src.Kind, Account: c.Account, CalendarID: c.CalendarID, Title: c.Calendar}
				if goos != "darwin" {
					t.NotWritable = "Apple Calendar can only be changed on macOS (through EventKit or Calendar.app)"
				}
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// calendarsOf lists the indexed calendars of one source.
func (x *Index) calendarsOf(ctx context.Context, source string) ([]CalendarInfo, error) {
	if x == nil {
		return nil, nil
	}
	rows, err := x.db.QueryContext(ctx, `SELECT account, calendar, calendar_id, source, count(*) FROM events WHERE source = ?
		GROUP BY account, calendar_id ORDER BY calendar`, source)
	if err != nil {
		return nil, fmt.Errorf("list calendars: %w", err)
	}
	defer rows.Close()
	var out []CalendarInfo
	for rows.Next() {
		var c CalendarInfo
		if err := rows.Scan(&c.Account, &c.Calendar, &c.CalendarID, &c.Source, &c.Events); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// resolveTarget picks the calendar a create names: the stable calendarId
// first (plain, or source/id when two sources share it), else a title that
// exactly one calendar has. With neither, the only calendar there is.
func resolveTarget(all []Target, calendarID, title string) (Target, error) {
	calendarID, title = strings.TrimSpace(calendarID), strings.TrimSpace(title)
	ids := func(ts []Target) string {
		var s []string
		for _, t := range ts {
			s = append(s, fmt.Sprintf("%q (%s)", t.QualifiedID(), t.Title))
		}
		return strings.Join(s, ", ")
	}
	var found []Target
	switch {
	case calendarID != "":
		for _, t := range all {
			if t.QualifiedID() == calendarID || t.CalendarID == calendarID {
				found = append(found, t)
			}
		}
		if len(found) == 0 {
			return Target{}, fmt.Errorf("unknown calendar id %q; the calendars are %s", calendarID, ids(all))
		}
		if len(found) > 1 {
			return Target{}, fmt.Errorf("calendar id %q is in several sources (%s); pass the qualified source/id", calendarID, ids(found))
		}
		if title != "" && !strings.EqualFold(found[0].Title, title) {
			return Target{}, fmt.Errorf("calendar id %q is titled %q, not %q", calendarID, found[0].Title, title)
		}
	case title != "":
		for _, t := range all {
			if strings.EqualFold(t.Title, title) {
				found = append(found, t)
			}
		}
		if len(found) == 0 {
			return Target{}, fmt.Errorf("unknown calendar %q; the calendars are %s", title, ids(all))
		}
		if len(found) > 1 {
			return Target{}, fmt.Errorf("ambiguous calendar title %q: %d calendars have it (%s); pass calendarId", title, len(found), ids(found))
		}
	default:
		if len(all) != 1 {
			return Target{}, fmt.Errorf("say which calendar: pass calendarId (preferred) or its title; the calendars are %s", ids(all))
		}
		found = all
	}
	if found[0].NotWritable != "" {
		return Target{}, fmt.Errorf("calendar %q cannot be written: %s", found[0].Title, found[0].NotWritable)
	}
	return found[0], nil
}
