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
			frame := protocol.Question{Envelope: protocol.Env(protocol.TypeQuestion, ""), ChatID: chatID, QuestionID: chats.NewID("q"),
				Text: a.Question, Options: a.Options}
			card := protocol.QuestionCard{QuestionID: frame.QuestionID, Text: frame.Text, Options: frame.Options, Status: protocol.StatusPending}
			m.journalCard(chatID, frame.QuestionID, protocol.EntryQuestion, card)
			p := &pendingRequest{id: frame.QuestionID, kind: protocol.EntryQuestion, chatID: chatID, frame: frame, answer: make(chan any, 1)}
			defer m.pending.add(p)()
			m.publish(chatID, frame)
			wctx, cancel := context.WithTimeout(ctx, m.opts.ApprovalTimeout)
			defer cancel()
			select {
			case ans := <-p.answer:
				card.Status, card.Answer = protocol.StatusAnswered, ans.(string)
				m.updateCard(chatID, frame.QuestionID, card)
				return agent.ToolResult{Content: "The user answered: " + card.Answer}, nil
			case <-wctx.Done():
				if ctx.Err() != nil {
					return agent.ToolResult{}, ctx.Err()
				}
				card.Status = protocol.StatusTimeout
				m.updateCard(chatID, frame.QuestionID, card)
				return agent.ToolResult{Content: "The user did not answer in time.", IsError: true}, nil
			}
		},
	}
}

// PendingQuestions returns the questions waiting in chatID.
func (m *ChatManager) PendingQuestions(chatID string) []protocol.Question {
	var out []protocol.Question
	for _, f := range m.pending.frames(chatID, protocol.EntryQuestion) {
		out = append(out, f.(protocol.Question))
	}
	return out
}

// ErrNoQuestion reports a question that is not pending.
var ErrNoQuestion = errors.New("no such pending question")

// Answer delivers the user's answer to a pending question.
func (m *ChatManager) Answer(a protocol.QuestionAnswer) error {
	if strings.TrimSpace(a.Answer) == "" {
		return fmt.Errorf("an empty answer")
	}
	if !m.pending.answer(a.QuestionID, protocol.EntryQuestion, a.Answer) {
		return ErrNoQuestion
	}
	return nil
}
