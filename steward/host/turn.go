package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/watch"
)

// turnSpec is what varies between the kinds of turn the one runner runs:
// an interactive or quick-send turn (the user speaks; the chat's tools under
// the user's policy, approvals through the clients) and a watch turn (an
// automatic message; only the watch's tools, no approvals, and the turn
// enters the session only when it produced a notification).
type turnSpec struct {
	attribution llm.Attribution
	// text is what the user said, with files attached (interactive turns).
	text  string
	files []protocol.File
	// headless: no client is attached (quick send, a voice call).
	headless bool
	// control: text is the host's own instruction (a voice call's start),
	// recorded as a control entry, never as words the user said.
	control bool
	// watch is the event of a watch turn (nil for a user's turn).
	watch *watch.Turn
	// beforeDone, when set, runs after the turn is saved and before
	// turn.done is published.
	beforeDone func(turnOutcome)
}

// turnOutcome is a finished turn as its caller reports it.
type turnOutcome struct {
	result protocol.TurnResult
	err    error // the failure of a watch turn, for the watch engine
}

// runTurnLocked runs one turn in chatID, which the caller has locked: it
// registers the turn, runs its body, drains the journal and publishes
// turn.done.
func (m *ChatManager) runTurnLocked(ctx context.Context, chatID string, spec turnSpec) turnOutcome {
	turnCtx, cancel := context.WithCancel(llm.WithAttribution(withChatID(ctx, chatID), spec.attribution))
	defer cancel()
	t := m.newTurn(ctx, chatID, cancel)
	m.mu.Lock()
	m.turns[chatID] = t
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.turns, chatID)
		m.mu.Unlock()
	}()

	out := m.turnBody(turnCtx, chatID, t, spec)
	t.outputStarted()
	if err := t.journal.close(); err != nil && out.result.OK {
		what := "the answer"
		if spec.watch != nil {
			what = "the notification"
		}
		out.err = fmt.Errorf("%s could not be saved: %w", what, err)
		out.result = protocol.TurnResult{Error: out.err.Error(), Text: out.result.Text}
	}
	if !out.result.OK {
		m.cacheSession(chatID, nil) // reload from disk next time: the cache may be ahead of it
	}
	m.turnFailed(ctx, chatID, spec.watch, &out.result)
	if spec.beforeDone != nil {
		spec.beforeDone(out)
	}
	m.publish(chatID, protocol.TurnDone{Envelope: protocol.Env(protocol.TypeTurnDone, ""), ChatID: chatID, TurnID: t.id, TurnResult: out.result})
	if spec.watch == nil && !spec.headless { // a quick send reports its own result
		m.notifyTurn(ctx, chatID, out.result)
	}
	return out
}

func (m *ChatManager) turnBody(ctx context.Context, chatID string, t *turn, spec turnSpec) turnOutcome {
	history := m.cachedSession(chatID)
	if history == nil {
		var err error
		if history, err = m.opts.Store.Session(context.WithoutCancel(ctx), chatID); err != nil {
			return failed(err)
		}
	}
	j := t.journal
	if spec.watch != nil && spec.watch.Fallback != "" {
		return m.postFallback(ctx, chatID, t, history, spec.watch.Fallback)
	}

	var input llm.Message
	var tools []agent.Tool
	if spec.watch == nil {
		input = m.userInput(ctx, chatID, j, spec)
		// The user's message goes into the session at once (the journal
		// writes it after the first output), so a host that dies mid-turn —
		// during an approval wait, say — resumes with the question asked.
		j.session(input)
		tools = policy.Wrap(append(m.opts.Tools(), m.askUser(chatID)), policy.WrapOptions{
			Policy: m.opts.Policy, Timeout: m.opts.ApprovalTimeout, NewID: func() string { return chats.NewID("appr") },
			Approver: &chatApprover{m: m, chatID: chatID, headless: spec.headless},
			Observer: &policyObserver{m: m, chatID: chatID},
		})
	} else {
		// The event is data in an automatic message, not the user speaking:
		// it enters the model session but never the transcript.
		input = llm.Message{Role: "user", Content: spec.watch.Prompt}
		pol, err := m.backgroundPolicy(spec.watch.Tools)
		if err != nil {
			return failed(err)
		}
		tools = policy.Wrap(spec.watch.Tools, policy.WrapOptions{Policy: pol, Approver: noApprover{},
			NewID: func() string { return chats.NewID("appr") }, Observer: &policyObserver{m: m, chatID: chatID}})
	}
	msgs := make([]llm.Message, 0, len(history)+2)
	if m.opts.SystemPrompt != "" {
		msgs = append(msgs, llm.Message{Role: "system", Content: m.opts.SystemPrompt})
	}
	msgs = append(append(msgs, history...), input)
	rec := &turnRecorder{m: m, ctx: context.WithoutCancel(ctx), t: t, j: j, chatID: chatID, turnID: t.id, cards: map[string]*cardState{}}
	// The turn's wrapped tools travel with its context, so a host tool that
	// dispatches another (execute_action_step) calls it through the same
	// policy and approval card.
	res, runErr := agent.Run(policy.WithWrapped(ctx, tools), agent.RunOptions{
		Model: m.opts.Model, ModelName: m.opts.ModelName, Messages: msgs, Tools: tools,
		MaxSteps: m.opts.MaxSteps, OnEvent: rec.on, Compactor: &agent.SummaryCompactor{Budget: m.Budget()}, Retry: m.opts.Retry,
	})

	if spec.watch != nil {
		var err error
		switch {
		case runErr != nil:
			err = fmt.Errorf("watch turn: %w", runErr)
		case res.Reason == agent.StopStepLimit:
			err = fmt.Errorf("watch turn stopped after %d model steps without a notification", res.Steps)
		case strings.TrimSpace(res.Text) == "":
			err = errors.New("watch turn ended without a notification text")
		}
		if err != nil {
			// The chat shows the failure as a chat turn's, with the
			// watch's cause and fix; the session stays as it was.
			out := protocol.TurnResult{Error: err.Error(), Aborted: errors.Is(runErr, context.Canceled)}
			if !out.Aborted {
				out.Cause, out.Fix = explainWatchTurnError(out.Error)
			}
			journalError(j, t.id, out)
			return turnOutcome{err: err, result: out}
		}
		// Only a completed turn enters the session, so a failed attempt
		// leaves no dangling automatic prompt behind for the retry.
		m.saveSession(chatID, j, history, input, false, res)
		text := strings.TrimSpace(res.Text)
		return turnOutcome{result: protocol.TurnResult{OK: true, Text: text, MessageID: rec.lastMessageID}}
	}
	m.saveSession(chatID, j, history, input, true, res)
	out := protocol.TurnResult{OK: runErr == nil, Text: res.Text, MessageID: rec.lastMessageID}
	switch {
	case errors.Is(runErr, context.Canceled):
		out.Error, out.Aborted = "aborted by the user", true
	case runErr != nil:
		out.Error = runErr.Error()
	case res.Reason == agent.StopStepLimit:
		out.OK, out.Error = false, fmt.Sprintf("stopped after %d model steps without a final answer", res.Steps)
	}
	if !out.OK {
		if !out.Aborted {
			out.Cause, out.Fix = explainTurnError(out.Error)
		}
		journalError(j, t.id, out)
	}
	return turnOutcome{result: out}
}

// journalError keeps a failed turn's error card in the transcript.
func journalError(j *journal, turnID string, r protocol.TurnResult) {
	data, _ := json.Marshal(protocol.TurnError{TurnID: turnID, Error: r.Error, Aborted: r.Aborted, Cause: r.Cause, Fix: r.Fix})
	j.append(&chats.Entry{Kind: protocol.EntryError, Data: data})
}

func failed(err error) turnOutcome {
	return turnOutcome{err: err, result: protocol.TurnResult{Error: err.Error()}}
}

// userInput records the user's message (transcript, clients, audit) and
// returns it as the model sees it, with the attached files named.
func (m *ChatManager) userInput(ctx context.Context, chatID string, j *journal, spec turnSpec) llm.Message {
	userMsg := protocol.UserMessageSaved{Envelope: protocol.Env(protocol.TypeUserMessageSaved, ""), ChatID: chatID,
		MessageID: chats.NewID("user"), Text: spec.text, Files: spec.files}
	data, _ := json.Marshal(userMsg)
	if spec.control {
		j.append(&chats.Entry{ID: userMsg.MessageID, Kind: protocol.EntryControl, Data: data})
		m.audit(ctx, AuditEvent{Actor: "host", Type: "chat.control", Risk: "low", ChatID: chatID, Summary: "host control turn", Payload: map[string]any{"content": spec.text}})
	} else {
		j.append(&chats.Entry{ID: userMsg.MessageID, Kind: protocol.EntryUser, Data: data})
		m.publish(chatID, userMsg)
		m.audit(ctx, AuditEvent{Actor: "user", Type: "chat.message", Risk: "low", ChatID: chatID, Summary: "user message", Payload: map[string]any{"content": spec.text}})
	}
	modelText := spec.text
	for _, f := range spec.files {
		modelText += fmt.Sprintf("\n[Attached file %q (%s, %d bytes), upload token %s]", f.Name, f.Type, f.Size, f.Token)
	}
	return llm.Message{Role: "user", Content: modelText}
}

// saveSession journals what a run added to the chat's session (with its
// input unless that is already journaled) and caches the result. When the
// run compacted the conversation, the stored session is replaced by the
// compacted one, summary first.
func (m *ChatManager) saveSession(chatID string, j *journal, history []llm.Message, input llm.Message, inputJournaled bool, res *agent.RunResult) {
	if res.History != nil {
		session := res.History
		if m.opts.SystemPrompt != "" && len(session) > 0 && session[0].Role == "system" {
			session = session[1:]
		}
		session = session[:len(session):len(session)]
		j.replaceSession(session...)
		m.cacheSession(chatID, session)
		return
	}
	add := res.Messages
	if !inputJournaled {
		add = append([]llm.Message{input}, add...)
	}
	if len(add) > 0 {
		j.session(add...)
	}
	// The cache owns history and only turns of this chat (holding its lock)
	// read it, so it grows in place rather than being copied every turn.
	m.cacheSession(chatID, append(append(history, input), res.Messages...))
}

// postFallback posts a watch's fallback text without a model.
func (m *ChatManager) postFallback(ctx context.Context, chatID string, t *turn, history []llm.Message, text string) turnOutcome {
	j := t.journal
	msg := protocol.AssistantMessage{Envelope: protocol.Env(protocol.TypeAssistantMessage, ""), ChatID: chatID, TurnID: t.id,
		MessageID: chats.NewID("asst"), Text: text}
	data, _ := json.Marshal(msg)
	j.append(&chats.Entry{ID: msg.MessageID, Kind: protocol.EntryAssistant, Data: data})
	asst := llm.Message{Role: "assistant", Content: text}
	j.session(asst)
	m.cacheSession(chatID, append(history[:len(history):len(history)], asst))
	m.publish(chatID, msg)
	m.audit(ctx, AuditEvent{Actor: "host", Type: "chat.message", Risk: "low", ChatID: chatID, Summary: "watch fallback notification",
		Payload: map[string]any{"content": text}})
	return turnOutcome{result: protocol.TurnResult{OK: true, Text: text, MessageID: msg.MessageID}}
}
