package workflow

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
)

var opsByType = map[string][]string{
	"enum":    {"eq", "ne", "in"},
	"string":  {"eq", "ne", "in"},
	"boolean": {"eq", "ne"},
	"integer": {"eq", "ne", "lt", "le", "gt", "ge"},
	"number":  {"eq", "ne", "lt", "le", "gt", "ge"},
}

func (c *compiler) edges(typeName string, ct config.CardType, t *Table, nn string, n config.Node) ([]Transition, error) {
	np := "card_types." + typeName + ".workflow.nodes." + nn
	node := t.nodes[nn]
	var out []Transition
	for _, outcome := range sorted(n.Edges) {
		e := n.Edges[outcome]
		ep := np + ".edges." + outcome
		direct := e.Target != nil || e.Prompt != nil || e.Inputs != nil || e.PendingNotifications != nil
		switch {
		case direct && (e.Cases != nil || e.Otherwise != nil):
			return nil, fail(ep, "give either target or cases/otherwise, not both")
		case direct:
			tr, err := c.body(typeName, ct, t, node, ep, e.EdgeBody)
			if err != nil {
				return nil, err
			}
			tr.Variant, tr.Outcome, tr.path = VariantOutcome, outcome, ep
			trs, err := c.withPending(tr, e.EdgeBody, ep)
			if err != nil {
				return nil, err
			}
			out = append(out, trs...)
		default:
			if len(e.Cases) == 0 || e.Otherwise == nil {
				return nil, fail(ep, "needs target, or cases with otherwise")
			}
			ids := map[string]bool{}
			for i, cs := range e.Cases {
				cp := fmt.Sprintf("%s.cases[%d]", ep, i)
				if !config.ValidName(cs.ID) {
					return nil, fail(cp+".id", "required; use a-z, 0-9, '_' and '-'")
				}
				if ids[cs.ID] {
					return nil, fail(cp+".id", "duplicate case id %q", cs.ID)
				}
				ids[cs.ID] = true
				cond, err := condition(cp+".when", node, cs.When)
				if err != nil {
					return nil, err
				}
				tr, err := c.body(typeName, ct, t, node, cp, cs.EdgeBody)
				if err != nil {
					return nil, err
				}
				tr.Variant, tr.Outcome, tr.CaseID, tr.When, tr.path = VariantCase, outcome, cs.ID, cond, cp
				trs, err := c.withPending(tr, cs.EdgeBody, cp)
				if err != nil {
					return nil, err
				}
				out = append(out, trs...)
			}
			op := ep + ".otherwise"
			tr, err := c.body(typeName, ct, t, node, op, *e.Otherwise)
			if err != nil {
				return nil, err
			}
			tr.Variant, tr.Outcome, tr.path = VariantOtherwise, outcome, op
			trs, err := c.withPending(tr, *e.Otherwise, op)
			if err != nil {
				return nil, err
			}
			out = append(out, trs...)
		}
	}
	// Validate pending-notification alternatives after bodies so errors keep
	// declaration order.
	for _, outcome := range sorted(n.Edges) {
		e := n.Edges[outcome]
		bodies := map[string]config.EdgeBody{np + ".edges." + outcome: e.EdgeBody}
		for i, cs := range e.Cases {
			bodies[fmt.Sprintf("%s.edges.%s.cases[%d]", np, outcome, i)] = cs.EdgeBody
		}
		if e.Otherwise != nil {
			bodies[np+".edges."+outcome+".otherwise"] = *e.Otherwise
		}
		for _, bp := range sorted(bodies) {
			b := bodies[bp]
			pn := b.PendingNotifications
			if pn == nil {
				continue
			}
			pp := bp + ".pending_notifications"
			if t.recipient == "" {
				return nil, fail(pp, "card type %q has no notification_recipient", typeName)
			}
			if pn.Node != t.recipient {
				return nil, fail(pp+".node", "must be the notification recipient %q, not %q", t.recipient, pn.Node)
			}
			if nn == t.recipient {
				return nil, fail(pp, "the recipient itself has no pending alternative")
			}
			if b.Target == nil || b.Target.Terminal != "DONE" {
				return nil, fail(pp, "only a DONE route has a pending-notifications alternative")
			}
		}
	}
	return out, nil
}

func (c *compiler) withPending(tr Transition, b config.EdgeBody, p string) ([]Transition, error) {
	out := []Transition{tr}
	if pn := b.PendingNotifications; pn != nil {
		pr, err := c.prompt(p+".pending_notifications.prompt", pn.Prompt)
		if err != nil {
			return nil, err
		}
		out = append(out, Transition{Variant: VariantPendingNotifications, Outcome: tr.Outcome, CaseID: tr.CaseID,
			Target: "node:" + pn.Node, Prompt: pr, path: p + ".pending_notifications"})
	}
	return out, nil
}

func (c *compiler) body(typeName string, ct config.CardType, t *Table, src Node, p string, b config.EdgeBody) (Transition, error) {
	var tr Transition
	if b.Target == nil {
		return tr, fail(p+".target", "required")
	}
	tg := b.Target
	tp := p + ".target"
	switch {
	case (tg.Node == "") == (tg.Terminal == ""):
		return tr, fail(tp, "give exactly one of node or terminal")
	case tg.Node != "":
		if _, ok := t.nodes[tg.Node]; !ok {
			return tr, fail(tp+".node", "unknown node %q", tg.Node)
		}
		if tg.Promote != nil || tg.ExportRecords != nil {
			return tr, fail(tp, "promote and export_records belong to terminal targets")
		}
		tr.Target = "node:" + tg.Node
	default:
		if !slices.Contains(Terminals, tg.Terminal) {
			return tr, fail(tp+".terminal", "must be DONE, FAILED or BLOCKED, not %q", tg.Terminal)
		}
		tr.Target = "terminal:" + tg.Terminal
		if pr := tg.Promote; pr != nil {
			if pr.LatestNode != "" {
				if _, ok := t.nodes[pr.LatestNode]; !ok {
					return tr, fail(tp+".promote.latest_node", "unknown node %q", pr.LatestNode)
				}
			}
			tr.Promote = &Promotion{Current: pr.Current, LatestNode: pr.LatestNode}
		}
		for i, rn := range tg.ExportRecords {
			if _, ok := ct.Records[rn]; !ok {
				return tr, fail(fmt.Sprintf("%s.export_records[%d]", tp, i), "record %q is not declared by card type %q", rn, typeName)
			}
		}
		tr.ExportRecords = slices.Clone(tg.ExportRecords)
	}
	var err error
	if tr.Prompt, err = c.prompt(p+".prompt", b.Prompt); err != nil {
		return tr, err
	}
	if b.Inputs != nil {
		if tg.Node == "" {
			return tr, fail(p+".inputs", "inputs pass to a node target only")
		}
		tr.Inputs = map[string]string{}
		for _, in := range sorted(b.Inputs) {
			out := b.Inputs[in].Output
			if _, ok := src.DataFields[out]; !ok {
				return tr, fail(p+".inputs."+in+".output", "node %q has no data field %q", src.Name, out)
			}
			tr.Inputs[in] = out
		}
	}
	return tr, nil
}

func condition(p string, n Node, w config.When) (*Condition, error) {
	f, ok := n.DataFields[w.Field]
	if !ok {
		return nil, fail(p+".field", "node %q has no data field %q", n.Name, w.Field)
	}
	if !slices.Contains(opsByType[f.Type], w.Op) {
		return nil, fail(p+".op", "operator %q does not apply to %s field %q (use %s)", w.Op, f.Type, w.Field, strings.Join(opsByType[f.Type], ", "))
	}
	values := []any{w.Value}
	if w.Op == "in" {
		list, ok := w.Value.([]any)
		if !ok || len(list) == 0 {
			return nil, fail(p+".value", "operator in needs a non-empty list")
		}
		values = list
	}
	for _, v := range values {
		if err := checkValue(f, v); err != nil {
			return nil, fail(p+".value", "%v", err)
		}
	}
	return &Condition{Field: w.Field, Op: w.Op, Value: w.Value}, nil
}

func checkValue(f DataField, v any) error {
	switch f.Type {
	case "enum":
		s, ok := v.(string)
		if !ok || !slices.Contains(f.Enum, s) {
			return fmt.Errorf("%v is not one of %s", v, strings.Join(f.Enum, ", "))
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%v is not a string", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%v is not true or false", v)
		}
	case "integer", "number":
		var x float64
		switch n := v.(type) {
		case int:
			x = float64(n)
		case float64:
			if f.Type == "integer" && n != math.Trunc(n) {
				return fmt.Errorf("%v is not an integer", v)
			}
			x = n
		default:
			return fmt.Errorf("%v is not a number", v)
		}
		if f.Min != nil && x < *f.Min || f.Max != nil && x > *f.Max {
			return fmt.Errorf("%v is outside the field's range", v)
		}
	}
	return nil
}

// graphChecks validates reachability from entries, a terminal path from
// every node, sources of exported records and reachability of promotions.
func (c *compiler) graphChecks(typeName string, ct config.CardType, t *Table) error {
	wp := "card_types." + typeName + ".workflow"
	succ := map[string][]string{}
	for _, s := range t.states {
		if s.Kind != StateNode {
			continue
		}
		for _, tr := range s.Transitions {
			if name, ok := strings.CutPrefix(tr.Target, "node:"); ok {
				succ[s.Name] = append(succ[s.Name], name)
			}
		}
	}
	reach := func(from string) map[string]bool {
		seen := map[string]bool{from: true}
		queue := []string{from}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, m := range succ[n] {
				if !seen[m] {
					seen[m] = true
					queue = append(queue, m)
				}
			}
		}
		return seen
	}
	reachable := map[string]bool{}
	for _, s := range t.states {
		if s.Kind == StateEntry {
			for n := range reach(strings.TrimPrefix(s.Transitions[0].Target, "node:")) {
				reachable[n] = true
			}
		}
	}
	closure := map[string]map[string]bool{}
	for _, nn := range t.NodeNames() {
		if !reachable[nn] {
			return fail(wp+".nodes."+nn, "node is not reachable from any entry")
		}
		closure[nn] = reach(nn)
	}
	terminates := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, s := range t.states {
			if s.Kind != StateNode || terminates[s.Name] {
				continue
			}
			for _, tr := range s.Transitions {
				name, isNode := strings.CutPrefix(tr.Target, "node:")
				if !isNode || terminates[name] {
					terminates[s.Name], changed = true, true
					break
				}
			}
		}
	}
	for _, nn := range t.NodeNames() {
		if !terminates[nn] {
			return fail(wp+".nodes."+nn+".edges", "no path from this node reaches a terminal (DONE, FAILED or BLOCKED)")
		}
	}
	for _, s := range t.states {
		if s.Kind != StateNode {
			continue
		}
		for _, tr := range s.Transitions {
			p := tr.path
			if pr := tr.Promote; pr != nil && pr.LatestNode != "" && !closure[pr.LatestNode][s.Name] {
				return fail(p+".target.promote.latest_node", "node %q cannot run before node %q, so it has no result to promote here", pr.LatestNode, s.Name)
			}
			for _, rn := range tr.ExportRecords {
				written := false
				for _, wn := range t.NodeNames() {
					if closure[wn][s.Name] && t.nodes[wn].Records[rn].Writes() {
						written = true
					}
				}
				if !written && !ct.Records[rn].Bootstrap {
					return fail(p+".target.export_records", "record %q is written by no node that can run before this terminal", rn)
				}
			}
		}
	}
	return nil
}
