package runtime

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// Marker types written into sessions.
const (
	markerNode    = "node"    // a node turn began
	markerSettled = "settled" // a node turn ended with an accepted or terminal result
	markerNotice  = "notice"  // a runtime notice shown to the model
	markerTurn    = "turn"    // an Analyst turn began
	markerRefusal = "refusal" // a content-policy refusal
	// markerOversight: an Oversight check began.
	markerOversight = "oversight_check"
)

// UncertaintyResult is the failed result recovery gives a tool call whose
// outcome is unknown.
const UncertaintyResult = "Error: outcome unknown. The runtime stopped while this tool call was running and no result was recorded; " +
	"its effects may or may not have happened. Check the current state before repeating it."

// session is one persisted agent session.
type session struct {
	rt    *Runtime
	dir   string
	id    string
	agent string
	card  string // "" for global sessions
	mu    sync.Mutex
}

func (rt *Runtime) cardSession(card, agent string) *session {
	return &session{rt: rt, dir: rt.p.Cards.SessionDir(card, agent), id: conversations.SessionID(agent, card), agent: agent, card: card}
}

func (rt *Runtime) globalSession(agent string) *session {
	return &session{rt: rt, dir: filepath.Join(rt.p.StateDir, "agents", agent), id: conversations.SessionID(agent, ""), agent: agent}
}

// append publishes rows as one envelope and hints the conversation.
func (s *session) append(rows ...conversations.Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.rt.p.Sessions.Append(s.dir, s.id, rows); err != nil {
		return fmt.Errorf("append to session %s: %w", s.id, err)
	}
	s.rt.hint("conversation", s.id)
	return nil
}

// current returns the rows of the current segment.
func (s *session) current() (conversations.Current, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rt.p.Sessions.LoadCurrent(s.dir, s.id, state.TailTruncate)
}

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain maps and strings
	}
	return b
}

// Row constructors. Row IDs derive from the source input UUID S of the
// logical call: S:user, S:assistant:N, S:tool-call:T, S:tool-result:T.
func userRow(src, suffix, text string) conversations.Row {
	return conversations.Row{ID: src + ":user" + suffix, Kind: "user", Content: rawJSON(map[string]string{"text": text})}
}

func markerRow(src, typ string, data map[string]any) conversations.Row {
	m := map[string]any{"type": typ}
	for k, v := range data {
		m[k] = v
	}
	return conversations.Row{ID: src + ":marker:" + typ, Kind: "marker", Content: rawJSON(m)}
}

func noticeRow(src, text string) conversations.Row {
	return conversations.Row{ID: src + ":notice", Kind: "marker", Content: rawJSON(map[string]string{"type": markerNotice, "text": text})}
}

// rowContent is the union of row content shapes.
type rowContent struct {
	Type      string `json:"type,omitempty"`
	Text      string `json:"text,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningItems are a Responses-protocol model's encrypted reasoning,
	// replayed only to the account that produced it.
	ReasoningItems []llm.ReasoningItem `json:"reasoning_items,omitempty"`
	Arguments      string              `json:"arguments,omitempty"`
	Content        string              `json:"content,omitempty"`
	IsError        bool                `json:"is_error,omitempty"`
	// Images are the published images of a tool result.
	Images []imageDescriptor `json:"images,omitempty"`
	// Observations are a compacted genesis's latest record descriptors.
	Observations []recordObservation `json:"latest_record_observations,omitempty"`
	// Record describes the record a successful read result showed.
	Record *recordObservation `json:"record_observation,omitempty"`
}

// assistantContent is an assistant row's content.
type assistantContent struct {
	Text           string              `json:"text"`
	Reasoning      string              `json:"reasoning"`
	ReasoningItems []llm.ReasoningItem `json:"reasoning_items,omitempty"`
}

func decodeContent(r conversations.Row) rowContent {
	var c rowContent
	_ = json.Unmarshal(r.Content, &c)
	return c
}

// rowsToMessages projects persisted rows into provider messages. An
// assistant row collects the tool_call rows that follow it; results become
// tool messages; notices and summaries become user text; other markers are
// bookkeeping and are not sent.
func rowsToMessages(rows []conversations.Row) []llm.Message {
	var out []llm.Message
	lastAssistant := -1
	for _, r := range rows {
		c := decodeContent(r)
		switch r.Kind {
		case "user":
			out = append(out, llm.Message{Role: "user", Content: c.Text})
			lastAssistant = -1
		case "assistant":
			out = append(out, llm.Message{Role: "assistant", Content: c.Text, ReasoningContent: c.Reasoning, ReasoningItems: c.ReasoningItems})
			lastAssistant = len(out) - 1
		case "tool_call":
			if lastAssistant < 0 {
				out = append(out, llm.Message{Role: "assistant"})
				lastAssistant = len(out) - 1
			}
			out[lastAssistant].ToolCalls = append(out[lastAssistant].ToolCalls, llm.ToolCall{
				ID: r.CallID, Type: "function", Function: llm.FunctionCall{Name: r.Name, Arguments: c.Arguments}})
		case "tool_result":
			out = append(out, llm.Message{Role: "tool", ToolCallID: r.CallID, Content: c.Content})
		case "summary":
			out = append(out, llm.Message{Role: "user", Content: summaryText(c)})
			lastAssistant = -1
		case "marker":
			if c.Type == markerNotice {
				out = append(out, llm.Message{Role: "user", Content: "[Runtime notice] " + c.Text})
				lastAssistant = -1
			}
		}
	}
	return out
}

// recorder persists a running turn from the agent loop's events: the
// assistant message, each tool call when it starts and its result when it
// ends. A call interrupted by a halt keeps no result, so recovery can
// settle it truthfully; calls that never started are not recorded.
type recorder struct {
	s       *session
	src     string
	n       int
	started map[string]bool
	halted  func() bool
	fail    func(error)
	err     error
	// after holds callbacks run once a call's result row is appended.
	after map[string]func()
}

func newRecorder(s *session, src string, halted func() bool, fail func(error)) *recorder {
	return &recorder{s: s, src: src, started: map[string]bool{}, halted: halted, fail: fail}
}

func (r *recorder) write(row conversations.Row) {
	if r.err != nil {
		return
	}
	if err := r.s.append(row); err != nil {
		r.err = err
		r.fail(err)
	}
}

func (r *recorder) on(ev agent.Event) {
	switch e := ev.(type) {
	case agent.AssistantMessage:
		r.n++
		r.write(conversations.Row{ID: fmt.Sprintf("%s:assistant:%d", r.src, r.n), Kind: "assistant",
			Content: rawJSON(assistantContent{Text: e.Message.Content, Reasoning: e.Message.ReasoningContent, ReasoningItems: e.Message.ReasoningItems})})
	case agent.ToolStart:
		r.started[e.CallID] = true
		r.write(conversations.Row{ID: fmt.Sprintf("%s:%d:tool-call:%s", r.src, r.n, e.CallID), Kind: "tool_call", CallID: e.CallID, Name: e.Name,
			Content: rawJSON(map[string]string{"arguments": string(e.Args)})})
	case agent.ToolResultEvent:
		content := e.Result.Content
		if e.Result.IsError && content == "" {
			content = "Error: the tool failed without a message"
		}
		imgs, err := r.s.rt.publishImages(e.Result.Images)
		if err != nil && r.err == nil {
			r.err = err
			r.fail(err)
			return
		}
		r.result(e.CallID, e.Name, content, e.Result.IsError, recordRead(e.Name, e.Result), imgs...)
	case agent.ToolError:
		if !r.started[e.CallID] || (e.Err == "cancelled" && r.halted()) {
			return
		}
		r.result(e.CallID, e.Name, "Error: "+e.Err, true, nil)
	}
}

func (r *recorder) result(callID, name, content string, isErr bool, read *recordObservation, imgs ...imageDescriptor) {
	delete(r.started, callID)
	r.write(conversations.Row{ID: fmt.Sprintf("%s:%d:tool-result:%s", r.src, r.n, callID), Kind: "tool_result", CallID: callID, Name: name,
		Content: rawJSON(resultContent(content, isErr, read, imgs))})
	if f := r.after[callID]; f != nil && r.err == nil {
		delete(r.after, callID)
		f()
	}
}

func resultContent(content string, isErr bool, read *recordObservation, imgs []imageDescriptor) map[string]any {
	m := map[string]any{"content": content, "is_error": isErr}
	if read != nil {
		m["record_observation"] = read
	}
	if len(imgs) > 0 {
		m["images"] = imgs
	}
	return m
}

// settle gives a session's sole final unmatched call an uncertainty result
// and adds a notice; with notifyPending it also adds a notice when the
// session stopped mid-turn (text or provider pending). It reports what it
// did ("" when the session was clean).
func (s *session) settle(notifyPending bool) (string, error) {
	cur, err := s.current()
	if err != nil {
		return "", err
	}
	rows := cur.Rows
	if len(rows) == 0 {
		return "", nil
	}
	last := rows[len(rows)-1]
	src := recoverySource + state.NewUUID()
	switch {
	case last.Kind == "tool_call":
		return "tool_pending", s.append(
			conversations.Row{ID: src + ":tool-result:" + last.CallID, Kind: "tool_result", CallID: last.CallID, Name: last.Name,
				Content: rawJSON(map[string]any{"content": UncertaintyResult, "is_error": true})},
			noticeRow(src, fmt.Sprintf("The runtime stopped while your %s call was running; its outcome is unknown (see its result). Check before repeating it.", last.Name)),
		)
	case !notifyPending:
		return "", nil
	case last.Kind == "marker":
		c := decodeContent(last)
		if c.Type == markerSettled || c.Type == markerNotice {
			return "", nil
		}
	}
	return "interrupted", s.append(noticeRow(src, "The runtime stopped during your previous turn before it finished; nothing after the last recorded step happened."))
}
