package llm

import "strings"

// Accumulator rebuilds a complete assistant message from stream chunks.
// It tolerates servers that repeat a tool call's id and name in every chunk,
// omit the index, or send usage in a trailing chunk without choices.
type Accumulator struct {
	resp    ChatResponse
	content strings.Builder
	reason  strings.Builder
	calls   []ToolCall
	args    []strings.Builder
	finish  string
	items   []ReasoningItem
}

// Add merges one chunk.
func (a *Accumulator) Add(c StreamChunk) {
	if a.resp.ID == "" {
		a.resp.ID, a.resp.Created, a.resp.Model = c.ID, c.Created, c.Model
	}
	if c.Usage != nil {
		a.resp.Usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // we only ever ask for one choice
		}
		a.content.WriteString(ch.Delta.Content)
		a.reason.WriteString(ch.Delta.ReasoningContent)
		a.items = append(a.items, ch.Delta.ReasoningItems...)
		for _, tc := range ch.Delta.ToolCalls {
			a.addToolCall(tc)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
	}
}

func (a *Accumulator) addToolCall(tc ToolCall) {
	i := -1
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID != "":
		for j, c := range a.calls {
			if c.ID == tc.ID {
				i = j
			}
		}
		if i < 0 {
			i = len(a.calls)
		}
	default: // a fragment without index or id continues the last call
		i = max(len(a.calls)-1, 0)
	}
	for len(a.calls) <= i {
		a.calls = append(a.calls, ToolCall{Type: "function"})
		a.args = append(a.args, strings.Builder{})
	}
	c := &a.calls[i]
	if c.ID == "" {
		c.ID = tc.ID
	}
	// Some servers repeat the full name in every chunk; others (rarely) split
	// it. Only a fragment that is not a repeat extends the name.
	if n := tc.Function.Name; n != "" && n != c.Function.Name {
		c.Function.Name += n
	}
	a.args[i].WriteString(tc.Function.Arguments)
}

// Response returns the accumulated completion as a non-streamed response.
func (a *Accumulator) Response() *ChatResponse {
	r := a.resp
	r.Object = "chat.completion"
	msg := Message{Role: "assistant", Content: a.content.String(), ReasoningContent: a.reason.String(), ReasoningItems: a.items}
	for i, c := range a.calls {
		c.Index = nil
		c.Function.Arguments = a.args[i].String()
		if c.Function.Name == "" && c.Function.Arguments == "" {
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	finish := a.finish
	if finish == "" && len(msg.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	r.Choices = []Choice{{Message: msg, FinishReason: finish}}
	return &r
}
