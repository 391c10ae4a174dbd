package writeops

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

// TestReviewTools drives list_write_operations and read_write_operation
// over MCP: bounded summaries with counts and meanings, one operation with
// its stored input and evidence, and clear errors for unknown ids and states.
func TestReviewTools(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "ops.db"), Options{})
	long := strings.Repeat("x", 500)
	sent, _ := s.Execute(ctx, NewOperation{Kind: KindMailSend, Summary: "mail to a@example.com: " + long, Input: mailInput{Body: "the whole body"}},
		ExecutorFunc(func(context.Context, Operation) (any, error) { return nil, nil }))
	s.Confirm(ctx, sent.ID, map[string]string{"mirrorId": "42"})
	s.Execute(ctx, NewOperation{Kind: KindCalendarCreate, Summary: "event", Input: map[string]string{"title": "x"}},
		ExecutorFunc(func(context.Context, Operation) (any, error) { return nil, errors.New("timeout") }))

	cs := mcptooltest.Connect(t, NewServer(s, "test"))
	call := func(name string, args map[string]any, out any) string {
		t.Helper()
		return mcptooltest.CallStructured(t, cs, name, args, out)
	}
	var list ListResult
	call("list_write_operations", map[string]any{}, &list)
	if len(list.Operations) != 2 || list.Counts[StateConfirmed] != 1 || list.Counts[StateUnknown] != 1 || list.Meaning[StateNeedsReview] == "" {
		t.Fatalf("list %+v", list)
	}
	if n := len([]rune(list.Operations[1].Summary)); n > 161 {
		t.Fatalf("summary not bounded: %d characters", n)
	}
	call("list_write_operations", map[string]any{"state": "unknown"}, &list)
	if len(list.Operations) != 1 || list.Operations[0].Kind != KindCalendarCreate || list.Operations[0].Error != "timeout" {
		t.Fatalf("filtered list %+v", list.Operations)
	}
	var op Operation
	call("read_write_operation", map[string]any{"operationId": sent.ID}, &op)
	if op.State != StateConfirmed || !strings.Contains(string(op.Input), "the whole body") || string(op.Evidence) != `{"mirrorId":"42"}` {
		t.Fatalf("read %+v", op)
	}
	if msg := call("read_write_operation", map[string]any{"operationId": "wop_nope"}, &op); !strings.Contains(msg, "list_write_operations shows the ids") {
		t.Fatalf("unknown id: %q", msg)
	}
	if msg := call("list_write_operations", map[string]any{"state": "sent"}, &list); !strings.Contains(msg, `unknown state "sent"`) {
		t.Fatalf("unknown state: %q", msg)
	}
}
