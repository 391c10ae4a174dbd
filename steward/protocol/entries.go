package protocol

import (
	"encoding/json"
	"fmt"
)

// Transcript entry kinds. Each kind's Data is one Go value: EntryTypes
// names it, and DecodeEntry returns it.
const (
	EntryUser      = "user"      // UserMessageSaved
	EntryControl   = "control"   // UserMessageSaved: the host's own instruction, never the user's words
	EntryAssistant = "assistant" // AssistantMessage
	EntryTool      = "tool"      // ToolCard
	EntryApproval  = "approval"  // ApprovalCard
	EntryQuestion  = "question"  // QuestionCard
	EntryError     = "error"     // TurnError
	EntrySummary   = "summary"   // Summarised
)

// Statuses of a pending request's card (approvals also end with the
// approval.resolved verdicts: approved, denied, revise, timeout, no_channel).
const (
	StatusPending  = "pending"
	StatusAnswered = "answered"   // a question the user answered
	StatusTimeout  = "timeout"    // nobody answered in time
	StatusNoClient = "no_channel" // no app was connected to answer
)

// ApprovalCard is a gated call's approval as the transcript keeps it:
// pending while it waits, then its verdict with the user's note and
// edited arguments.
type ApprovalCard struct {
	ApprovalID string          `json:"approvalId"`
	CallID     string          `json:"callId"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Note       string          `json:"note,omitempty"`
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
}

// QuestionCard is an ask_user question as the transcript keeps it:
// pending while it waits, then answered (with Answer), timeout or
// no_channel.
type QuestionCard struct {
	QuestionID string   `json:"questionId"`
	Text       string   `json:"text"`
	Options    []string `json:"options,omitempty"`
	Status     string   `json:"status"`
	Answer     string   `json:"answer,omitempty"`
}

// TurnError is how a turn ended without an answer: stopped by the user
// (Aborted) or failed, with the plain cause and fix and the technical
// error for the details.
type TurnError struct {
	// TurnID is the turn whose turn.done frame carries the same error: a
	// page that read the transcript before the frame arrived shows it once.
	TurnID  string `json:"turnId,omitempty"`
	Error   string `json:"error"`
	Aborted bool   `json:"aborted"`
	Cause   string `json:"cause"`
	Fix     string `json:"fix"`
}

// NewEntryData returns a new value of the Go type of kind's Data (a pointer
// to one of the types the Entry* constants name), or false for a kind this
// version does not know.
func NewEntryData(kind string) (any, bool) {
	switch kind {
	case EntryUser, EntryControl:
		return &UserMessageSaved{}, true
	case EntryAssistant:
		return &AssistantMessage{}, true
	case EntryTool:
		return &ToolCard{}, true
	case EntryApproval:
		return &ApprovalCard{}, true
	case EntryQuestion:
		return &QuestionCard{}, true
	case EntryError:
		return &TurnError{}, true
	case EntrySummary:
		return &Summarised{}, true
	}
	return nil, false
}

// DecodeEntry returns e's Data as the Go value of its kind.
func DecodeEntry(e Entry) (any, error) {
	v, ok := NewEntryData(e.Kind)
	if !ok {
		return nil, fmt.Errorf("transcript entry %s: unknown kind %q", e.ID, e.Kind)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return nil, fmt.Errorf("transcript entry %s (%s): %w", e.ID, e.Kind, err)
	}
	return v, nil
}
