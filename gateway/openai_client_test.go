package gateway_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// TestOpenAIClientStreamsToolCall drives the gateway with the unmodified
// official OpenAI Go client: any OpenAI client must work against it.
func TestOpenAIClientStreamsToolCall(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{APIKey: "gw-key"})
	f.upstream.Enqueue("first", llmtest.Reply{Status: 503}) // falls back before output
	f.upstream.Enqueue("second", llmtest.Reply{
		Content:         "Let me check the trains.",
		ToolCalls:       []llm.ToolCall{{ID: "call_7", Function: llm.FunctionCall{Name: "find_next_train", Arguments: `{"from":"Milano Centrale","to":"Torino"}`}}},
		RepeatToolNames: true,
	})

	client := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gw-key"),
		option.WithHeader("X-Usage-Service", "test"), option.WithHeader("X-Usage-Action", "openai-client"))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "tier-5",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("next train to Torino?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "find_next_train",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"from": map[string]any{"type": "string"}, "to": map[string]any{"type": "string"}}},
		})},
	})
	acc := openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Let me check the trains." {
		t.Fatalf("content = %+v", acc.Choices)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].ID != "call_7" || calls[0].Function.Name != "find_next_train" ||
		calls[0].Function.Arguments != `{"from":"Milano Centrale","to":"Torino"}` {
		t.Fatalf("tool calls = %+v", calls)
	}
	if len(finished) != 1 || finished[0].Name != "find_next_train" {
		t.Errorf("JustFinishedToolCall = %+v", finished)
	}
	rec := f.ledger.waitRequests(t, 1)[0]
	if rec.Service != "test" || rec.Action != "openai-client" || rec.UpstreamModel != "second" {
		t.Errorf("record = %+v", rec)
	}
}
