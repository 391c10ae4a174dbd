package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/redact"
)

// BenchmarkString measures masking and bounding a long mail-like text with a
// few secrets in it (the window keeps this flat however long the text is).
func BenchmarkString(b *testing.B) {
	text := "password=hunter2 Authorization: Bearer abcdef sk-abcdefghijklmnopqrstu https://u:p@example.com " +
		strings.Repeat("Hello Anna, the meeting moved to 10:30; see https://example.com/doc?id=7. ", 2000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		redact.String(text)
	}
}

// BenchmarkValue measures a typical tool-call audit payload.
func BenchmarkValue(b *testing.B) {
	var payload any
	raw := `{"tool":"mcp__mail__send_mail","args":{"to":["anna@example.com"],"subject":"Dinner","body":"` +
		strings.Repeat("Dear Anna, ", 400) + `","headers":{"Authorization":"Bearer xyz"}},"result":{"content":[{"type":"text","text":"sent"}],"ids":[1,2,3,4,5,6,7,8,9,10]}}`
	if err := json.Unmarshal([]byte(raw), &payload); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		redact.Value(payload)
	}
}
