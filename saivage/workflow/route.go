package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// Transition evaluation: which edge of a compiled table a card takes. It is
// pure (no records, sessions or publication); the runtime reads the facts,
// asks the table, and performs what the chosen edge says.

// ErrNoRoute is wrapped by Table.Route when no edge of the node takes the
// result; the error names the node and the outcome.
var ErrNoRoute = errors.New("no route")

// Result is what routing reads of a node's accepted result: its outcome and
// its typed data fields (JSON numbers as float64).
type Result struct {
	Outcome string
	Data    map[string]any
}

// Route is the edge a result takes.
type Route struct {
	// Transition is the chosen authored edge: a direct outcome, else the
	// first matching case, else otherwise.
	Transition Transition
	// Pending is the edge's pending-notifications alternative, taken
	// instead of a DONE route while notifications wait for the recipient;
	// nil when none is declared.
	Pending *Transition
}

// Destination is where a transition leads: exactly one of Node, Terminal
// or Return is set.
type Destination struct {
	Node     string // the next node
	Terminal string // DONE, FAILED or BLOCKED: the card finishes
	Return   bool   // the correction returns to the saved entry node
}

// Destination decodes the transition's target state ID.
func (tr Transition) Destination() Destination {
	if tr.Target == ReturnTarget {
		return Destination{Return: true}
	}
	if t, ok := strings.CutPrefix(tr.Target, "terminal:"); ok {
		return Destination{Terminal: t}
	}
	return Destination{Node: strings.TrimPrefix(tr.Target, "node:")}
}

// Entry returns the native entry transition of a lifecycle entry (BACKLOG,
// CHANGED, BLOCKED or STOPPED): the node an activation starts in, with the
// entry's prompt.
func (t *Table) Entry(entry string) (Transition, error) {
	st, ok := t.State("entry:" + entry)
	if !ok || len(st.Transitions) != 1 {
		return Transition{}, fmt.Errorf("the workflow has no %s entry", entry)
	}
	return st.Transitions[0], nil
}

// Route selects the edge of node for an accepted result. Among the edges of
// the result's outcome a direct outcome edge wins; otherwise the cases are
// tried in declaration order and the first whose condition holds on the
// result's data wins; otherwise the outcome's otherwise edge. An error
// wrapping ErrNoRoute names the node when nothing takes the result.
func (t *Table) Route(node string, r Result) (Route, error) {
	st, found := t.State("node:" + node)
	if !found {
		return Route{}, fmt.Errorf("%w: card type %s has no node %s", ErrNoRoute, t.cardType, node)
	}
	var chosen *Transition
	for i := range st.Transitions {
		tr := st.Transitions[i]
		if tr.Outcome != r.Outcome {
			continue
		}
		switch tr.Variant {
		case VariantOutcome:
			chosen = &st.Transitions[i]
		case VariantCase:
			if chosen == nil && tr.When.Matches(r.Data) {
				chosen = &st.Transitions[i]
			}
		case VariantOtherwise:
			if chosen == nil {
				chosen = &st.Transitions[i]
			}
		}
	}
	if chosen == nil {
		return Route{}, fmt.Errorf("%w for outcome %q of node %s (card type %s)", ErrNoRoute, r.Outcome, node, t.cardType)
	}
	out := Route{Transition: *chosen}
	for i := range st.Transitions {
		tr := st.Transitions[i]
		if tr.Variant == VariantPendingNotifications && tr.Outcome == chosen.Outcome && tr.CaseID == chosen.CaseID {
			out.Pending = &st.Transitions[i]
		}
	}
	return out, nil
}

// Matches evaluates the condition on result data; a nil condition or an
// absent field never matches. Numbers compare by value whatever their Go
// type; lt, le, gt and ge hold only between numbers.
func (c *Condition) Matches(data map[string]any) bool {
	if c == nil {
		return false
	}
	v, ok := data[c.Field]
	if !ok {
		return false
	}
	eq := func(a, b any) bool {
		if x, ok := toFloat(a); ok {
			y, ok2 := toFloat(b)
			return ok2 && x == y
		}
		return a == b
	}
	switch c.Op {
	case "eq":
		return eq(v, c.Value)
	case "ne":
		return !eq(v, c.Value)
	case "in":
		list, _ := c.Value.([]any)
		for _, item := range list {
			if eq(v, item) {
				return true
			}
		}
		return false
	}
	x, ok1 := toFloat(v)
	y, ok2 := toFloat(c.Value)
	if !ok1 || !ok2 {
		return false
	}
	switch c.Op {
	case "lt":
		return x < y
	case "le":
		return x <= y
	case "gt":
		return x > y
	case "ge":
		return x >= y
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// Facts are the accepted data fields of this activation's nodes, by node
// name: what a node input "<node>.<field>" reads.
type Facts map[string]map[string]any

// ResolveInputs evaluates the node's inputs: literals as declared, and
// predecessor facts "<node>.<field>" from the activation's accepted results.
// A source whose node has no accepted result, or whose result lacks the
// field, is an error naming the input.
func (n Node) ResolveInputs(facts Facts) (map[string]any, error) {
	out := map[string]any{}
	for _, name := range sorted(n.Inputs) {
		in := n.Inputs[name]
		if in.Source == "" {
			out[name] = in.Literal
			continue
		}
		node, field, _ := strings.Cut(in.Source, ".")
		data, ok := facts[node]
		if !ok {
			return nil, fmt.Errorf("input %s: node %s has no accepted result in this activation", name, node)
		}
		v, ok := data[field]
		if !ok {
			return nil, fmt.Errorf("input %s: %s has no field %s", name, node, field)
		}
		out[name] = v
	}
	return out, nil
}
