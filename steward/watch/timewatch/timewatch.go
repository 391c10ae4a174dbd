// Package timewatch is the watch adapter for one-shot times: a time.reached
// event at an instant ("call me today at 09:00", "in 30 minutes").
// Absolute input is an RFC 3339 instant with an explicit offset; relative
// input ("afterMinutes=N") is frozen to an instant when the watch is
// prepared, before any approval is shown. Instants are stored in UTC and
// rendered in the local zone with that date's offset.
package timewatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/watch"
)

// Source is the watch source name.
const Source = "time"

// EventReached is the only event type.
const EventReached = "time.reached"

// DefaultGrace is how long after its instant a missed time.reached still
// fires (after a restart) before the watch expires.
const DefaultGrace = 2 * time.Hour

// Options configures the adapter.
type Options struct {
	Now      func() time.Time
	Location *time.Location // rendering zone; default time.Local
	Grace    time.Duration
	Language string // "en" (default) or "it" fallback texts
}

// Adapter is the time watch adapter.
type Adapter struct{ opts Options }

// New returns the adapter.
func New(opts Options) *Adapter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	return &Adapter{opts: opts}
}

// Snapshot is the state of a time watch.
type Snapshot struct {
	At      string `json:"at"`      // UTC, RFC 3339
	AtMs    int64  `json:"atMs"`    // the same instant
	AtLocal string `json:"atLocal"` // local time with that date's offset
	Reached bool   `json:"reached"`
}

// Source implements watch.Adapter.
func (a *Adapter) Source() string { return Source }

// PrepareRef freezes "afterMinutes=N" into an instant and normalises an
// absolute instant to UTC; it refuses instants without an explicit offset
// and instants already past.
func (a *Adapter) PrepareRef(ref string, now time.Time) (string, error) {
	ref = strings.TrimSpace(ref)
	var at time.Time
	if v, ok := strings.CutPrefix(ref, "afterMinutes="); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n <= 0 || n > 7*24*60 {
			return "", errors.New("afterMinutes must be a number of minutes between 0 and 10080")
		}
		at = now.Add(time.Duration(n * float64(time.Minute)))
	} else {
		t, err := time.Parse(time.RFC3339, ref)
		if err != nil {
			return "", fmt.Errorf("time %q must be an RFC 3339 instant with an explicit offset, e.g. 2026-11-30T09:00:00+01:00, or use afterMinutes", ref)
		}
		at = t
	}
	if !at.After(now) {
		return "", fmt.Errorf("%s is already past", at.In(a.opts.Location).Format(time.RFC3339))
	}
	return at.UTC().Truncate(time.Second).Format(time.RFC3339), nil
}

// Snapshot implements watch.Adapter.
func (a *Adapter) Snapshot(_ context.Context, ref string) (json.RawMessage, error) {
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(ref))
	if err != nil {
		return nil, fmt.Errorf("time watch reference %q is not an RFC 3339 instant", ref)
	}
	s := Snapshot{At: at.UTC().Format(time.RFC3339), AtMs: at.UnixMilli(), AtLocal: at.In(a.opts.Location).Format(time.RFC3339),
		Reached: !a.opts.Now().Before(at)}
	return json.Marshal(s)
}

func parse(b json.RawMessage) (Snapshot, bool) {
	var s Snapshot
	return s, len(b) > 0 && json.Unmarshal(b, &s) == nil && s.AtMs != 0
}

// Events implements watch.Adapter: time.reached once the instant passed.
func (a *Adapter) Events(prev, cur json.RawMessage) ([]watch.Event, error) {
	p, okp := parse(prev)
	c, okc := parse(cur)
	if !okc {
		return nil, errors.New("damaged time snapshot")
	}
	if !c.Reached || (okp && p.Reached) {
		return nil, nil
	}
	local, _ := time.Parse(time.RFC3339, c.AtLocal)
	text := fmt.Sprintf("It's %s: your reminder.", local.Format("15:04"))
	title := "Reminder"
	if a.opts.Language == "it" {
		text, title = fmt.Sprintf("Sono le %s: ecco il promemoria.", local.Format("15:04")), "Promemoria"
	}
	return []watch.Event{{
		Key: "reached:" + strconv.FormatInt(c.AtMs, 10), Type: EventReached, At: time.UnixMilli(c.AtMs),
		Data:     map[string]any{"at": c.At, "atMs": c.AtMs, "atLocal": c.AtLocal},
		Previous: prev, Current: cur, FallbackText: text,
		Notification: &watch.Notification{Title: watch.Text{"": title}},
	}}, nil
}

// DefaultExpiry implements watch.Adapter: the instant plus the grace.
func (a *Adapter) DefaultExpiry(snap json.RawMessage, created time.Time) time.Time {
	if s, ok := parse(snap); ok {
		return time.UnixMilli(s.AtMs).Add(a.opts.Grace)
	}
	return created.Add(a.opts.Grace)
}

// IsTerminal implements watch.Adapter: a reached time has nothing left.
func (a *Adapter) IsTerminal(snap json.RawMessage) bool {
	s, ok := parse(snap)
	return ok && s.Reached
}

// PollWithin implements watch.Urgency: poll at the instant, not up to a
// whole interval after it.
func (a *Adapter) PollWithin(snap json.RawMessage, now time.Time) time.Duration {
	s, ok := parse(snap)
	if !ok || s.Reached {
		return 0
	}
	return max(time.UnixMilli(s.AtMs).Sub(now), time.Millisecond)
}

// CheckRules implements watch.RuleChecker: rules are time.reached events or
// before_time triggers on atMs.
func (a *Adapter) CheckRules(rules []watch.Rule, _ json.RawMessage) ([]watch.Rule, error) {
	for _, r := range rules {
		if r.Event != "" && r.Event != EventReached {
			return nil, fmt.Errorf("rule %q: a time watch only has the event %s", r.ID, EventReached)
		}
	}
	return rules, nil
}
