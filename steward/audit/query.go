package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Filter selects events. Empty fields do not filter.
type Filter struct {
	Actor       string
	Type        string
	Risk        Risk
	ChatID      string
	Tool        string
	Correlation string
	From        time.Time // inclusive
	To          time.Time // exclusive
	// Text keeps events whose summary or payload contains every
	// whitespace-separated term, ignoring case.
	Text string
	// Limit is the page size: DefaultLimit when zero, at most MaxLimit.
	Limit int
	// Before is the Next cursor of the previous page.
	Before string
}

// Page is one page of events, newest first.
type Page struct {
	Events []Event `json:"events"`
	// Next is the cursor for the following (older) page; empty on the last.
	Next string `json:"next,omitempty"`
}

// ErrNotFound reports an event id that is not in the ledger.
var ErrNotFound = errors.New("audit event not found")

// ErrBadCursor reports a Before value that is not a cursor this ledger gave.
var ErrBadCursor = errors.New("malformed audit page cursor")

// cursor is the position of the last event of a page: events are ordered by
// time then id, both descending.
type cursor struct{ ts, id int64 }

func (c cursor) String() string { return fmt.Sprintf("%d.%d", c.ts, c.id) }

func parseCursor(s string) (cursor, error) {
	a, b, ok := strings.Cut(s, ".")
	ts, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || id < 0 {
		return cursor{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	return cursor{ts, id}, nil
}

const selectSQL = `SELECT id, ts, actor, type, risk, chat_id, tool, correlation_id, summary, payload, refs FROM events`

// Query returns the events matching f, newest first.
//
// Free text uses the FTS5 trigram index for terms of three or more
// characters (an indexed substring match, so the Audit page stays fast as the
// ledger grows) and LIKE for shorter terms, which a trigram index cannot
// answer.
func (l *Ledger) Query(ctx context.Context, f Filter) (Page, error) {
	if l == nil {
		return Page{Events: []Event{}}, nil
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	for _, eq := range []struct{ col, v string }{
		{"actor", f.Actor}, {"type", f.Type}, {"risk", string(f.Risk)},
		{"chat_id", f.ChatID}, {"tool", f.Tool}, {"correlation_id", f.Correlation},
	} {
		if eq.v != "" {
			add(eq.col+" = ?", eq.v)
		}
	}
	if !f.From.IsZero() {
		add("ts >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		add("ts < ?", f.To.UnixMilli())
	}
	if f.Before != "" {
		c, err := parseCursor(f.Before)
		if err != nil {
			return Page{}, err
		}
		add("(ts < ? OR (ts = ? AND id < ?))", c.ts, c.ts, c.id)
	}
	var phrases []string
	for _, term := range strings.Fields(f.Text) {
		if utf8.RuneCountInString(term) >= 3 {
			phrases = append(phrases, `"`+strings.ReplaceAll(term, `"`, `""`)+`"`)
			continue
		}
		like := "%" + escapeLike(term) + "%"
		add(`(summary LIKE ? ESCAPE '\' OR payload LIKE ? ESCAPE '\')`, like, like)
	}
	if len(phrases) > 0 {
		add("id IN (SELECT rowid FROM events_fts WHERE events_fts MATCH ?)", strings.Join(phrases, " AND "))
	}
	q := selectSQL
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY ts DESC, id DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return Page{}, fmt.Errorf("query audit ledger: %w", err)
	}
	defer rows.Close()
	page := Page{Events: []Event{}}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return Page{}, err
		}
		page.Events = append(page.Events, e)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("query audit ledger: %w", err)
	}
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		last := page.Events[limit-1]
		page.Next = cursor{last.Time.UnixMilli(), last.ID}.String()
	}
	return page, nil
}

// Get returns one event by id.
func (l *Ledger) Get(ctx context.Context, id int64) (Event, error) {
	if l == nil {
		return Event{}, ErrNotFound
	}
	e, err := scanEvent(l.db.QueryRowContext(ctx, selectSQL+" WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return e, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

type scanner interface{ Scan(dest ...any) error }

func scanEvent(s scanner) (Event, error) {
	var e Event
	var ts int64
	var risk, payload, refs string
	if err := s.Scan(&e.ID, &ts, &e.Actor, &e.Type, &risk, &e.ChatID, &e.Tool, &e.Correlation, &e.Summary, &payload, &refs); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Event{}, err
		}
		return Event{}, fmt.Errorf("read audit event: %w", err)
	}
	e.Time = time.UnixMilli(ts).UTC()
	e.Risk = Risk(risk)
	if payload != "null" {
		e.Payload = json.RawMessage(payload)
	}
	if err := json.Unmarshal([]byte(refs), &e.Refs); err != nil {
		return Event{}, fmt.Errorf("read audit event %d refs: %w", e.ID, err)
	}
	if len(e.Refs) == 0 {
		e.Refs = nil
	}
	return e, nil
}
