package voice

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Stable terminal outcomes of a call.
const (
	OutcomeCompleted        = "completed"
	OutcomeNoAnswer         = "no_answer"
	OutcomeRejected         = "rejected"
	OutcomeBusy             = "busy"
	OutcomeUnreachable      = "unreachable"
	OutcomeTimeout          = "timeout"
	OutcomeAuthFailed       = "auth_failed"
	OutcomeServerError      = "server_error"
	OutcomeMediaError       = "media_error"
	OutcomeMediaStalled     = "media_stalled"
	OutcomeMediaInterrupted = "media_interrupted"
	OutcomeNetworkError     = "network_error"
)

var knownOutcomes = map[string]bool{OutcomeCompleted: true, OutcomeNoAnswer: true, OutcomeRejected: true, OutcomeBusy: true,
	OutcomeUnreachable: true, OutcomeTimeout: true, OutcomeAuthFailed: true, OutcomeServerError: true, OutcomeMediaError: true,
	OutcomeMediaStalled: true, OutcomeMediaInterrupted: true, OutcomeNetworkError: true}

// FailedMarker starts the transport's structured failure report.
const FailedMarker = "[CALL FAILED]"

// transportStatus is call_status's JSON, or a failure marker's.
type transportStatus struct {
	Phase      string `json:"phase"`
	Outcome    string `json:"outcome"`
	Code       string `json:"code"`
	SIPStatus  int    `json:"sipStatus"`
	Reason     string `json:"reason"`
	Connected  bool   `json:"connected"`
	DurationMs int64  `json:"durationMs"`
}

// outcomeStatus is a parsed outcome and whether the call had connected
// (which decides recovery).
type outcomeStatus struct {
	Status
	connected bool
}

// parseOutcome reads the transport's answer: a "[CALL FAILED] {json}" marker
// anywhere in the text, else call_status JSON. Outcomes outside the stable
// list are kept as "unknown" with the original in Error; a nominal SIP 503
// whose reason speaks of sockets or resets is a network failure.
func parseOutcome(text string) outcomeStatus {
	var ts transportStatus
	raw := strings.TrimSpace(text)
	if i := strings.Index(raw, FailedMarker); i >= 0 {
		raw = strings.TrimSpace(raw[i+len(FailedMarker):])
		if j := strings.LastIndex(raw, "}"); j >= 0 {
			raw = raw[:j+1]
		}
	}
	if err := json.Unmarshal([]byte(raw), &ts); err != nil {
		return outcomeStatus{Status: Status{Outcome: "unknown", Error: "unreadable call status: " + firstLine(text)}}
	}
	out := ts.Outcome
	if out == "" {
		out = ts.Code
	}
	st := outcomeStatus{Status: Status{Outcome: out, DurationMs: ts.DurationMs, Phase: ts.Phase}, connected: ts.Connected}
	if ts.Reason != "" || ts.SIPStatus != 0 {
		st.Error = strings.TrimSpace(fmt.Sprintf("SIP %d %s", ts.SIPStatus, ts.Reason))
	}
	if out == OutcomeServerError && ts.SIPStatus == 503 && socketLanguage(ts.Reason) {
		st.Outcome = OutcomeNetworkError
	}
	if st.Outcome != "" && !knownOutcomes[st.Outcome] {
		st.Error = strings.TrimSpace("outcome " + st.Outcome + "; " + st.Error)
		st.Outcome = "unknown"
	}
	if st.Outcome != "" {
		st.Phase = "" // a terminal report: finish decides idle or failed
	}
	return st
}

func socketLanguage(reason string) bool {
	r := strings.ToLower(reason)
	for _, w := range []string{"socket", "reset", "connection refused", "broken pipe", "network is unreachable"} {
		if strings.Contains(r, w) {
			return true
		}
	}
	return false
}
