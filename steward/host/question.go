package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/protocol"
)

// AskUserTool is the host tool through which the agent asks the user a
// question and waits for the answer.
const AskUserTool = "ask_user"

type pendingQuestion struct {
	chatID string
	frame  protocol.Question
	answer chan string
}

// AskUserSpec is the ask_user tool as every chat offers it to the model.
func AskUserSpec() agent.ToolSpec {
	return agent.ToolSpec{Name: AskUserTool,
		Description: "Ask the user a short question and wait for the answer. Offer options when the choice is among a few.",
		Parameters: json.RawMessage(`{"type":"object","required":["question"],"properties":{` +
			`"question":{"type":"string"},"options":{"type":"array","items":{"type":"string"},"maxItems":8}}}`)}
}

// askUser returns the ask_user tool bound to a chat.
func (m *ChatManager) askUser(chatID string) agent.Tool {
	return agent.ToolFunc{
		ToolSpec: AskUserSpec(),
		Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
			var a struct {
				Question string   `json:"question"`
				Options  []string `json:"options"`
			}
			if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Question) == "" {
				return agent.ToolResult{Content: "ask_user needs a non-empty question", IsError: true}, nil
			}
			if m.opts.Clients == nil || m.opts.Clients.Clients() == 0 {
				return agent.ToolResult{Content: "No app is connected, so the user cannot answer now. Continue without the answer or say what you need.", IsError: true}, nil
			}
			q := &pendingQuestion{chatID: chatID, answer: make(chan string, 1), frame: protocol.Question{
				Envelope: protocol.Env(protocol.TypeQuestion, ""), ChatID: chatID, QuestionID: chats.NewID("q"),
				Text: a.Question, Options: a.Options}}
			m.mu.Lock()
			m.questions[q.frame.QuestionID] = q
			m.mu.Unlock()
			defer func() {
				m.mu.Lock()
				delete(m.questions, q.frame.QuestionID)
				m.mu.Unlock()
			}()
			m.publish(chatID, q.frame)
			wctx, cancel := context.WithTimeout(ctx, m.opts.ApprovalTimeout)
			defer cancel()
			select {
			case ans := <-q.answer:
				return agent.ToolResult{Content: "The user answered: " + ans}, nil
			case <-wctx.Done():
				if ctx.Err() != nil {
					return agent.ToolResult{}, ctx.Err()
				}
				return agent.ToolResult{Content: "The user did not answer in time.", IsError: true}, nil
			}
		},
	}
}

// ErrNoQuestion reports a question that is not pending.
var ErrNoQuestion = errors.New("no such pending question")

// Answer delivers the user's answer to a pending question.
func (m *ChatManager) Answer(a protocol.QuestionAnswer) error {
	if strings.TrimSpace(a.Answer) == "" {
		return fmt.Errorf("an empty answer")
	}
	m.mu.Lock()
	q := m.questions[a.QuestionID]
	delete(m.questions, a.QuestionID)
	m.mu.Unlock()
	if q == nil {
		return ErrNoQuestion
	}
	q.answer <- a.Answer
	return nil
}
