package host

import (
	"strings"
	"testing"
)

func TestExplainTurnError(t *testing.T) {
	for _, tc := range []struct{ raw, cause string }{
		{"model API error 502: every provider for tier-5 failed: deepseek/deepseek-v4-flash: DEEPSEEK_API_KEY is not set",
			"No chat model can be used: the model provider's API key is not set (DEEPSEEK_API_KEY)."},
		{"model API error 502: every provider for tier-5 failed: up/m: HTTP 401: Incorrect API key provided", "The model provider refused the API key."},
		{"model API error 404: The model `gpt-9` does not exist", "The model provider does not know the model name."},
		{"model API error 429: Rate limit reached", "The model provider is rate-limiting this account or it is out of credit."},
		{"model API error 504: every provider for tier-5 failed: no answer within the request deadline of 2m0s", "The model took too long to answer."},
		{`Post "http://127.0.0.1:4000/v1/chat/completions": dial tcp 127.0.0.1:4000: connect: connection refused`, "The model could not be reached."},
		{"stopped after 12 model steps without a final answer", "The assistant stopped after too many steps without an answer."},
		{"the answer could not be saved: disk I/O error", "The answer could not be saved."},
		{"something odd", "The turn failed unexpectedly."},
	} {
		cause, fix := explainTurnError(tc.raw)
		if cause != tc.cause || fix == "" {
			t.Errorf("explainTurnError(%q) = %q, %q; want cause %q and a fix", tc.raw, cause, fix, tc.cause)
		}
	}
}

// TestExplainWatchTurnError: nobody sent a message in a watch turn, so no
// fix asks to send one again; each says the watch retries on its own.
func TestExplainWatchTurnError(t *testing.T) {
	raws := []string{"something odd", "watch turn ended without a notification text", "watch turn stopped after 12 model steps without a notification"}
	for _, r := range turnErrorRules {
		raws = append(raws, "watch turn: "+r.match[0])
	}
	for _, raw := range raws {
		cause, fix := explainWatchTurnError(raw)
		if !strings.HasPrefix(cause, "A watch could not write its notification. ") || strings.Contains(cause, "failed unexpectedly") != (raw == "something odd") {
			t.Errorf("explainWatchTurnError(%q) cause = %q", raw, cause)
		}
		if strings.Contains(strings.ToLower(fix), "send the message") || strings.Contains(fix, "Ask again") || !strings.HasSuffix(fix, "posts the event's plain notification instead.") {
			t.Errorf("explainWatchTurnError(%q) fix = %q", raw, fix)
		}
	}
	if cause, _ := explainWatchTurnError("watch turn ended without a notification text"); !strings.HasSuffix(cause, "without writing a notification.") {
		t.Errorf("no-text cause = %q", cause)
	}
}
