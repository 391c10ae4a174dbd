package host

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/watch"
)

// auditTurnFailed is the audit event of a turn that ended in an error
// (a stop by the user is not one).
const auditTurnFailed = "chat.turn_failed"

var missingKey = regexp.MustCompile(`\b([A-Z][A-Z0-9_]*) is not set`)

// turnErrorRules map what a failed turn's error chain says to a plain cause
// and the fix, first match wins. The chain itself stays in the details.
// watchFix replaces fix for a watch turn when fix asks the user to send a
// message again: nobody sent one, the watch retries on its own.
var turnErrorRules = []struct {
	match                []string // any of these, lower-cased
	cause, fix, watchFix string
}{
	{[]string{" is not set"}, "No chat model can be used: the model provider's API key is not set.",
		"Open the set-up screen (#/setup) to choose a provider and enter its key, or run 'steward setup', or put the key in STEWARD_HOME/config.env and restart.", ""},
	{[]string{"error 401", "error 403", "unauthorized", "invalid api key", "incorrect api key", "authentication"},
		"The model provider refused the API key.",
		"Check the key: open the set-up screen (#/setup) or run 'steward setup'; both test it before saving.", ""},
	{[]string{"error 404", "model not found", "does not exist", "unknown model"},
		"The model provider does not know the model name.",
		"Check the model names in STEWARD_HOME/gateway.yaml; the set-up screen (#/setup) tests a name before saving it.", ""},
	{[]string{"error 429", "rate limit", "quota", "insufficient balance", "insufficient_quota"},
		"The model provider is rate-limiting this account or it is out of credit.",
		"Wait a minute and send the message again, or check the account's plan and balance with the provider.",
		"Check the account's plan and balance with the provider."},
	{[]string{"no answer within", "deadline exceeded", "timeout", "error 504"},
		"The model took too long to answer.",
		"Send the message again; if it keeps happening, choose a faster model or raise GATEWAY_REQUEST_TIMEOUT_MS.",
		"If it keeps happening, choose a faster model or raise GATEWAY_REQUEST_TIMEOUT_MS."},
	{[]string{"connection refused", "no such host", "network is unreachable", "connection reset", "dial tcp", "unexpected eof"},
		"The model could not be reached.",
		"Check that the provider (or the local Ollama) is running and that its base URL in gateway.yaml is right; the System page shows the gateway's state.", ""},
	{[]string{"model steps without a final answer"},
		"The assistant stopped after too many steps without an answer.",
		"Ask again with a narrower request, or split it into smaller questions.",
		"If it keeps happening, stop the watch and create it again with a narrower instruction."},
	{[]string{"without a notification"},
		"The assistant ended the watch's turn without writing a notification.",
		"", "Nothing to do unless it keeps happening; then stop the watch and create it again with a clearer instruction."},
	{[]string{"could not be saved"},
		"The answer could not be saved.",
		"Check the free disk space and the permissions of the data directory (STEWARD_HOME); the System page shows the stores.", ""},
}

// explainTurnError gives a failed turn's plain-language cause and fix.
func explainTurnError(raw string) (cause, fix string) {
	cause, fix, _ = explainError(raw)
	return cause, fix
}

// explainWatchTurnError gives a failed watch turn's cause and fix; the fix
// also says what the watch does next.
func explainWatchTurnError(raw string) (cause, fix string) {
	cause, fix, watchFix := explainError(raw)
	if watchFix != "" {
		fix = watchFix
	}
	if fix != "" {
		fix += " "
	}
	return "A watch could not write its notification. " + cause, fix + fmt.Sprintf(
		"The watch tries again at its next check; after %d failed attempts it posts the event's plain notification instead.", watch.MaxGenerationFailures)
}

func explainError(raw string) (cause, fix, watchFix string) {
	low := strings.ToLower(raw)
	for _, r := range turnErrorRules {
		for _, m := range r.match {
			if strings.Contains(low, m) {
				if m == " is not set" {
					if k := missingKey.FindStringSubmatch(raw); k != nil {
						return strings.TrimSuffix(r.cause, ".") + " (" + k[1] + ").", r.fix, r.watchFix
					}
				}
				return r.cause, r.fix, r.watchFix
			}
		}
	}
	return "The turn failed unexpectedly.", "Send the message again; if it fails again, the details below say what went wrong.",
		"If it keeps failing, the details below say what went wrong."
}

// turnFailed completes a failed turn's result with its cause and fix and
// records it in the audit trail. A turn the user stopped is neither. A
// watch turn's row names its watch and event.
func (m *ChatManager) turnFailed(ctx context.Context, chatID string, w *watch.Turn, r *protocol.TurnResult) {
	if r.OK || r.Aborted {
		return
	}
	if r.Cause == "" {
		r.Cause, r.Fix = explain(w, r.Error)
	}
	payload := map[string]any{"error": r.Error, "fix": r.Fix}
	if w != nil {
		payload["watchId"], payload["eventId"] = w.WatchID, w.EventID
	}
	m.audit(ctx, AuditEvent{Actor: "host", Type: auditTurnFailed, Risk: "low", ChatID: chatID, Summary: r.Cause, Payload: payload})
}

// explain gives the cause and fix of a failed turn, a watch's when w is set.
func explain(w *watch.Turn, raw string) (cause, fix string) {
	if w != nil {
		return explainWatchTurnError(raw)
	}
	return explainTurnError(raw)
}
