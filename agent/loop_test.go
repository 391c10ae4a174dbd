package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) on(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	last := ""
	for _, e := range r.events {
		k := strings.TrimPrefix(fmt.Sprintf("%T", e), "agent.")
		if k == "AssistantDelta" && last == k {
			continue // collapse runs of deltas
		}
		out = append(out, k)
		last = k
	}
	return strings.Join(out, " ")
}

func echoTool(calls *[]string) agent.Tool {
	return agent.ToolFunc{
		ToolSpec: agent.ToolSpec{Name: "lookup", Description: "looks things up", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
			var a struct{ Q string }
			json.Unmarshal(args, &a)
			*calls = append(*calls, a.Q)
			return agent.ToolResult{Content: "found " + a.Q}, nil
		},
	}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func setup(t *testing.T) (*llmtest.Server, *llm.Client) {
	srv := llmtest.NewServer(t)
	return srv, llm.NewClient(llm.ClientOptions{BaseURL: srv.URL})
}

func TestRunToolLoop(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("tier-5",
		llmtest.Reply{Content: "Let me look.", ToolCalls: []llm.ToolCall{call("c1", "lookup", `{"q":"trains"}`), call("c2", "lookup", `{"q":"mail"}`)}},
		llmtest.Reply{Content: "Here is what I found."},
	)
	var calls []string
	rec := &recorder{}
	res, err := agent.Run(context.Background(), agent.RunOptions{
		Model: client, ModelName: "tier-5", Tools: []agent.Tool{echoTool(&calls)}, OnEvent: rec.on,
		Messages: []llm.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what's new?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != agent.StopAnswered || res.Text != "Here is what I found." || res.Steps != 2 {
		t.Errorf("result = %+v", res)
	}
	if fmt.Sprint(calls) != "[trains mail]" {
		t.Errorf("tool calls = %v", calls)
	}
	// assistant(tool calls), tool, tool, assistant
	if len(res.Messages) != 4 || res.Messages[1].ToolCallID != "c1" || res.Messages[2].Content != "found mail" {
		t.Fatalf("messages = %+v", res.Messages)
	}
	// The second model call saw the whole conversation including tool results.
	second := srv.Requests()[1].Body["messages"].([]any)
	if len(second) != 5 || second[4].(map[string]any)["tool_call_id"] != "c2" {
		t.Errorf("second request messages = %v", second)
	}
	tools := srv.Requests()[0].Body["tools"].([]any)
	if tools[0].(map[string]any)["function"].(map[string]any)["name"] != "lookup" {
		t.Errorf("tools sent = %v", tools)
	}
	want := "AssistantDelta AssistantMessage ToolStart ToolResultEvent ToolStart ToolResultEvent AssistantDelta AssistantMessage Done"
	if got := rec.kinds(); got != want {
		t.Errorf("events = %s\nwant     %s", got, want)
	}
}

func TestRunToolFailuresBecomeResults(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("m",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("a", "nope", `{}`), call("b", "boom", `{}`), call("c", "panics", `{}`), call("d", "boom", `{not json`)}},
		llmtest.Reply{Content: "sorry"},
	)
	boom := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "boom"}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
		return agent.ToolResult{}, errors.New("disk on fire")
	}}
	panics := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "panics"}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
		panic("bad")
	}}
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "m", Tools: []agent.Tool{boom, panics},
		Messages: []llm.Message{{Role: "user", Content: "go"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range res.Messages {
		if m.Role == "tool" {
			got[m.ToolCallID] = m.Content
		}
	}
	for id, want := range map[string]string{"a": `unknown tool "nope"`, "b": "disk on fire", "c": "the tool crashed", "d": "not valid JSON"} {
		if !strings.Contains(got[id], want) {
			t.Errorf("result of %s = %q, want it to mention %q", id, got[id], want)
		}
	}
}

func TestRunStepLimit(t *testing.T) {
	srv, client := setup(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{call("x", "lookup", `{"q":"again"}`)}}
	})
	var calls []string
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "m", Tools: []agent.Tool{echoTool(&calls)}, MaxSteps: 3,
		Messages: []llm.Message{{Role: "user", Content: "loop"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != agent.StopStepLimit || res.Steps != 3 || len(srv.Requests()) != 3 || len(calls) != 3 {
		t.Errorf("reason %s steps %d requests %d calls %d", res.Reason, res.Steps, len(srv.Requests()), len(calls))
	}
	assertPaired(t, res.Messages)
}

// assertPaired checks that every tool call has exactly one result.
func assertPaired(t *testing.T, msgs []llm.Message) {
	t.Helper()
	open := map[string]int{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			open[c.ID]++
		}
		if m.Role == "tool" {
			open[m.ToolCallID]--
		}
	}
	for id, n := range open {
		if n != 0 {
			t.Errorf("tool call %s is unpaired (%d)", id, n)
		}
	}
}

func TestRunCancelledDuringToolPairsEveryCall(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("m", llmtest.Reply{ToolCalls: []llm.ToolCall{call("1", "block", `{}`), call("2", "block", `{}`)}})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	block := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "block"}, Fn: func(ctx context.Context, _ json.RawMessage) (agent.ToolResult, error) {
		close(started)
		<-ctx.Done()
		return agent.ToolResult{}, ctx.Err()
	}}
	go func() { <-started; cancel() }()
	rec := &recorder{}
	res, err := agent.Run(ctx, agent.RunOptions{Model: client, ModelName: "m", Tools: []agent.Tool{block}, OnEvent: rec.on,
		Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if !errors.Is(err, context.Canceled) || res.Reason != agent.StopAborted {
		t.Fatalf("err %v reason %s", err, res.Reason)
	}
	assertPaired(t, res.Messages)
	for _, m := range res.Messages {
		if m.Role == "tool" && m.Content != agent.CancelledResult {
			t.Errorf("result %s = %q, want the explicit cancelled result", m.ToolCallID, m.Content)
		}
	}
	if !strings.HasSuffix(rec.kinds(), "ErrorEvent Done") {
		t.Errorf("events = %s", rec.kinds())
	}
}

func TestRunCancelledMidStreamKeepsPartialText(t *testing.T) {
	srv, client := setup(t)
	hold := make(chan struct{})
	defer close(hold)
	srv.Enqueue("m", llmtest.Reply{Content: "partial answer that never ends", Chunks: 4, Hold: hold})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := agent.Run(ctx, agent.RunOptions{Model: client, ModelName: "m",
		Messages: []llm.Message{{Role: "user", Content: "x"}},
		OnEvent: func(e agent.Event) {
			if _, ok := e.(agent.AssistantDelta); ok {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) || res.Reason != agent.StopAborted {
		t.Fatalf("err %v reason %s", err, res.Reason)
	}
	if len(res.Messages) != 1 || res.Messages[0].Content == "" || len(res.Messages[0].ToolCalls) != 0 {
		t.Errorf("messages = %+v, want the partial text alone", res.Messages)
	}
}

func TestRunModelError(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("m", llmtest.Reply{Status: 400, ErrorMessage: "context too long"})
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "m", Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "context too long") || res.Reason != agent.StopError {
		t.Fatalf("err %v reason %s", err, res.Reason)
	}
}

func TestToolsCanEmitEvents(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("m", llmtest.Reply{ToolCalls: []llm.ToolCall{call("q1", "ask", `{}`)}}, llmtest.Reply{Content: "ok"})
	type question struct{ agent.AssistantDelta }
	ask := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "ask"}, Fn: func(ctx context.Context, _ json.RawMessage) (agent.ToolResult, error) {
		ci, _ := agent.CallFrom(ctx)
		agent.Emit(ctx, question{agent.AssistantDelta{Text: "which one? (" + ci.CallID + ")"}})
		return agent.ToolResult{Content: "the first"}, nil
	}}
	var got string
	agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "m", Tools: []agent.Tool{ask},
		Messages: []llm.Message{{Role: "user", Content: "x"}},
		OnEvent: func(e agent.Event) {
			if q, ok := e.(question); ok {
				got = q.Text
			}
		}})
	if got != "which one? (q1)" {
		t.Errorf("custom event = %q", got)
	}
}
