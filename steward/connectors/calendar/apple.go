package calendar

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// ReadOptions tune a source read.
type ReadOptions struct {
	// Zone is the display zone for all-day and floating events (default time.Local).
	Zone *time.Location
	// BusyTimeout is how long to wait for Calendar.app's write lock (default 3 s).
	BusyTimeout time.Duration
}

func (o ReadOptions) zone() *time.Location {
	if o.Zone == nil {
		return time.Local
	}
	return o.Zone
}

// sourceError turns an open/read failure of a whole source into an
// actionable error: permission problems name Full Disk Access, a lock says
// to retry, a missing path says to check the config.
var sourceError = localsource.Access{Items: "events", App: "the Calendar or Contacts app"}.Error

// checkReadable opens and closes path so that permission and existence
// problems are reported as such, before SQLite turns them into a generic
// "unable to open database file".
func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// ReadApple reads events from Apple's Calendar.sqlitedb, read-only.
//
// Timestamps are seconds since 2001-01-01 UTC. All-day items start at
// midnight UTC of their date. Recurrence rows (frequency 1–4 = daily, weekly,
// monthly, yearly; specifier "D=…;M=…;O=…;W=…;Y=…;S=…" for BYDAY,
// BYMONTHDAY, BYMONTH, BYWEEKNO, BYYEARDAY, BYSETPOS) become RRULE text;
// anything else in them makes the rule unrepresentable rather than dropped.
// Reminders (entity_type 3) and hidden items are skipped.
func ReadApple(ctx context.Context, src SourceConfig, opts ReadOptions) (*SourceResult, error) {
	if err := checkReadable(src.Path); err != nil {
		return nil, sourceError("read Apple calendar", src.Path, err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 3 * time.Second
	}
	db, err := sqlitedb.Open(ctx, src.Path, sqlitedb.Options{ReadOnly: true, BusyTimeout: busy, MaxOpenConns: 1})
	if err != nil {
		return nil, sourceError("open Apple calendar", src.Path, err)
	}
	defer db.Close()
	// One read transaction gives a consistent snapshot across the tables.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, sourceError("read Apple calendar", src.Path, err)
	}
	defer tx.Rollback()
	r := &appleReader{tx: tx, src: src, zone: opts.zone(), zones: newZoneResolver()}
	res, err := r.read(ctx)
	if err != nil {
		return nil, sourceError("read Apple calendar", src.Path, err)
	}
	return res, nil
}

type appleReader struct {
	tx    *sql.Tx
	src   SourceConfig
	zone  *time.Location
	zones *zoneResolver
	cols  map[string]map[string]bool
}

// col returns "alias.name" when the table has the column, else "NULL", so
// the reader works across the schema versions of macOS and iOS.
func (r *appleReader) col(ctx context.Context, table, alias, name string) (string, error) {
	if r.cols == nil {
		r.cols = map[string]map[string]bool{}
	}
	cols, ok := r.cols[table]
	if !ok {
		cols = map[string]bool{}
		rows, err := r.tx.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return "", err
			}
			cols[strings.ToLower(n)] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
		r.cols[table] = cols
	}
	if cols[strings.ToLower(name)] {
		return alias + "." + name, nil
	}
	return "NULL", nil
}

func (r *appleReader) cols3(ctx context.Context, table, alias string, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, n := range names {
		c, err := r.col(ctx, table, alias, n)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

type appleRow struct {
	rowid                              int64
	summary, notes, startTZ, url       sql.NullString
	externalID, uniqueID, uuid         sql.NullString
	start, end, origDate, lastModified sql.NullFloat64
	allDay, origItem, status, avail    sql.NullInt64
	hasRecur, entityType, hidden       sql.NullInt64
	location, address                  sql.NullString
	calTitle, calUUID, storeName       sql.NullString
	calRowID                           sql.NullInt64
	recurrenceRule                     string
	exdates                            []string
	alarms                             []Alarm
}

func (r *appleReader) read(ctx context.Context) (*SourceResult, error) {
	ci, err := r.cols3(ctx, "CalendarItem", "ci", "summary", "description", "start_date", "start_tz", "end_date", "all_day",
		"orig_item_id", "orig_date", "status", "availability", "url", "last_modified", "external_id", "unique_identifier",
		"UUID", "has_recurrences", "entity_type", "hidden", "location_id", "calendar_id")
	if err != nil {
		return nil, err
	}
	loc, err := r.cols3(ctx, "Location", "l", "title", "address")
	if err != nil {
		return nil, err
	}
	cal, err := r.cols3(ctx, "Calendar", "c", "title", "UUID", "store_id")
	if err != nil {
		return nil, err
	}
	store, err := r.cols3(ctx, "Store", "s", "name")
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT ci.ROWID, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
		%s, %s, %s, %s, c.ROWID, %s
		FROM CalendarItem ci
		LEFT JOIN Calendar c ON c.ROWID = %s
		LEFT JOIN Store s ON s.ROWID = %s
		LEFT JOIN Location l ON l.ROWID = %s
		ORDER BY ci.ROWID`,
		ci[0], ci[1], ci[2], ci[3], ci[4], ci[5], ci[6], ci[7], ci[8], ci[9], ci[10], ci[11], ci[12], ci[13], ci[14], ci[15], ci[16], ci[17],
		loc[0], loc[1], cal[0], cal[1], store[0],
		ci[19], cal[2], ci[18])
	rows, err := r.tx.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("query CalendarItem: %w", err)
	}
	var items []*appleRow
	byRowID := map[int64]*appleRow{}
	for rows.Next() {
		a := &appleRow{}
		if err := rows.Scan(&a.rowid, &a.summary, &a.notes, &a.start, &a.startTZ, &a.end, &a.allDay, &a.origItem, &a.origDate,
			&a.status, &a.avail, &a.url, &a.lastModified, &a.externalID, &a.uniqueID, &a.uuid, &a.hasRecur, &a.entityType, &a.hidden,
			&a.location, &a.address, &a.calTitle, &a.calUUID, &a.calRowID, &a.storeName); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan CalendarItem: %w", err)
		}
		if a.entityType.Valid && a.entityType.Int64 != 2 || a.hidden.Valid && a.hidden.Int64 != 0 {
			continue // reminders and hidden items are not events
		}
		items = append(items, a)
		byRowID[a.rowid] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read CalendarItem: %w", err)
	}
	if err := r.readRecurrences(ctx, byRowID); err != nil {
		return nil, err
	}
	if err := r.readExceptionDates(ctx, byRowID); err != nil {
		return nil, err
	}
	if err := r.readAlarms(ctx, byRowID); err != nil {
		return nil, err
	}
	res := &SourceResult{}
	for _, a := range items {
		it, err := r.item(a, byRowID)
		if err != nil {
			res.ItemErrors = append(res.ItemErrors, ItemError{Path: r.src.Path, UID: it.UID, Err: err})
			continue
		}
		res.Items = append(res.Items, it)
	}
	return res, nil
}

func (r *appleReader) item(a *appleRow, byRowID map[int64]*appleRow) (Item, error) {
	it := Item{
		Source:     r.src.Name,
		Account:    nonEmpty(a.storeName.String, r.src.Account),
		Calendar:   nonEmpty(a.calTitle.String, "Calendar"),
		CalendarID: nonEmpty(a.calUUID.String, "calendar-"+strconv.FormatInt(a.calRowID.Int64, 10)),
		UID:        nonEmpty(a.uniqueID.String, a.uuid.String),
		ExternalID: a.externalID.String,
		SourcePath: r.src.Path,
		Title:      a.summary.String,
		Location:   joinNonEmpty(", ", a.location.String, a.address.String),
		Notes:      a.notes.String,
		URL:        a.url.String,
		RRule:      a.recurrenceRule,
		ExDates:    a.exdates,
		Alarms:     a.alarms,
	}
	if it.UID == "" {
		it.UID = "apple-item-" + strconv.FormatInt(a.rowid, 10)
	}
	if a.origItem.Valid && a.origItem.Int64 > 0 {
		master, ok := byRowID[a.origItem.Int64]
		if !ok {
			return it, fmt.Errorf("detached occurrence refers to missing item %d", a.origItem.Int64)
		}
		it.UID = nonEmpty(master.uniqueID.String, nonEmpty(master.uuid.String, it.UID))
		if !a.origDate.Valid {
			return it, errors.New("detached occurrence has no original date")
		}
		it.RecurrenceID = appleTime(a.origDate.Float64)
		it.RRule = ""
	}
	if a.lastModified.Valid {
		it.LastModified = appleTime(a.lastModified.Float64)
	}
	switch a.status.Int64 {
	case 1:
		it.Status = "confirmed"
	case 2:
		it.Status = "tentative"
	case 3:
		it.Status = "cancelled"
	}
	it.Transparent = a.avail.Valid && a.avail.Int64 == 1
	if !a.start.Valid {
		return it, errors.New("no start date")
	}
	start := appleTime(a.start.Float64)
	end := start
	if a.end.Valid {
		end = appleTime(a.end.Float64)
	}
	if end.Before(start) {
		return it, fmt.Errorf("ends (%s) before it starts (%s)", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	if a.allDay.Int64 != 0 {
		// Stored at midnight UTC; the end is the following midnight or one
		// second before it depending on the OS version.
		sd := start.UTC().Truncate(24 * time.Hour)
		ed := end.UTC().Add(-time.Second).Truncate(24*time.Hour).AddDate(0, 0, 1)
		if !ed.After(sd) {
			ed = sd.AddDate(0, 0, 1)
		}
		setAllDay(&it, sd, ed, r.zone)
		if !it.RecurrenceID.IsZero() {
			rid := it.RecurrenceID.UTC()
			it.RecurrenceID = dateInZone(rid, r.zone)
		}
		return it, nil
	}
	switch tz := a.startTZ.String; tz {
	case "", "_float":
		// Floating: the stored seconds are the wall clock read as UTC.
		it.Floating = true
		it.Start = wallIn(start, r.zone)
		it.End = it.Start.Add(end.Sub(start))
		if !it.RecurrenceID.IsZero() {
			it.RecurrenceID = wallIn(it.RecurrenceID, r.zone)
		}
	case "GMT", "UTC":
		it.Start, it.End = start, end
	default:
		l, err := r.zones.Resolve(tz)
		if err != nil {
			return it, err
		}
		it.TZID = l.String()
		it.Start, it.End = start.In(l), end.In(l)
	}
	return it, nil
}

// setAllDay fills the civil dates of an all-day item and their instants in zone.
func setAllDay(it *Item, startDate, endDate time.Time, zone *time.Location) {
	it.AllDay = true
	it.StartDate = startDate.Format(time.DateOnly)
	it.EndDate = endDate.Format(time.DateOnly)
	it.Start = dateInZone(startDate, zone)
	it.End = dateInZone(endDate, zone)
}

// dateInZone is midnight of d's civil date in zone.
func dateInZone(d time.Time, zone *time.Location) time.Time {
	y, m, day := d.Date()
	return time.Date(y, m, day, 0, 0, 0, 0, zone)
}

// wallIn reads the wall clock of t (as stored, in UTC) in zone.
func wallIn(t time.Time, zone *time.Location) time.Time {
	y, m, d := t.UTC().Date()
	h, mi, s := t.UTC().Clock()
	return time.Date(y, m, d, h, mi, s, 0, zone)
}

func (r *appleReader) readRecurrences(ctx context.Context, byRowID map[int64]*appleRow) error {
	c, err := r.cols3(ctx, "Recurrence", "r", "owner_id", "frequency", "interval", "count", "end_date", "specifier", "week_start", "by_month_months")
	if err != nil {
		return err
	}
	rows, err := r.tx.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM Recurrence r ORDER BY r.ROWID", strings.Join(c, ", ")))
	if err != nil {
		return fmt.Errorf("query Recurrence: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner, freq, interval, count, weekStart, byMonthMonths sql.NullInt64
		var endDate sql.NullFloat64
		var spec sql.NullString
		if err := rows.Scan(&owner, &freq, &interval, &count, &endDate, &spec, &weekStart, &byMonthMonths); err != nil {
			return fmt.Errorf("scan Recurrence: %w", err)
		}
		a, ok := byRowID[owner.Int64]
		if !ok {
			continue
		}
		rule := appleRule(freq, interval, count, endDate, spec, weekStart, byMonthMonths)
		if a.recurrenceRule != "" {
			// Several Recurrence rows for one item: keep them all visible
			// (the joined rule repeats FREQ and is flagged unrepresentable).
			rule = a.recurrenceRule + ";" + rule
		}
		a.recurrenceRule = rule
	}
	return rows.Err()
}

var appleFreq = map[int64]string{1: "DAILY", 2: "WEEKLY", 3: "MONTHLY", 4: "YEARLY"}

// appleRule writes a Recurrence row as RRULE text. Unknown parts are kept
// under names the strict parser refuses, so the rule is never silently
// narrowed.
func appleRule(freq, interval, count sql.NullInt64, endDate sql.NullFloat64, spec sql.NullString, weekStart, byMonthMonths sql.NullInt64) string {
	var parts []string
	if f, ok := appleFreq[freq.Int64]; ok {
		parts = append(parts, "FREQ="+f)
	} else {
		parts = append(parts, "FREQ=APPLE-"+strconv.FormatInt(freq.Int64, 10))
	}
	if interval.Int64 > 1 {
		parts = append(parts, "INTERVAL="+strconv.FormatInt(interval.Int64, 10))
	}
	if count.Int64 > 0 {
		parts = append(parts, "COUNT="+strconv.FormatInt(count.Int64, 10))
	} else if endDate.Valid {
		parts = append(parts, "UNTIL="+appleTime(endDate.Float64).UTC().Format("20060102T150405Z"))
	}
	hasMonths := false
	for _, kv := range strings.Split(spec.String, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k == "" {
			continue
		}
		switch k {
		case "D":
			var days []string
			for _, d := range strings.Split(v, ",") {
				days = append(days, strings.TrimPrefix(strings.TrimPrefix(d, "0"), "+"))
			}
			parts = append(parts, "BYDAY="+strings.Join(days, ","))
		case "M":
			parts = append(parts, "BYMONTHDAY="+v)
		case "O":
			hasMonths = true
			parts = append(parts, "BYMONTH="+v)
		case "W":
			parts = append(parts, "BYWEEKNO="+v)
		case "Y":
			parts = append(parts, "BYYEARDAY="+v)
		case "S":
			parts = append(parts, "BYSETPOS="+v)
		default:
			parts = append(parts, "APPLE-"+k+"="+v)
		}
	}
	if !hasMonths && byMonthMonths.Int64 > 0 {
		var months []string
		for m := 1; m <= 12; m++ {
			if byMonthMonths.Int64&(1<<(m-1)) != 0 {
				months = append(months, strconv.Itoa(m))
			}
		}
		if len(months) > 0 {
			parts = append(parts, "BYMONTH="+strings.Join(months, ","))
		}
	}
	if ws := weekStart.Int64; ws >= 1 && ws <= 7 && ws != 2 {
		parts = append(parts, "WKST="+[]string{"SU", "MO", "TU", "WE", "TH", "FR", "SA"}[ws-1])
	}
	return strings.Join(parts, ";")
}

func (r *appleReader) readExceptionDates(ctx context.Context, byRowID map[int64]*appleRow) error {
	rows, err := r.tx.QueryContext(ctx, "SELECT owner_id, date FROM ExceptionDate ORDER BY ROWID")
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil
		}
		return fmt.Errorf("query ExceptionDate: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner sql.NullInt64
		var date sql.NullFloat64
		if err := rows.Scan(&owner, &date); err != nil {
			return fmt.Errorf("scan ExceptionDate: %w", err)
		}
		a, ok := byRowID[owner.Int64]
		if !ok || !date.Valid {
			continue
		}
		t := appleTime(date.Float64)
		switch {
		case a.allDay.Int64 != 0:
			a.exdates = append(a.exdates, t.UTC().Format(time.DateOnly))
		case a.startTZ.String == "" || a.startTZ.String == "_float":
			a.exdates = append(a.exdates, wallIn(t, r.zone).UTC().Format(time.RFC3339))
		default:
			a.exdates = append(a.exdates, t.UTC().Format(time.RFC3339))
		}
	}
	return rows.Err()
}

func (r *appleReader) readAlarms(ctx context.Context, byRowID map[int64]*appleRow) error {
	c, err := r.cols3(ctx, "Alarm", "a", "owner_id", "trigger_interval", "trigger_date", "disabled")
	if err != nil {
		return err
	}
	rows, err := r.tx.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM Alarm a ORDER BY a.ROWID", strings.Join(c, ", ")))
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil
		}
		return fmt.Errorf("query Alarm: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner, interval, disabled sql.NullInt64
		var at sql.NullFloat64
		if err := rows.Scan(&owner, &interval, &at, &disabled); err != nil {
			return fmt.Errorf("scan Alarm: %w", err)
		}
		a, ok := byRowID[owner.Int64]
		if !ok || disabled.Int64 != 0 {
			continue
		}
		switch {
		case at.Valid:
			t := appleTime(at.Float64).UTC()
			a.alarms = append(a.alarms, Alarm{At: &t, Action: "display"})
		case interval.Valid:
			m := interval.Int64 / 60
			a.alarms = append(a.alarms, Alarm{OffsetMinutes: &m, Action: "display"})
		}
	}
	return rows.Err()
}

func nonEmpty(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return v
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
