// Package watch is Steward's generic, persistent event-monitor engine. A
// watch stores an opaque resource reference, the user's instruction and
// semantic event rules; a source adapter turns snapshot changes into domain
// events; matching events go into a durable SQLite queue (watches.db) and are
// delivered by resuming the originating chat's agent session. The engine has
// no domain branching: trains, times and future sources are adapters.
package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Lifecycle states of a watch.
const (
	StatusActive    = "active"
	StatusStopped   = "stopped"
	StatusExpired   = "expired"
	StatusCompleted = "completed"
)

// Event delivery states.
const (
	EventPending   = "pending"
	EventDelivered = "delivered"
	EventFailed    = "failed"
)

// TriggerBeforeTime is the generic temporal trigger: it fires a given number
// of minutes before a live timestamp of the snapshot, so a moving ETA moves
// the deadline until the rule fires.
const TriggerBeforeTime = "before_time"

// EventBeforeTime is the type of the events before_time triggers produce.
const EventBeforeTime = "trigger.before_time"

// Rule is one semantic rule of a watch: exactly one event type or temporal
// trigger, optional equality filters on the event data, once, rule-scoped
// tool grants and a bounded continuation.
type Rule struct {
	ID           string         `json:"id"`
	Event        string         `json:"event,omitempty"`
	Trigger      *Trigger       `json:"trigger,omitempty"`
	Where        map[string]any `json:"where,omitempty"`
	Once         bool           `json:"once,omitempty"`
	Grants       []Grant        `json:"grants,omitempty"`
	Continuation *Continuation  `json:"continuation,omitempty"`
	// VoiceFallback decides what a rule that grants a call does when the
	// call does not happen: "" (the default) stays silent — a call-only
	// rule never pushes — and "push" sends the notification instead. A push
	// is sent only when every matched voice rule says "push".
	VoiceFallback string `json:"voiceFallback,omitempty"`
}

// VoiceFallbackPush is Rule.VoiceFallback's one value.
const VoiceFallbackPush = "push"

// Trigger is a temporal trigger relative to a live snapshot timestamp
// (Unix milliseconds or an RFC 3339 string at Field, a dot path).
type Trigger struct {
	Kind    string  `json:"kind"`
	Field   string  `json:"field"`
	Minutes float64 `json:"minutes"`
}

// Continuation schedules a durable child time watch after AfterMinutes when
// a granted action reports one of Outcomes, up to MaxAttempts times. The
// child inherits the exact grants and event context.
type Continuation struct {
	Outcomes     []string `json:"outcomes"`
	AfterMinutes float64  `json:"afterMinutes"`
	MaxAttempts  int      `json:"maxAttempts"`
}

// Text is a string that may be keyed by notification language: a plain JSON
// string is language-neutral (key "").
type Text map[string]string

// UnmarshalJSON accepts a string or an object of language → string.
func (t *Text) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = Text{"": s}
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("expected a string or an object of language → string")
	}
	*t = m
	return nil
}

// Pick returns the text for lang, else the language-neutral one, else English.
func (t Text) Pick(lang string) string {
	for _, k := range []string{lang, "", "en"} {
		if v, ok := t[k]; ok && v != "" {
			return v
		}
	}
	for _, v := range t {
		return v
	}
	return ""
}

// Notification is an adapter's domain wording for an event: a title and
// guidance for the agent, optionally per language.
type Notification struct {
	Title    Text `json:"title,omitempty"`
	Guidance Text `json:"guidance,omitempty"`
}

// Event is a DomainEvent: a stable resource-relative key, a semantic type,
// its time, structured data (what rules filter on), the states it came
// from, a deterministic fallback text and optional wording.
type Event struct {
	Key          string          `json:"key"`
	Type         string          `json:"type"`
	At           time.Time       `json:"at"`
	Data         map[string]any  `json:"data"`
	Previous     json.RawMessage `json:"previous,omitempty"`
	Current      json.RawMessage `json:"current,omitempty"`
	FallbackText string          `json:"fallbackText"`
	Notification *Notification   `json:"notification,omitempty"`
	// RuleID is set on trigger events: the rule whose trigger fired.
	RuleID string `json:"ruleId,omitempty"`
}

// Adapter is a watchable source.
type Adapter interface {
	// Source is the name watches use, e.g. "train".
	Source() string
	// Snapshot reads the current, serializable state of resourceRef.
	Snapshot(ctx context.Context, resourceRef string) (json.RawMessage, error)
	// Events derives the domain events of a transition; it must be
	// deterministic from (prev, cur) and give stable keys.
	Events(prev, cur json.RawMessage) ([]Event, error)
	// DefaultExpiry bounds a watch created without an explicit expiry.
	DefaultExpiry(snapshot json.RawMessage, created time.Time) time.Time
	// IsTerminal reports a state after which nothing more can happen.
	IsTerminal(snapshot json.RawMessage) bool
}

// RefPreparer is implemented by adapters whose references need freezing
// before a watch is stored or an approval is shown (relative times become
// absolute instants).
type RefPreparer interface {
	PrepareRef(resourceRef string, now time.Time) (string, error)
}

// RuleChecker is implemented by adapters that validate (and may normalise)
// rules against the initial snapshot: known event types, mandatory
// selectors, named stops on the route.
type RuleChecker interface {
	CheckRules(rules []Rule, snapshot json.RawMessage) ([]Rule, error)
}

// Urgency is implemented by adapters that want a shorter poll near a
// time-sensitive milestone. Zero means no preference; the engine clamps the
// answer to MinUrgentInterval.
type Urgency interface {
	PollWithin(snapshot json.RawMessage, now time.Time) time.Duration
}

// Watch is a stored watch.
type Watch struct {
	ID          string          `json:"id"`
	Source      string          `json:"source"`
	ResourceRef string          `json:"resourceRef"`
	Rules       []Rule          `json:"rules"`
	Instruction string          `json:"instruction"`
	ChatID      string          `json:"chatId"`
	Agent       bool            `json:"agent"`
	Status      string          `json:"status"`
	Snapshot    json.RawMessage `json:"snapshot,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	LastCheckAt time.Time       `json:"lastCheckAt,omitzero"`
	LastErrorAt time.Time       `json:"lastErrorAt,omitzero"`
	LastError   string          `json:"lastError,omitempty"`
	EndedAt     time.Time       `json:"endedAt,omitzero"`
	// ParentEventID and Attempt identify a continuation child.
	ParentEventID string `json:"parentEventId,omitempty"`
	Attempt       int    `json:"attempt,omitempty"`
	// Context is the event context a continuation child inherited.
	Context json.RawMessage `json:"context,omitempty"`
}

// Limits on what a watch may hold.
const (
	MaxRules       = 32
	MaxInstruction = 4000
	MaxWhereKeys   = 8
	MaxExpiry      = 7 * 24 * time.Hour
)

var ruleIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// validateRules checks the source-neutral shape of rules. Grants are checked
// separately against the capability registry.
func validateRules(rules []Rule) error {
	if len(rules) == 0 {
		return fmt.Errorf("a watch needs at least one rule")
	}
	if len(rules) > MaxRules {
		return fmt.Errorf("a watch has at most %d rules", MaxRules)
	}
	seen := map[string]bool{}
	for i, r := range rules {
		where := fmt.Sprintf("rule %d", i+1)
		if r.ID != "" {
			where = fmt.Sprintf("rule %q", r.ID)
		}
		if !ruleIDPattern().MatchString(r.ID) {
			return fmt.Errorf("%s: id must be 1–64 letters, digits, '_', '-' or '.'", where)
		}
		if seen[r.ID] {
			return fmt.Errorf("%s: rule ids must be unique", where)
		}
		seen[r.ID] = true
		if (r.Event == "") == (r.Trigger == nil) {
			return fmt.Errorf("%s: give exactly one of event or trigger", where)
		}
		if r.Trigger != nil {
			t := r.Trigger
			if t.Kind != TriggerBeforeTime {
				return fmt.Errorf("%s: trigger kind must be %q", where, TriggerBeforeTime)
			}
			if !validPath(t.Field) {
				return fmt.Errorf("%s: trigger field must name a timestamp of the watched state, e.g. estimatedArrivalMs", where)
			}
			if t.Minutes <= 0 || t.Minutes > 24*60 {
				return fmt.Errorf("%s: trigger minutes must be between 0 and 1440", where)
			}
		}
		if len(r.Where) > MaxWhereKeys {
			return fmt.Errorf("%s: at most %d where filters", where, MaxWhereKeys)
		}
		for k := range r.Where {
			if !validPath(k) {
				return fmt.Errorf("%s: where key %q is not a dot path", where, k)
			}
		}
		if r.VoiceFallback != "" && r.VoiceFallback != VoiceFallbackPush {
			return fmt.Errorf("%s: voiceFallback must be %q or absent", where, VoiceFallbackPush)
		}
		if r.VoiceFallback != "" && len(r.Grants) == 0 {
			return fmt.Errorf("%s: voiceFallback applies to a rule that grants a call", where)
		}
		if c := r.Continuation; c != nil {
			if len(r.Grants) == 0 {
				return fmt.Errorf("%s: a continuation repeats granted actions, so the rule needs grants", where)
			}
			if len(c.Outcomes) == 0 || c.AfterMinutes < 1 || c.AfterMinutes > 24*60 || c.MaxAttempts < 1 || c.MaxAttempts > 20 {
				return fmt.Errorf("%s: continuation needs outcomes, afterMinutes 1–1440 and maxAttempts 1–20", where)
			}
		}
	}
	return nil
}

var pathPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$`) })

func validPath(p string) bool { return len(p) <= 128 && pathPattern().MatchString(p) }

// lookup resolves a dot path in decoded JSON.
func lookup(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch m := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = m[part]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscanf(part, "%d", &i); err != nil || i < 0 || i >= len(m) || fmt.Sprint(i) != part {
				return nil, false
			}
			v = m[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// timestampAt reads a timestamp (Unix ms number or RFC 3339 string) at path.
func timestampAt(doc any, path string) (time.Time, bool) {
	v, ok := lookup(doc, path)
	if !ok {
		return time.Time{}, false
	}
	switch x := v.(type) {
	case float64:
		if x <= 0 {
			return time.Time{}, false
		}
		return time.UnixMilli(int64(x)), true
	case json.Number:
		n, err := x.Int64()
		return time.UnixMilli(n), err == nil && n > 0
	case string:
		t, err := time.Parse(time.RFC3339, x)
		return t, err == nil
	}
	return time.Time{}, false
}

// decode parses JSON into generic values (numbers as float64).
func decode(b json.RawMessage) any {
	var v any
	if len(b) > 0 {
		json.Unmarshal(b, &v)
	}
	return v
}
