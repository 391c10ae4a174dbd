package watch_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
)

type chatKey struct{}

func chatOf(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(chatKey{}).(string)
	return id, ok
}

type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *settableClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func (c *settableClock) After(d time.Duration) <-chan time.Time {
	return make(chan time.Time)
}

// approver approves after the user "thinks" for a while, recording what the
// approval card showed.
type approver struct {
	clock *settableClock
	think time.Duration
	shown []policy.ApprovalRequest
}

func (a *approver) Approve(_ context.Context, req policy.ApprovalRequest) (policy.ApprovalResponse, error) {
	a.shown = append(a.shown, req)
	a.clock.Advance(a.think)
	return policy.ApprovalResponse{Verdict: policy.VerdictApproved}, nil
}

func call(t *testing.T, tools []agent.Tool, ctx context.Context, name, args string) agent.ToolResult {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			res, err := tl.Call(ctx, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
	}
	t.Fatalf("no tool %s", name)
	return agent.ToolResult{}
}

// TestHostToolsUnderPolicy runs the watch tools through Steward's real
// policy wrapper: create_watch and stop_watch run at once; create_agent_watch
// asks, and a relative time is frozen before the card is shown, so the time
// spent deciding does not move the deadline.
func TestHostToolsUnderPolicy(t *testing.T) {
	clock := &settableClock{now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	caps, _ := watch.NewRegistry(watch.Capability{Tool: "test__call", Mode: "voice"})
	e, err := watch.Open(context.Background(), watch.Options{Path: filepath.Join(t.TempDir(), "watches.db"), Capabilities: caps, Clock: clock,
		Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: clock.Now, Location: time.UTC})}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pol, _ := policy.New(policy.Options{})
	appr := &approver{clock: clock, think: 10 * time.Minute}
	tools := policy.Wrap(e.Tools(chatOf), policy.WrapOptions{Policy: pol, Approver: appr})
	ctx := context.WithValue(context.Background(), chatKey{}, "chat_7")

	res := call(t, tools, ctx, watch.ToolCreateWatch, `{"source":"time","afterMinutes":45,"instruction":"ricordami il treno","rules":[{"id":"at","event":"time.reached"}]}`)
	if res.IsError || len(appr.shown) != 0 || !strings.Contains(res.Content, "is active until") {
		t.Fatalf("create_watch: %+v (approvals %d)", res, len(appr.shown))
	}
	var card struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	json.Unmarshal(res.Data, &card)

	res = call(t, tools, ctx, watch.ToolCreateWatch, `{"source":"time","afterMinutes":5,"instruction":"x","rules":[{"id":"a","event":"time.reached","grants":[{"tool":"test__call"}]}]}`)
	if !res.IsError || !strings.Contains(res.Content, "create_agent_watch") {
		t.Errorf("grants through create_watch: %+v", res)
	}
	res = call(t, tools, ctx, watch.ToolCreateWatch, `{"source":"time","afterMinutes":5,"instruction":"x","rules":[{"id":"a","event":"time.reached"}],"sneaky":1}`)
	if !res.IsError || !strings.Contains(res.Content, "sneaky") {
		t.Errorf("unknown argument: %+v", res)
	}

	res = call(t, tools, ctx, watch.ToolCreateAgentWatch, `{"source":"time","afterMinutes":30,"instruction":"chiamami tra mezz'ora",
		"rules":[{"id":"call","event":"time.reached","once":true,"grants":[{"tool":"test__call"}]}]}`)
	if res.IsError || len(appr.shown) != 1 {
		t.Fatalf("create_agent_watch: %+v", res)
	}
	var shown struct {
		ResourceRef  string   `json:"resourceRef"`
		AfterMinutes *float64 `json:"afterMinutes"`
	}
	json.Unmarshal(appr.shown[0].Args, &shown)
	if shown.ResourceRef != "2026-11-30T08:30:00Z" || shown.AfterMinutes != nil {
		t.Errorf("the approval showed %s", appr.shown[0].Args)
	}
	ws, _ := e.List(context.Background(), "chat_7", false)
	if len(ws) != 2 || ws[1].ResourceRef != "2026-11-30T08:30:00Z" || !ws[1].Agent {
		t.Fatalf("stored %+v", ws)
	}

	// stop_watch is allowed and idempotent; list_watches reflects it.
	for range 2 {
		if res = call(t, tools, ctx, watch.ToolStopWatch, `{"watchId":"`+card.ID+`"}`); res.IsError || !strings.Contains(res.Content, "is stopped") {
			t.Errorf("stop: %+v", res)
		}
	}
	if res = call(t, tools, ctx, watch.ToolListWatches, `{}`); strings.Contains(res.Content, card.ID) || !strings.Contains(res.Content, ws[1].ID) {
		t.Errorf("list: %s", res.Content)
	}
	if res = call(t, tools, ctx, watch.ToolListWatches, `{"all":true}`); !strings.Contains(res.Content, card.ID) {
		t.Errorf("list all: %s", res.Content)
	}
	if res = call(t, tools, context.Background(), watch.ToolCreateWatch, `{"source":"time","afterMinutes":5,"instruction":"x","rules":[{"id":"a","event":"time.reached"}]}`); !res.IsError {
		t.Error("a watch was created outside any chat")
	}
}
