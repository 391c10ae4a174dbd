package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// ErrUnknownSession is returned for a session id that names no configured
// global session or card session.
var ErrUnknownSession = errors.New("no such session")

// SessionInfo describes one known agent session.
type SessionInfo struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	Card     string `json:"card,omitempty"`
	Kind     string `json:"kind"` // global | card
	Active   bool   `json:"active"`
	Segments int    `json:"segments"`
	// Dir is the session directory.
	Dir string `json:"-"`
}

// globals returns the configured global sessions that exist (Oversight
// only once established).
func (rt *Runtime) globals() []string {
	out := []string{rt.p.Workflows.Analyst()}
	if ov := rt.p.Workflows.Oversight(); ov != "" {
		if _, err := os.Stat(filepath.Join(rt.p.StateDir, "agents", ov, "index.json")); err == nil {
			out = append(out, ov)
		}
	}
	return out
}

// ResolveSession maps a session id to its directory, admitting only the
// configured globals and the configured agents of existing cards. It
// reports a malformed id or ErrUnknownSession.
func (rt *Runtime) ResolveSession(ctx context.Context, id string) (SessionInfo, error) {
	agent, card, err := conversations.ParseSessionID(id)
	if err != nil {
		return SessionInfo{}, err
	}
	info := SessionInfo{ID: id, Agent: agent, Card: card, Kind: "card"}
	if card == "" {
		if !slices.Contains(rt.globals(), agent) {
			return info, fmt.Errorf("%w: %s", ErrUnknownSession, id)
		}
		info.Kind, info.Dir = "global", rt.globalSession(agent).dir
		info.Active = agent == rt.p.Workflows.Analyst() && rt.analyst.Info().Busy
	} else {
		if !cards.ValidID(card) {
			return info, fmt.Errorf("%q is not a card id", card)
		}
		c, err := rt.p.Cards.Get(ctx, card)
		if errors.Is(err, cards.ErrNotFound) {
			return info, fmt.Errorf("%w: %s", ErrUnknownSession, id)
		}
		if err != nil {
			return info, err
		}
		tbl, _ := rt.p.Workflows.Table(c.Type)
		if !slices.Contains(tbl.SessionAgents(), agent) {
			return info, fmt.Errorf("%w: cards of type %s have no %s session", ErrUnknownSession, c.Type, agent)
		}
		info.Dir = rt.p.Cards.SessionDir(card, agent)
		info.Active = slices.Contains(rt.Status().Activations, card)
	}
	idx, err := rt.p.Sessions.ReadIndex(info.Dir, id)
	if err != nil {
		return info, err
	}
	info.Segments = len(idx.Segments)
	return info, nil
}

// CardSessions returns a card's configured sessions.
func (rt *Runtime) CardSessions(ctx context.Context, c cards.Card) ([]SessionInfo, error) {
	tbl, _ := rt.p.Workflows.Table(c.Type)
	var out []SessionInfo
	for _, ag := range tbl.SessionAgents() {
		info, err := rt.ResolveSession(ctx, conversations.SessionID(ag, c.ID))
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Sessions returns the global sessions and the sessions of every reached
// active card, in tree order.
func (rt *Runtime) Sessions(ctx context.Context) ([]SessionInfo, error) {
	out := []SessionInfo{}
	for _, g := range rt.globals() {
		info, err := rt.ResolveSession(ctx, conversations.SessionID(g, ""))
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	var walk func(id string) error
	walk = func(id string) error {
		c, err := rt.p.Cards.Get(ctx, id)
		if err != nil || c.Tombstoned() {
			return err
		}
		infos, err := rt.CardSessions(ctx, c)
		if err != nil {
			return err
		}
		out = append(out, infos...)
		for _, k := range c.Children {
			if err := walk(k); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(cards.RootID)
}

// evidence serves the observation tools (tools.Evidence).
type evidence struct{ rt *Runtime }

// errorEvents are the app log events read_runtime_errors reports.
var errorEvents = map[string]bool{"node_blocked": true, "content_policy_refusal": true, "session_recovered": true, "card_recovered": true}

func (e evidence) Events(ctx context.Context, f tools.EventFilter) ([]project.Event, error) {
	return e.rt.p.Events(func(ev project.Event) bool {
		switch {
		case f.Errors && !errorEvents[ev.Type] && !(ev.Type == "run_ended" && ev.Data["outcome"] == "error") &&
			!(ev.Type == "card_finished" && ev.Data["status"] != string(cards.Done)):
			return false
		case f.Type != "" && ev.Type != f.Type:
			return false
		case f.Card != "" && ev.Data["card"] != f.Card:
			return false
		}
		return true
	})
}

func (e evidence) Sessions(ctx context.Context) ([]tools.SessionInfo, error) {
	infos, err := e.rt.Sessions(ctx)
	out := make([]tools.SessionInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, tools.SessionInfo{ID: i.ID, Agent: i.Agent, Card: i.Card, Kind: i.Kind, Active: i.Active, Segments: i.Segments})
	}
	return out, err
}

func (e evidence) SessionRows(ctx context.Context, id string) ([]conversations.Row, error) {
	info, err := e.rt.ResolveSession(ctx, id)
	if err != nil {
		return nil, err
	}
	cur, err := e.rt.p.Sessions.LoadCurrent(info.Dir, info.ID, state.TailIgnore)
	return cur.Rows, err
}

// ErrorEvents returns the app log events read_runtime_errors reports:
// blocked nodes, content-policy refusals, recoveries, failed Runs and
// cards that did not finish done. Informational control actions are not
// errors.
func (rt *Runtime) ErrorEvents(ctx context.Context) ([]project.Event, error) {
	return evidence{rt}.Events(ctx, tools.EventFilter{Errors: true})
}

// Instruction is one static prompt binding that applies to a session.
type Instruction struct {
	// Binding says where the text is bound: agent, node, correction or
	// transition.
	Binding string `json:"binding"`
	// Node is the workflow node ("" for the agent's own prompt).
	Node string `json:"node,omitempty"`
	// From is the state a transition prompt leaves.
	From      string `json:"from,omitempty"`
	Reference string `json:"reference"`
	Text      string `json:"text"`
}

// Instructions renders every loaded static prompt binding of a session:
// the agent's prompt and, for a card session, the prompts of the card
// type's nodes the agent executes (node, correction and the transition
// prompts that enter them). It reads no conversation, evidence or disk and
// calls no provider.
func (rt *Runtime) Instructions(ctx context.Context, info SessionInfo) ([]Instruction, error) {
	out := []Instruction{}
	add := func(binding, node, from string, p *workflow.Prompt) {
		if p != nil && strings.TrimSpace(p.Text) != "" {
			out = append(out, Instruction{Binding: binding, Node: node, From: from, Reference: p.Reference, Text: rt.redact(p.Text)})
		}
	}
	if ag, ok := rt.p.Workflows.Agent(info.Agent); ok {
		add("agent", "", "", ag.Prompt)
	}
	if info.Card == "" {
		return out, nil
	}
	c, err := rt.p.Cards.Get(ctx, info.Card)
	if err != nil {
		return nil, err
	}
	tbl, ok := rt.p.Workflows.Table(c.Type)
	if !ok {
		return out, nil
	}
	mine := map[string]bool{}
	for _, n := range tbl.NodeNames() {
		nd, _ := tbl.Node(n)
		if nd.Agent == info.Agent {
			mine["node:"+n] = true
			add("node", n, "", nd.Prompt)
			add("correction", n, "", nd.CorrectionPrompt)
		}
	}
	for _, st := range tbl.States() {
		for _, tr := range st.Transitions {
			if mine[tr.Target] {
				add("transition", strings.TrimPrefix(tr.Target, "node:"), st.ID, tr.Prompt)
			}
		}
	}
	return out, nil
}
