package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/policy"
)

// TestExecuteStepThroughPolicy runs execute_action_step over a real policy
// wrapper: a gated step whose approval is refused does not run, is recorded
// as not done and leaves the item open; manual steps, missing steps and
// recursion are refused before anything runs.
func TestExecuteStepThroughPolicy(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	it := testMailItem(1, c.t)
	it.Proposal = append(it.Proposal, Alternative{Summary: "by hand", Steps: []Step{{Label: "Call Anna", Type: "manual", Notes: "phone her"},
		{Label: "loop", Type: "tool", Tool: ExecuteToolName, Args: json.RawMessage(`{"id":1}`)}}})
	id, _, _ := s.Upsert(ctx, it, false)
	var ran []string
	reply := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "mcp__mail__reply_email", Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
			ran = append(ran, string(args))
			return agent.ToolResult{Content: "sent"}, nil
		}}
	pol, err := policy.New(policy.Options{Connectors: []string{"mail"}})
	if err != nil {
		t.Fatal(err)
	}
	tool := ExecuteTool(ExecuteOptions{Open: func(context.Context) (*Store, error) { return s, nil }, Dispatch: policy.CallWrapped})
	wrapped := policy.Wrap([]agent.Tool{reply, tool}, policy.WrapOptions{Policy: pol, Approver: denyAll{}})
	tctx := policy.WithWrapped(ctx, wrapped)
	run := func(args string) agent.ToolResult {
		t.Helper()
		var exec agent.Tool
		for _, w := range wrapped {
			if w.Spec().Name == ExecuteToolName {
				exec = w
			}
		}
		res, err := exec.Call(tctx, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(`{"id":1}`)
	if !res.IsError || !strings.Contains(res.Content, "NOT DONE: denied") || len(ran) != 0 {
		t.Fatalf("denied step: %+v, ran %v", res, ran)
	}
	got, _ := s.Get(ctx, id)
	if got.Status != StatusNew || len(got.Diagnostics) != 1 || !strings.Contains(got.Diagnostics[0], "(not done)") {
		t.Fatalf("after a denied step %+v", got)
	}
	for args, want := range map[string]string{
		`{"id":1,"alternative":1,"step":0}`: "manual step",
		`{"id":1,"alternative":1,"step":1}`: "refused",
		`{"id":1,"alternative":5}`:          "does not exist",
		`{"id":99}`:                         "list_actions",
	} {
		if res := run(args); !res.IsError || !strings.Contains(res.Content, want) {
			t.Errorf("%s: %+v, want %q", args, res, want)
		}
	}
	// Outside a turn (no wrapped tools) nothing runs.
	if res, _ := tool.Call(ctx, json.RawMessage(`{"id":1}`)); !strings.Contains(res.Content, "not available") || len(ran) != 0 {
		t.Fatalf("without a turn: %+v", res)
	}
}

type denyAll struct{}

func (denyAll) Approve(context.Context, policy.ApprovalRequest) (policy.ApprovalResponse, error) {
	return policy.ApprovalResponse{Verdict: policy.VerdictDenied}, nil
}
