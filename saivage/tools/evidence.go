package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
)

// EventFilter selects app log events.
type EventFilter struct {
	Type, Card string
	// Errors keeps only failures, blocks, refusals and recoveries.
	Errors bool
}

// SessionInfo describes one agent session for the observation tools.
type SessionInfo struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	Card     string `json:"card,omitempty"`
	Kind     string `json:"kind"`
	Active   bool   `json:"active"`
	Segments int    `json:"segments"`
}

// Evidence reads runtime evidence for the observation tools.
type Evidence interface {
	Events(ctx context.Context, f EventFilter) ([]project.Event, error)
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// SessionRows returns the current segment of a session.
	SessionRows(ctx context.Context, id string) ([]conversations.Row, error)
}

// Observation limits.
const (
	DefaultEventLimit   = 50
	DefaultSessionRows  = 40
	maxSessionRowChars  = 2000
	maxObservationLimit = 500
)

func init() {
	register("read_runtime_events", eventsTool("read_runtime_events", "Read recent app log events (runs, activations, results, corrections, control actions), newest last.", false))
	register("read_runtime_errors", eventsTool("read_runtime_errors", "Read recent failures: blocked or failed cards and nodes, errored runs, content-policy refusals and recoveries.", true))
	register("list_agent_sessions", listSessionsTool)
	register("read_agent_session", readSessionTool)
}

type eventsArgs struct {
	Type  string `json:"type,omitempty"`
	Card  string `json:"card_id,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

func eventsTool(name, desc string, errorsOnly bool) factory {
	return func(env *Env) agent.Tool {
		return tool(spec(name, desc, `{"type":"object","properties":{"type":{"type":"string"},"card_id":{"type":"string"},"limit":{"type":"integer","minimum":1}},"additionalProperties":false}`),
			func(ctx context.Context, a eventsArgs) (agent.ToolResult, error) {
				if env.Evidence == nil {
					return failf("no runtime evidence is attached"), nil
				}
				evs, err := env.Evidence.Events(ctx, EventFilter{Type: a.Type, Card: a.Card, Errors: errorsOnly})
				if err != nil {
					return failf("%v", err), nil
				}
				_, limit := window(0, a.Limit, DefaultEventLimit)
				limit = min(limit, maxObservationLimit)
				total := len(evs)
				evs = evs[max(0, total-limit):]
				b, _ := json.MarshalIndent(map[string]any{"total": total, "events": evs}, "", "  ")
				return ok(env.redact(string(b))), nil
			})
	}
}

func listSessionsTool(env *Env) agent.Tool {
	return tool(spec("list_agent_sessions", "List the agent sessions: the global Analyst (and Oversight) and every card's configured agents, with whether they are active.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			if env.Evidence == nil {
				return failf("no runtime evidence is attached"), nil
			}
			s, err := env.Evidence.Sessions(ctx)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(map[string]any{"sessions": s}), nil
		})
}

type sessionArgs struct {
	SessionID string `json:"session_id"`
	Last      int    `json:"last,omitempty"`
}

func readSessionTool(env *Env) agent.Tool {
	return tool(spec("read_agent_session", "Read the last rows of an agent session's current conversation segment (session ids look like agent:executor:project.a.b or agent:analyst:global).",
		`{"type":"object","properties":{"session_id":{"type":"string"},"last":{"type":"integer","minimum":1}},"required":["session_id"],"additionalProperties":false}`),
		func(ctx context.Context, a sessionArgs) (agent.ToolResult, error) {
			if env.Evidence == nil {
				return failf("no runtime evidence is attached"), nil
			}
			rows, err := env.Evidence.SessionRows(ctx, a.SessionID)
			if err != nil {
				return failf("%v", err), nil
			}
			_, last := window(0, a.Last, DefaultSessionRows)
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %d rows in the current segment", a.SessionID, len(rows))
			if len(rows) > last {
				fmt.Fprintf(&b, " (showing the last %d)", last)
				rows = rows[len(rows)-last:]
			}
			b.WriteString("\n")
			for _, r := range rows {
				var c map[string]any
				_ = json.Unmarshal(r.Content, &c)
				var text string
				for _, k := range []string{"text", "arguments", "content", "type"} {
					if s, ok := c[k].(string); ok && s != "" {
						text = s
						break
					}
				}
				if len(text) > maxSessionRowChars {
					text = truncUTF8(text, maxSessionRowChars) + "…"
				}
				label := r.Kind
				if r.Name != "" {
					label += " " + r.Name
				}
				fmt.Fprintf(&b, "[%s] %s\n", label, text)
			}
			return ok(env.redact(b.String())), nil
		})
}
