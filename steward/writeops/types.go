// Package writeops is Steward's write journal (STEWARD_HOME/write-ops/ops.db,
// spec: "Journal, Confirmation And Retry"): every mail send, reply, scheduled
// send and every calendar or contacts mutation is recorded before it is
// executed, its immediate backend outcome is recorded after, and scheduler
// passes later look for observable evidence that it happened.
//
// The journal is primary, sensitive state: it keeps the complete executable
// input (a scheduled mail needs its body; a calendar confirmation needs the
// expected fields). The audit copy of each lifecycle step is redacted by the
// audit ledger.
//
// Nothing here ever re-executes an uncertain write. A scheduled row is claimed
// atomically before it is sent; a crash after the claim leaves the row
// started, and reconciliation only seeks evidence until the attempt limit
// turns it needs_review (mail) or retry_exhausted (calendar, contacts).
//
// The package is kind-generic: each write kind supplies an Executor (the
// backend call) and a Confirmer (the evidence check).
package writeops

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Kind names what a journaled operation does, as "domain.action".
type Kind string

// Write kinds. The domain (the part before the dot) selects the confirmation
// pass and what happens at its attempt limit.
const (
	KindMailSend       Kind = "mail.send"
	KindMailReply      Kind = "mail.reply"
	KindCalendarCreate Kind = "calendar.create"
	KindCalendarUpdate Kind = "calendar.update"
	KindCalendarDelete Kind = "calendar.delete"
	KindContactsCreate Kind = "contacts.create"
	KindContactsUpdate Kind = "contacts.update"
)

// Domain is the part of a kind before the dot: mail, calendar or contacts.
func (k Kind) Domain() Domain {
	d, _, _ := strings.Cut(string(k), ".")
	return Domain(d)
}

// Domain groups kinds that one confirmation pass reconciles.
type Domain string

// Domains.
const (
	DomainMail     Domain = "mail"
	DomainCalendar Domain = "calendar"
	DomainContacts Domain = "contacts"
)

// State is where an operation is in its lifecycle (the spec's names).
type State string

// States.
const (
	// StateScheduled: a mail waiting for its scheduled_for instant; only
	// ClaimDue moves it on.
	StateScheduled State = "scheduled"
	// StateStarted: recorded and (about to be) handed to the backend. A row
	// left started for StaleStarted is one whose caller crashed; it is only
	// ever reconciled, never executed again.
	StateStarted State = "started"
	// StateReturned: the backend returned without error. Not proof: the
	// confirmation pass still has to observe the effect.
	StateReturned State = "script_returned"
	// StateUnknown: the backend's outcome is ambiguous (a dropped connection
	// after the message was handed over, a timeout).
	StateUnknown State = "unknown"
	// StateFailed: the backend said the write was not done.
	StateFailed State = "failed"
	// StateConfirmed: evidence of the effect was observed. Terminal.
	StateConfirmed State = "confirmed"
	// StateNeedsReview: mail only, after the confirmation limit; the user has
	// to look and, if needed, ask for a new send. Terminal.
	StateNeedsReview State = "needs_review"
	// StateRetryExhausted: calendar and contacts, after the confirmation
	// limit. "Not confirmed", not rolled back. Terminal.
	StateRetryExhausted State = "retry_exhausted"
)

// Terminal reports whether no pass will touch an operation in state s again.
func (s State) Terminal() bool {
	return s == StateConfirmed || s == StateNeedsReview || s == StateRetryExhausted
}

// Operation is one journaled write.
type Operation struct {
	ID    string `json:"id"`
	Kind  Kind   `json:"kind"`
	State State  `json:"state"`
	// Summary is a one-line description for review lists ("mail to
	// a@example.com: Lunch"). It is stored as given; keep secrets out.
	Summary string `json:"summary"`
	// Input is the complete executable input, as the executor needs it.
	Input json.RawMessage `json:"input"`
	// Expected is the observable outcome confirmation looks for.
	Expected json.RawMessage `json:"expected,omitempty"`
	// Result is what the backend returned (a Message-ID, an event UID).
	Result json.RawMessage `json:"result,omitempty"`
	// Evidence is what the last confirmation attempt found or missed.
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// Error is the backend's message (failed, unknown).
	Error string `json:"error,omitempty"`
	// Note is the last confirmation attempt's finding ("no Sent message
	// with this subject", "2 matches: ambiguous").
	Note string `json:"note,omitempty"`
	// Attempts counts executions handed to the backend (0 or 1 in practice:
	// nothing re-executes).
	Attempts int `json:"attempts"`
	// ConfirmAttempts counts confirmation checks that found no evidence.
	ConfirmAttempts int `json:"confirmAttempts"`
	// Origin says who asked: a chat id, a watch id, "cli".
	Origin string `json:"origin,omitempty"`
	// Tool is the tool name that created the operation.
	Tool string `json:"tool,omitempty"`

	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// ScheduledFor is set on scheduled sends.
	ScheduledFor time.Time `json:"scheduledFor,omitzero"`
	// AttemptedAt is when the execution was handed to the backend; mail
	// confirmation's window starts one minute before it.
	AttemptedAt time.Time `json:"attemptedAt,omitzero"`
	// ReturnedAt is when the backend returned (or failed); calendar evidence
	// must come from a sync that started after it.
	ReturnedAt time.Time `json:"returnedAt,omitzero"`
	// ConfirmedAt is when evidence was found.
	ConfirmedAt time.Time `json:"confirmedAt,omitzero"`
}

// Decode unmarshals the operation's input into v.
func (o *Operation) Decode(v any) error { return json.Unmarshal(o.Input, v) }

// NewOperation is what a caller journals before executing.
type NewOperation struct {
	Kind     Kind
	Summary  string
	Input    any // marshalled to JSON; must hold everything the executor needs
	Expected any // marshalled to JSON; may be nil
	Origin   string
	Tool     string
}

// definiteError marks a backend error that proves the write was not done.
type definiteError struct{ err error }

func (e definiteError) Error() string { return e.err.Error() }
func (e definiteError) Unwrap() error { return e.err }

// NotDone wraps a backend error that proves nothing was written (an SMTP
// 5xx before DATA, a validation refusal, a calendar that does not exist).
// Execute records such an outcome as failed; any other error is unknown.
func NotDone(err error) error {
	if err == nil {
		return nil
	}
	return definiteError{err}
}

// IsNotDone reports whether err (or one it wraps) was marked by NotDone.
func IsNotDone(err error) bool {
	var d definiteError
	return errors.As(err, &d)
}

// MetaChatID is the MCP _meta key under which the host names the chat
// whose turn calls a tool (mcpbridge Options.CallMeta), so a connector can
// journal its writes with that chat as their origin.
const MetaChatID = "steward/chatId"

// OriginFromMeta returns the origin ("chat:<id>") named by a tool call's
// _meta, or "".
func OriginFromMeta(meta map[string]any) string {
	if id, _ := meta[MetaChatID].(string); id != "" {
		return "chat:" + id
	}
	return ""
}
