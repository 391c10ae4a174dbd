package calendar

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/indexfile"
	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// SyncOptions configure one sync.
type SyncOptions struct {
	// Embedder adds vectors after the metadata is published; nil keeps the
	// index lexical-only.
	Embedder Embedder
	// Read tunes the source readers; its Zone defaults to the config's zone.
	Read ReadOptions
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Now replaces time.Now.
	Now func() time.Time
}

// SyncReport says what one sync did.
type SyncReport struct {
	Generation int64 `json:"generation"`
	// StartedAt is when the sync began reading its sources: write
	// confirmation only takes evidence from a sync that started after the
	// write completed.
	StartedAt time.Time `json:"startedAt"`
	Complete  bool      `json:"complete"`
	Items     int       `json:"items"`
	Added     int       `json:"added"`
	Updated   int       `json:"updated"`
	Unchanged int       `json:"unchanged"`
	Deleted   int       `json:"deleted"`
	// Kept counts rows left in place because their source or file could not
	// be read this time.
	Kept int `json:"kept"`
	// Rematched counts items recognised by the identity heuristic after
	// their UID changed (the old UID became an alias).
	Rematched    int               `json:"rematched"`
	SourceErrors map[string]string `json:"sourceErrors,omitempty"`
	ItemErrors   []string          `json:"itemErrors,omitempty"`
	Embedded     int               `json:"embedded"`
	EmbedError   string            `json:"embedError,omitempty"`
}

// readSource dispatches on the source kind.
func readSource(ctx context.Context, src SourceConfig, opts ReadOptions) (*SourceResult, error) {
	switch src.Kind {
	case KindApple:
		return ReadApple(ctx, src, opts)
	case KindICS:
		return ReadICS(ctx, src, opts)
	}
	return nil, fmt.Errorf("source %s: unknown kind %q", src.Name, src.Kind)
}

// Sync reads every configured source and publishes the result: new,
// changed and deleted events, identity matches, UID aliases and the
// completed-sync marker commit in one transaction, so a reader sees either
// the previous sync or this one, never a mixture. A source that fails to read
// keeps its previous rows (a failed read is not evidence of deletion) and
// makes the sync incomplete. Embeddings are added afterwards; their failure
// leaves the published metadata intact.
func (x *Index) Sync(ctx context.Context, cfg *Config, opts SyncOptions) (*SyncReport, error) {
	if x.readOnly {
		return nil, errors.New("calendar sync: index opened read-only")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	started := now()
	ropts := opts.Read
	if ropts.Zone == nil {
		ropts.Zone = cfg.Location()
	}
	results, failed, err := localsource.ReadAll(ctx, log, "calendar", "events", cfg.Sources, (*SourceConfig).fields,
		func(ctx context.Context, src SourceConfig) (*SourceResult, error) { return readSource(ctx, src, ropts) })
	if err != nil {
		return nil, err
	}
	report := &SyncReport{SourceErrors: failed, StartedAt: started.UTC()}
	for _, src := range cfg.Sources {
		if res, ok := results[src.Name]; ok {
			for _, e := range res.ItemErrors {
				report.ItemErrors = append(report.ItemErrors, src.Name+": "+e.Error())
			}
			report.Items += len(res.Items)
		}
	}
	report.Complete = len(report.SourceErrors) == 0 && len(report.ItemErrors) == 0
	if err := x.publish(ctx, cfg, results, ropts.Zone, report, now()); err != nil {
		return nil, err
	}
	log.Info("calendar index published", "generation", report.Generation, "added", report.Added, "updated", report.Updated,
		"deleted", report.Deleted, "kept", report.Kept)
	if opts.Embedder != nil {
		n, err := x.vectors.EmbedPending(ctx, opts.Embedder, log)
		report.Embedded = n
		if err != nil {
			report.EmbedError = err.Error()
		}
	}
	return report, nil
}

// existingRow is the identity-relevant part of an indexed row.
type existingRow struct {
	id                     int64
	ref, uid, source       string
	account, calendarID    string
	externalID, sourcePath string
	title, location        string
	startAt, endAt         int64
	allDay                 bool
	recurrenceID           sql.NullInt64
	contentHash            string
	claimed                bool
}

// publish writes the results of one sync, with its marker, in one
// transaction.
func (x *Index) publish(ctx context.Context, cfg *Config, results map[string]*SourceResult, zone *time.Location, report *SyncReport, now time.Time) error {
	return indexfile.Publish(ctx, x.db, indexfile.Build{Name: "calendar sync", At: now, BeforeCommit: x.beforeCommit,
		Write: func(tx *sql.Tx, gen int64) (bool, any, error) {
			report.Generation = gen
			err := x.write(ctx, tx, gen, cfg, results, zone, report, now)
			return report.Complete, report, err
		}})
}

func (x *Index) write(ctx context.Context, tx *sql.Tx, gen int64, cfg *Config, results map[string]*SourceResult, zone *time.Location, report *SyncReport, now time.Time) error {
	rows, err := loadRows(ctx, tx)
	if err != nil {
		return err
	}
	aliases, err := loadAliases(ctx, tx)
	if err != nil {
		return err
	}
	w := &writer{tx: tx, vectors: x.vectors, gen: gen, now: now, report: report}
	configured := map[string]bool{}
	for _, src := range cfg.Sources {
		configured[src.Name] = true
		res, ok := results[src.Name]
		if !ok {
			continue // failed source: its rows stay as they are
		}
		var mine []*existingRow
		for _, r := range rows {
			if r.source == src.Name {
				mine = append(mine, r)
			}
		}
		if err := w.syncSource(ctx, res, mine, aliases); err != nil {
			return err
		}
		failed := map[string]bool{}
		for _, p := range res.FailedPaths {
			failed[p] = true
		}
		for _, r := range mine {
			switch {
			case r.claimed:
			case failed[r.sourcePath]:
				report.Kept++
			default:
				if err := w.delete(ctx, r); err != nil {
					return err
				}
			}
		}
	}
	for _, r := range rows {
		if !configured[r.source] {
			if err := w.delete(ctx, r); err != nil { // the source was removed from the config
				return err
			}
		} else if _, ok := results[r.source]; !ok {
			report.Kept++
		}
	}
	for _, kv := range [][2]string{{"zone", zone.String()}, {metaSyncStarted, strconv.FormatInt(report.StartedAt.UnixMilli(), 10)}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, kv[0], kv[1]); err != nil {
			return fmt.Errorf("record sync metadata %s: %w", kv[0], err)
		}
	}
	return nil
}

func loadRows(ctx context.Context, tx *sql.Tx) ([]*existingRow, error) {
	q, err := tx.QueryContext(ctx, `SELECT id, ref_id, uid, source, account, calendar_id, external_id, source_path, title, location,
		start_at, end_at, all_day, recurrence_id, content_hash FROM events ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("load indexed events: %w", err)
	}
	defer q.Close()
	var out []*existingRow
	for q.Next() {
		r := &existingRow{}
		if err := q.Scan(&r.id, &r.ref, &r.uid, &r.source, &r.account, &r.calendarID, &r.externalID, &r.sourcePath, &r.title, &r.location,
			&r.startAt, &r.endAt, &r.allDay, &r.recurrenceID, &r.contentHash); err != nil {
			return nil, fmt.Errorf("load indexed events: %w", err)
		}
		out = append(out, r)
	}
	return out, q.Err()
}

// loadAliases maps every historical UID to the identities that carried it.
func loadAliases(ctx context.Context, tx *sql.Tx) (map[string][]string, error) {
	q, err := tx.QueryContext(ctx, `SELECT uid, ref_id FROM uid_aliases`)
	if err != nil {
		return nil, fmt.Errorf("load UID aliases: %w", err)
	}
	defer q.Close()
	out := map[string][]string{}
	for q.Next() {
		var uid, ref string
		if err := q.Scan(&uid, &ref); err != nil {
			return nil, err
		}
		out[uid] = append(out[uid], ref)
	}
	return out, q.Err()
}

type writer struct {
	tx      *sql.Tx
	vectors *vecindex.Store
	gen     int64
	now     time.Time
	report  *SyncReport
}

// syncSource assigns identities to the items of one source and writes them.
//
// Pass 1 recognises the current UID or a known alias. Pass 2 tries, for the
// rest, one unambiguous match on external id, account, calendar and start,
// or — without an external id — account, calendar, start, end, all-day flag,
// title and location. A row claimed earlier in this sync (same generation)
// is never a candidate again, so two equal events in one sync never merge,
// and several candidates give a new identity rather than an arbitrary match.
// Detached occurrences follow their master's identity.
func (w *writer) syncSource(ctx context.Context, res *SourceResult, rows []*existingRow, aliases map[string][]string) error {
	byRef := map[string]*existingRow{}
	for _, r := range rows {
		byRef[r.ref] = r
	}
	var masters, overrides []*Item
	for i := range res.Items {
		if res.Items[i].RecurrenceID.IsZero() {
			masters = append(masters, &res.Items[i])
		} else {
			overrides = append(overrides, &res.Items[i])
		}
	}
	match := make([]*existingRow, len(masters))
	for i, it := range masters {
		var cands []*existingRow
		for _, r := range rows {
			if !r.claimed && !r.recurrenceID.Valid && (r.uid == it.UID || slices.Contains(aliases[it.UID], r.ref)) {
				cands = append(cands, r)
			}
		}
		if len(cands) > 1 {
			cands = slices.DeleteFunc(cands, func(r *existingRow) bool { return r.calendarID != it.CalendarID })
		}
		if len(cands) == 1 {
			match[i] = cands[0]
			cands[0].claimed = true
		}
	}
	for i, it := range masters {
		if match[i] != nil {
			continue
		}
		start, end := it.Start.Unix(), it.End.Unix()
		var cands []*existingRow
		for _, r := range rows {
			if r.claimed || r.recurrenceID.Valid || r.account != it.Account || r.calendarID != it.CalendarID || r.startAt != start {
				continue
			}
			if it.ExternalID != "" {
				if r.externalID == it.ExternalID {
					cands = append(cands, r)
				}
			} else if r.endAt == end && r.allDay == it.AllDay && r.title == it.Title && r.location == it.Location {
				cands = append(cands, r)
			}
		}
		if len(cands) == 1 {
			match[i] = cands[0]
			cands[0].claimed = true
			w.report.Rematched++
		}
	}
	refByUID := map[string]string{}
	for i, it := range masters {
		ref, err := w.upsert(ctx, it, match[i], "")
		if err != nil {
			return err
		}
		if _, dup := refByUID[it.UID]; !dup {
			refByUID[it.UID] = ref
		}
	}
	for _, it := range overrides {
		parent, ok := refByUID[it.UID]
		suffix := "/" + strconv.FormatInt(it.RecurrenceID.Unix(), 10)
		var ref string
		if ok {
			ref = parent + suffix
		} else {
			// An occurrence whose master is not in this source stands alone.
			h := sha256.Sum256([]byte(it.Source + "\x00" + it.UID))
			ref, parent = "orphan-"+hex.EncodeToString(h[:8])+suffix, ""
		}
		r := byRef[ref]
		if r != nil && r.claimed {
			r = nil // the same occurrence twice: the second gets its own row
			ref += "-" + randomRef()[:6]
		}
		if r != nil {
			r.claimed = true
		}
		if _, err := w.upsertOverride(ctx, it, r, ref, parent); err != nil {
			return err
		}
	}
	return nil
}

func randomRef() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// derived are the stored forms of an item's recurrence and lists.
type derived struct {
	canonical, problem string
	expandable         bool
	seriesEnd          sql.NullInt64
	exdates, rdates    string
	alarms             string
	hash               string
}

func derive(it *Item) derived {
	d := derived{expandable: true}
	if it.RRule != "" {
		r, err := rrule.Parse(it.RRule)
		switch {
		case err != nil:
			d.problem, d.expandable = err.Error(), false
		default:
			d.canonical = r.Canonical()
			if !r.Representable() {
				d.problem = "unrepresentable: " + strings.Join(r.Unrepresentable, "; ")
			}
			if e := r.Expandable(); e != nil {
				d.expandable = false
				d.problem = strings.TrimPrefix(d.problem+"; not expandable: "+e.Error(), "; ")
			} else {
				d.seriesEnd = seriesEnd(r, it)
			}
		}
	}
	d.exdates = jsonList(it.ExDates)
	d.rdates = jsonList(it.RDates)
	al, _ := json.Marshal(it.Alarms)
	if it.Alarms == nil {
		al = []byte("[]")
	}
	d.alarms = string(al)
	h := sha256.New()
	fmt.Fprintf(h, "%q|%q|%q|%q|%q|%q|%q|%q|%q|%q|%d|%d|%t|%q|%q|%q|%t|%q|%t|%q|%q|%q|%q|%d|%d",
		it.Account, it.Calendar, it.CalendarID, it.UID, it.ExternalID, it.SourcePath, it.Title, it.Location, it.Notes, it.URL,
		it.Start.Unix(), it.End.Unix(), it.AllDay, it.StartDate, it.EndDate, it.TZID, it.Floating, it.Status, it.Transparent,
		it.RRule, d.exdates, d.rdates, d.alarms, it.LastModified.Unix(), it.RecurrenceID.Unix())
	d.hash = hex.EncodeToString(h.Sum(nil))
	return d
}

// seriesEnd bounds the last occurrence start of a finite series so range
// queries can skip it; open-ended series return NULL.
func seriesEnd(r *rrule.Rule, it *Item) sql.NullInt64 {
	switch {
	case r.UntilKind != rrule.UntilNone:
		// A date or floating UNTIL is local: allow a day either way.
		return sql.NullInt64{Int64: r.Until.Add(48 * time.Hour).Unix(), Valid: true}
	case r.Count > 0 && r.Count <= 10_000:
		start, _ := seriesStart(it.AllDay, it.StartDate, it.Start, it.TZID, it.Floating, nil)
		occ, err := r.Between(start, start.Add(-time.Second), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), r.Count)
		if err != nil || len(occ) == 0 {
			return sql.NullInt64{}
		}
		last := occ[len(occ)-1]
		if it.AllDay {
			last = last.Add(48 * time.Hour)
		}
		return sql.NullInt64{Int64: last.Unix(), Valid: true}
	}
	return sql.NullInt64{}
}

func jsonList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func nullTime(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.Unix(), Valid: true}
}

func (w *writer) upsert(ctx context.Context, it *Item, r *existingRow, parent string) (string, error) {
	if r == nil {
		return w.insert(ctx, it, "ev-"+randomRef(), parent)
	}
	if r.uid != it.UID {
		// The event's UID changed: keep the old one as an alias.
		if _, err := w.tx.ExecContext(ctx, `INSERT OR IGNORE INTO uid_aliases (uid, ref_id, first_seen) VALUES (?, ?, ?)`,
			r.uid, r.ref, w.now.Unix()); err != nil {
			return "", fmt.Errorf("record UID alias: %w", err)
		}
	}
	return r.ref, w.update(ctx, it, r, parent)
}

func (w *writer) upsertOverride(ctx context.Context, it *Item, r *existingRow, ref, parent string) (string, error) {
	if r == nil {
		return w.insert(ctx, it, ref, parent)
	}
	return r.ref, w.update(ctx, it, r, parent)
}

const eventColumns = `parent_ref, source, account, calendar, calendar_id, uid, external_id, source_path, recurrence_id,
	title, location, notes, url, start_at, end_at, all_day, start_date, end_date, tzid, floating, status, transparent,
	rrule, rrule_canonical, rrule_problem, rrule_expandable, series_end, exdates, rdates, alarms, last_modified, content_hash, seen_generation`

func (w *writer) values(it *Item, d derived, parent string) []any {
	var p sql.NullString
	if parent != "" {
		p = sql.NullString{String: parent, Valid: true}
	}
	return []any{p, it.Source, it.Account, it.Calendar, it.CalendarID, it.UID, it.ExternalID, it.SourcePath, nullTime(it.RecurrenceID),
		it.Title, it.Location, it.Notes, it.URL, it.Start.Unix(), it.End.Unix(), it.AllDay, it.StartDate, it.EndDate, it.TZID, it.Floating,
		it.Status, it.Transparent, it.RRule, d.canonical, d.problem, d.expandable, d.seriesEnd, d.exdates, d.rdates, d.alarms,
		nullTime(it.LastModified), d.hash, w.gen}
}

func (w *writer) insert(ctx context.Context, it *Item, ref, parent string) (string, error) {
	d := derive(it)
	args := append([]any{ref}, w.values(it, d, parent)...)
	res, err := w.tx.ExecContext(ctx, `INSERT INTO events (ref_id, `+eventColumns+`) VALUES (?`+strings.Repeat(", ?", len(args)-1)+`)`, args...)
	if err != nil {
		return "", fmt.Errorf("index event %s: %w", it.UID, err)
	}
	id, _ := res.LastInsertId()
	if err := w.indexText(ctx, id, it); err != nil {
		return "", err
	}
	w.report.Added++
	return ref, nil
}

func (w *writer) update(ctx context.Context, it *Item, r *existingRow, parent string) error {
	d := derive(it)
	if d.hash == r.contentHash {
		if _, err := w.tx.ExecContext(ctx, `UPDATE events SET seen_generation = ?, parent_ref = ? WHERE id = ?`, w.gen, nullString(parent), r.id); err != nil {
			return fmt.Errorf("mark event %s seen: %w", it.UID, err)
		}
		w.report.Unchanged++
		return nil
	}
	sets := strings.Split(strings.Join(strings.Fields(eventColumns), ""), ",")
	for i := range sets {
		sets[i] += " = ?"
	}
	args := append(w.values(it, d, parent), r.id)
	if _, err := w.tx.ExecContext(ctx, `UPDATE events SET `+strings.Join(sets, ", ")+` WHERE id = ?`, args...); err != nil {
		return fmt.Errorf("update event %s: %w", it.UID, err)
	}
	if _, err := w.tx.ExecContext(ctx, `DELETE FROM events_fts WHERE rowid = ?`, r.id); err != nil {
		return fmt.Errorf("update search text of %s: %w", it.UID, err)
	}
	if err := w.indexText(ctx, r.id, it); err != nil {
		return err
	}
	w.report.Updated++
	return nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func (w *writer) indexText(ctx context.Context, id int64, it *Item) error {
	if _, err := w.tx.ExecContext(ctx, `INSERT INTO events_fts (rowid, title, location, notes, calendar, account) VALUES (?, ?, ?, ?, ?, ?)`,
		id, search.Fold(it.Title), search.Fold(it.Location), search.Fold(it.Notes), search.Fold(it.Calendar), search.Fold(it.Account)); err != nil {
		return fmt.Errorf("index search text of %s: %w", it.UID, err)
	}
	return nil
}

func (w *writer) delete(ctx context.Context, r *existingRow) error {
	for _, q := range []string{`DELETE FROM events_fts WHERE rowid = ?`, `DELETE FROM events WHERE id = ?`} {
		if _, err := w.tx.ExecContext(ctx, q, r.id); err != nil {
			return fmt.Errorf("delete event %s: %w", r.uid, err)
		}
	}
	if err := w.vectors.Delete(ctx, w.tx, r.id); err != nil {
		return err
	}
	w.report.Deleted++
	return nil
}
