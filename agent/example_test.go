package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
)

// scripted is a Model that first asks for the clock tool, then answers.
type scripted struct{ calls int }

func (s *scripted) ChatStream(_ context.Context, req *llm.ChatRequest, _ func(llm.StreamChunk) error) (*llm.ChatResponse, error) {
	s.calls++
	msg := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "clock", Arguments: `{}`}}}}
	if s.calls > 1 {
		msg = llm.Message{Role: "assistant", Content: "It is " + req.Messages[len(req.Messages)-1].Content + "."}
	}
	return &llm.ChatResponse{Choices: []llm.Choice{{Message: msg}}}, nil
}

func ExampleRun() {
	clock := agent.ToolFunc{
		ToolSpec: agent.ToolSpec{Name: "clock", Description: "the current time"},
		Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
			return agent.ToolResult{Content: "17:05"}, nil
		},
	}
	res, err := agent.Run(context.Background(), agent.RunOptions{
		Model: &scripted{}, ModelName: "tier-5", Tools: []agent.Tool{clock},
		Messages: []llm.Message{{Role: "user", Content: "What time is it?"}},
		OnEvent: func(e agent.Event) {
			if s, ok := e.(agent.ToolStart); ok {
				fmt.Println("calling", s.Name)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text, res.Reason, res.Steps)
	// Output:
	// calling clock
	// It is 17:05. answered 2
}
