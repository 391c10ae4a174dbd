// Package runtimetest scripts a model provider for Saivage runtime tests:
// replies are queued per caller (agent@card, "analyst", "summary"), so
// concurrent callers such as the Analyst and a Run stay deterministic. It
// is a test double, never a production default.
package runtimetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// Script answers model calls per caller ("planner@project",
// "executor@project.a.a", "analyst", "summary") from ordered queues, so
// concurrent callers (the Analyst and the Run) stay deterministic.
type Script struct {
	t      testing.TB
	mu     sync.Mutex
	queues map[string][]llmtest.Reply
	calls  map[string]int
	seen   []string
	// Fallback answers a caller whose queue is empty (nil: test error).
	Fallback func(key string) (llmtest.Reply, bool)
}

func NewScript(t testing.TB, srv *llmtest.Server) *Script {
	s := &Script{t: t, queues: map[string][]llmtest.Reply{}, calls: map[string]int{}}
	srv.Handle(s.reply)
	return s
}

// Add queues replies for a caller.
func (s *Script) Add(key string, replies ...llmtest.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[key] = append(s.queues[key], replies...)
}

// Count returns how many calls a caller made.
func (s *Script) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

// Remaining returns the callers with unconsumed replies.
func (s *Script) Remaining() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, q := range s.queues {
		if len(q) > 0 {
			out[k] = len(q)
		}
	}
	return out
}

// CallerKey identifies the caller from the system prompt.
func CallerKey(req llmtest.Request) string {
	msgs, _ := req.Body["messages"].([]any)
	if len(msgs) == 0 {
		return "?"
	}
	sys, _ := msgs[0].(map[string]any)["content"].(string)
	if strings.HasPrefix(sys, "You compact the conversation") {
		return "summary"
	}
	if i := strings.LastIndex(sys, "You are the "); i >= 0 {
		rest := sys[i+len("You are the "):]
		var agent, card string
		if n, _ := fmt.Sscanf(rest, "%s agent working on card %s", &agent, &card); n == 2 {
			return agent + "@" + card
		}
		// A global agent ("You are the analyst of …", "the oversight of …").
		if agent, _, ok := strings.Cut(rest, " of "); ok && agent != "" && !strings.ContainsAny(agent, " \n") {
			return agent
		}
	}
	return "?"
}

func (s *Script) reply(req llmtest.Request) llmtest.Reply {
	key := CallerKey(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[key]++
	s.seen = append(s.seen, key)
	q := s.queues[key]
	if len(q) == 0 {
		if s.Fallback != nil {
			if r, ok := s.Fallback(key); ok {
				return r
			}
		}
		s.t.Errorf("unscripted model call from %s (call %d)", key, s.calls[key])
		return llmtest.Reply{Status: 400, ErrorMessage: "unscripted call from " + key}
	}
	s.queues[key] = q[1:]
	return q[0]
}

var callSeq struct {
	sync.Mutex
	n int
}

// Call builds a reply with one tool call (unique id).
func Call(name string, args any) llmtest.Reply {
	callSeq.Lock()
	callSeq.n++
	id := fmt.Sprintf("call_%d", callSeq.n)
	callSeq.Unlock()
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: string(b)}}}}
}

// Text builds a plain-text reply.
func Text(s string) llmtest.Reply { return llmtest.Reply{Content: s} }

// Emit builds an emit_result call.
func Emit(outcome, summary string, data map[string]any) llmtest.Reply {
	args := map[string]any{"outcome": outcome, "summary": summary}
	if data != nil {
		args["data"] = data
	}
	return Call("emit_result", args)
}
