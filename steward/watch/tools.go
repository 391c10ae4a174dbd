package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"
)

// Host tool names. create_watch, stop_watch and list_watches only observe
// or reduce background work and are allowed; create_agent_watch can grant
// future actions and is gated behind the user's approval.
const (
	ToolCreateWatch      = "create_watch"
	ToolCreateAgentWatch = "create_agent_watch"
	ToolStopWatch        = "stop_watch"
	ToolListWatches      = "list_watches"
)

// ChatIDFunc tells a host tool which chat is calling it.
type ChatIDFunc func(ctx context.Context) (string, bool)

const ruleSchema = `{"type":"object","required":["id"],"properties":{
"id":{"type":"string","description":"unique rule id, e.g. departed"},
"event":{"type":"string","description":"semantic event type, e.g. train.departed, train.platform_confirmed, train.stop_arrived, time.reached"},
"trigger":{"type":"object","description":"instead of event: fire minutes before a live timestamp of the watched state","required":["kind","field","minutes"],"properties":{
  "kind":{"type":"string","enum":["before_time"]},"field":{"type":"string","description":"e.g. estimatedArrivalMs"},"minutes":{"type":"number"}}},
"where":{"type":"object","description":"equality filters on the event data; dot paths allowed, e.g. {\"positionRelativeToDestination\": -1}"},
"once":{"type":"boolean","description":"fire at most once"}%s}}`

const grantSchema = `,
"grants":{"type":"array","description":"registered write tools this rule may use unattended","items":{"type":"object","required":["tool"],"properties":{
  "tool":{"type":"string"},"maxInvocations":{"type":"integer","minimum":1},
  "constraints":{"type":"object","properties":{"denyExtraFields":{"type":"boolean"},"fields":{"type":"object","description":"field → {kind: exact|template|one_of|range|relative_time, value|template|values|min,max|base,offsetMinutes}"}}}}}},
"continuation":{"type":"object","description":"retry after afterMinutes when an action reports one of outcomes, up to maxAttempts","properties":{
  "outcomes":{"type":"array","items":{"type":"string"}},"afterMinutes":{"type":"number"},"maxAttempts":{"type":"integer"}}}`

func createSchema(rule string) json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["source","instruction","rules"],"properties":{
"source":{"type":"string","description":"train or time"},
"resourceRef":{"type":"string","description":"train: the trainRef from find_next_train; time: an RFC 3339 instant with an explicit offset"},
"afterMinutes":{"type":"number","description":"time source only, instead of resourceRef: minutes from now"},
"instruction":{"type":"string","description":"the user's request, verbatim"},
"expiresAt":{"type":"string","description":"optional RFC 3339 expiry (default: the source's, e.g. two hours after arrival)"},
"rules":{"type":"array","minItems":1,"items":` + rule + `}}}`)
}

// createArgs is create_watch's and create_agent_watch's input.
type createArgs struct {
	Source       string   `json:"source"`
	ResourceRef  string   `json:"resourceRef,omitempty"`
	AfterMinutes *float64 `json:"afterMinutes,omitempty"`
	Instruction  string   `json:"instruction"`
	ExpiresAt    string   `json:"expiresAt,omitempty"`
	Rules        []Rule   `json:"rules"`
}

func parseCreate(args json.RawMessage, chatID string, agentWatch bool) (CreateRequest, error) {
	var a createArgs
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return CreateRequest{}, fmt.Errorf("invalid arguments: %v", err)
	}
	req := CreateRequest{Source: strings.TrimSpace(a.Source), ResourceRef: strings.TrimSpace(a.ResourceRef),
		Instruction: a.Instruction, ChatID: chatID, Rules: a.Rules, Agent: agentWatch}
	if a.AfterMinutes != nil {
		if req.ResourceRef != "" {
			return req, errors.New("give resourceRef or afterMinutes, not both")
		}
		req.ResourceRef = fmt.Sprintf("afterMinutes=%g", *a.AfterMinutes)
	}
	if a.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, a.ExpiresAt)
		if err != nil {
			return req, fmt.Errorf("expiresAt %q is not an RFC 3339 time with an offset", a.ExpiresAt)
		}
		req.ExpiresAt = t
	}
	return req, nil
}

func toArgs(p *Prepared) json.RawMessage {
	b, _ := json.Marshal(createArgs{Source: p.Source, ResourceRef: p.ResourceRef, Instruction: p.Instruction,
		ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339), Rules: p.Rules})
	return b
}

func failed(msg string) (agent.ToolResult, error) {
	return agent.ToolResult{Content: msg, IsError: true}, nil
}

// watchCard is the structured result of the watch tools.
type watchCard struct {
	Kind        string    `json:"kind"`
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Status      string    `json:"status"`
	Instruction string    `json:"instruction"`
	Rules       []Rule    `json:"rules"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Agent       bool      `json:"agent,omitempty"`
	LastError   string    `json:"lastError,omitempty"`
}

func card(w *Watch) watchCard {
	return watchCard{Kind: "watch", ID: w.ID, Source: w.Source, Status: w.Status, Instruction: w.Instruction, Rules: w.Rules,
		ExpiresAt: w.ExpiresAt, Agent: w.Agent, LastError: w.LastError}
}

// Tools returns the host-native watch tools bound to the calling chat.
func (e *Engine) Tools(chatID ChatIDFunc) []agent.Tool {
	create := func(agentWatch bool) func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
		return func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
			id, ok := chatID(ctx)
			if !ok {
				return failed("watches can only be created from a chat")
			}
			req, err := parseCreate(args, id, agentWatch)
			if err != nil {
				return failed(err.Error())
			}
			w, err := e.Create(ctx, req)
			if err != nil {
				return failed("The watch was not created: " + err.Error())
			}
			data, _ := json.Marshal(card(w))
			return agent.ToolResult{Data: data, Content: fmt.Sprintf(
				"Watch %s is active until %s with rules %s. It reacts to future changes only: tell the user the current state now. "+
					"Notifications will arrive in this chat.", w.ID, w.ExpiresAt.Local().Format(time.RFC3339), ruleIDs(w.Rules))}, nil
		}
	}
	return []agent.Tool{
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: ToolCreateWatch, Parameters: createSchema(fmt.Sprintf(ruleSchema, "")),
			Description: "Create a background watch that notifies the user in this chat when events happen (e.g. a train's platform is " +
				"confirmed, it departs, it reaches the stop before the destination; or a time is reached). It captures the current " +
				"state now and reacts only to future changes. Stop rules (train.stop_arrived/departed) need where.station, " +
				"where.stationId or where.positionRelativeToDestination (-1 = the stop before the destination, 0 = the destination)."},
			Fn: create(false)},
		&agentWatchTool{e: e, chatID: chatID, run: create(true)},
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: ToolStopWatch,
			Description: "Stop a background watch by id. Stopping an ended watch changes nothing.",
			Parameters:  json.RawMessage(`{"type":"object","required":["watchId"],"properties":{"watchId":{"type":"string"}}}`)},
			Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
				var a struct {
					WatchID string `json:"watchId"`
				}
				if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.WatchID) == "" {
					return failed("stop_watch needs watchId")
				}
				status, err := e.Stop(ctx, strings.TrimSpace(a.WatchID))
				if errors.Is(err, ErrNotFound) {
					return failed("There is no watch " + a.WatchID + "; list_watches shows them.")
				}
				if err != nil {
					return agent.ToolResult{}, err
				}
				return agent.ToolResult{Content: fmt.Sprintf("Watch %s is %s.", a.WatchID, status)}, nil
			}},
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: ToolListWatches,
			Description: "List the watches of this chat (active ones unless all is true; everyChat for all chats).",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"all":{"type":"boolean"},"everyChat":{"type":"boolean"}}}`)},
			Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
				var a struct {
					All       bool `json:"all"`
					EveryChat bool `json:"everyChat"`
				}
				json.Unmarshal(args, &a)
				id, _ := chatID(ctx)
				if a.EveryChat {
					id = ""
				}
				ws, err := e.List(ctx, id, a.All)
				if err != nil {
					return agent.ToolResult{}, err
				}
				cards := make([]watchCard, 0, len(ws))
				for _, w := range ws {
					cards = append(cards, card(w))
				}
				b, _ := json.Marshal(cards)
				return agent.ToolResult{Content: string(b)}, nil
			}},
	}
}

func ruleIDs(rules []Rule) string {
	ids := make([]string, len(rules))
	for i, r := range rules {
		ids[i] = r.ID
	}
	return strings.Join(ids, ", ")
}

// agentWatchTool is create_agent_watch. Its Preflight validates grants
// against the capability registry and freezes relative times before the
// approval card is shown, so deciding cannot move a deadline.
type agentWatchTool struct {
	e      *Engine
	chatID ChatIDFunc
	run    func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error)
}

func (t *agentWatchTool) Spec() agent.ToolSpec {
	registered := strings.Join(t.e.opts.Capabilities.Tools(), ", ")
	if registered == "" {
		registered = "none are registered yet"
	}
	return agent.ToolSpec{Name: ToolCreateAgentWatch, Parameters: createSchema(fmt.Sprintf(ruleSchema, grantSchema)),
		Description: "Like create_watch, but rules may grant registered write tools (" + registered +
			") to run unattended when the rule fires, within exact/template/one_of/range/relative_time constraints on each argument. " +
			"Requires the user's approval. Use current tool results for exact values."}
}

func (t *agentWatchTool) Call(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
	return t.run(ctx, args)
}

// Preflight returns the normalised arguments the approval shows and the
// call runs with.
func (t *agentWatchTool) Preflight(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	id, ok := t.chatID(ctx)
	if !ok {
		return nil, errors.New("watches can only be created from a chat")
	}
	req, err := parseCreate(args, id, true)
	if err != nil {
		return nil, err
	}
	p, err := t.e.Prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	return toArgs(p), nil
}
