package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/steward/audit"
)

func ExampleLedger() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "steward")
	defer os.RemoveAll(dir)
	l, err := audit.Open(ctx, filepath.Join(dir, "audit.db"), audit.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	l.Record(ctx, audit.Event{
		Actor: audit.ActorHost, Type: audit.TypeApprovalRequest, Risk: audit.RiskHigh,
		ChatID: "chat-1", Tool: "mcp__mail__send_mail",
		Summary: "send mail to anna@example.com",
		Payload: map[string]any{"to": "anna@example.com", "smtp_password": "hunter2"},
	})
	l.Flush(ctx) // Record never waits; Flush does

	page, _ := l.Query(ctx, audit.Filter{Risk: audit.RiskHigh, Text: "anna"})
	for _, e := range page.Events {
		fmt.Println(e.Type, e.Tool, string(e.Payload.(json.RawMessage)))
	}
	// Output:
	// approval.request mcp__mail__send_mail {"smtp_password":"[REDACTED]","to":"anna@example.com"}
}
