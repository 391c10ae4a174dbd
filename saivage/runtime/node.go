package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Cancellation causes that end a node turn on purpose.
var (
	errAccepted = errors.New("the node's result was accepted")
	errNodeFail = errors.New("the node failed")
)

// activation is the memory of one card activation.
type activation struct {
	card     cards.Card
	tbl      *workflow.Table
	accepted map[string]acceptedResult // latest accepted result per node
	ordinal  int

	// Native Git workflow (rt.src != nil): the tip the review entered
	// with, the exact approved tip, and the node a correction returns to
	// with why it runs and the conflicted paths it must resolve.
	reviewEntry gitsource.OID
	reviewed    gitsource.OID
	returnTo    string
	correction  string
	conflicts   []string
}

// facts returns the data of the activation's accepted results by node,
// which node inputs read.
func (a *activation) facts() workflow.Facts {
	f := workflow.Facts{}
	for node, r := range a.accepted {
		f[node] = r.Data
	}
	return f
}

// acceptedResult is an accepted emit_result.
type acceptedResult struct {
	Node    string         `json:"node"`
	Outcome string         `json:"outcome"`
	Summary string         `json:"summary"`
	Data    map[string]any `json:"data,omitempty"`
}

// nodeResult is how a node execution ended.
type nodeResult struct {
	next     string // the next node; "" at a terminal
	prompts  []*workflow.Prompt
	terminal string // DONE, FAILED or BLOCKED
	tr       workflow.Transition
	result   *acceptedResult
	reason   string // an execution failure or block
}

// ActivateChild runs a child card for its parent's Planner (the exact
// parent must be the innermost activation) and returns its outcome.
func (rt *Runtime) ActivateChild(ctx context.Context, parent, child string) (tools.ChildOutcome, error) {
	if cards.ParentOf(child) != parent {
		return tools.ChildOutcome{}, fmt.Errorf("%s is not a child of %s", child, parent)
	}
	rt.mu.Lock()
	top := ""
	if len(rt.stack) > 0 {
		top = rt.stack[len(rt.stack)-1]
	}
	rt.mu.Unlock()
	if top != parent {
		return tools.ChildOutcome{}, fmt.Errorf("%s is not the active card (active: %q)", parent, top)
	}
	return rt.executeCard(ctx, child)
}

// executeCard activates a card and runs its workflow to a terminal. A
// returned error means no outcome was published (halt or failure).
func (rt *Runtime) executeCard(ctx context.Context, id string) (tools.ChildOutcome, error) {
	c, err := rt.p.Cards.Get(ctx, id)
	if err != nil {
		return tools.ChildOutcome{}, err
	}
	if c.Tombstoned() || !c.Status.AdmitsActivation() {
		return tools.ChildOutcome{}, fmt.Errorf("activate %s: the card is %s", id, c.Status)
	}
	tbl, ok := rt.p.Workflows.Table(c.Type)
	if !ok {
		return tools.ChildOutcome{}, fmt.Errorf("activate %s: unknown card type %s", id, c.Type)
	}
	entry := c.Status.Entry()
	for _, ag := range tbl.SessionAgents() {
		if _, err := rt.cardSession(id, ag).settle(false); err != nil {
			return tools.ChildOutcome{}, err
		}
	}
	if rt.src != nil {
		if err := rt.src.enter(ctx, c); err != nil {
			return tools.ChildOutcome{}, fmt.Errorf("activate %s: %w", id, err)
		}
	}
	if c, err = rt.p.Cards.Activate(ctx, id); err != nil {
		return tools.ChildOutcome{}, err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rt.acts.set(id, cancel)
	defer rt.acts.clear(id)
	rt.pushActivation(id)
	defer rt.popActivation(id)
	rt.hint("card", id)
	rt.hint("card", cards.ParentOf(id))
	rt.logEvent("card_activated", map[string]any{"card": id, "entry": entry})
	tr, err := tbl.Entry(entry)
	if err != nil {
		return tools.ChildOutcome{}, fmt.Errorf("activate %s: %w", id, err)
	}
	node, prompts := tr.Destination().Node, []*workflow.Prompt{tr.Prompt}
	act := &activation{card: c, tbl: tbl, accepted: map[string]acceptedResult{}}
	if pending := c.Git; rt.src != nil && pending != nil && pending.Correction != nil {
		// A preserved rebase whose correction did not finish: reenter it.
		act.returnTo, act.correction, act.conflicts = pending.Correction.Node, pending.Correction.Reason, pending.Correction.Paths
		node, prompts = workflow.CorrectionNode, nil
	}
	for {
		if node == workflow.CorrectionNode {
			prompts = append(prompts, &workflow.Prompt{Text: "Why the correction runs: " + act.correction})
		}
		res, err := rt.runNode(ctx, act, node, prompts)
		// A claimed activation settles as stopped even when a halt or its
		// own claimed ancestor cancelled its parent meanwhile: the claim
		// came first, the halt joins this settlement (leaf to root).
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, errUrgent) {
			return rt.urgentStop(parent, id, cause)
		}
		if err != nil {
			return tools.ChildOutcome{}, err
		}
		if res.next == "" && rt.src != nil {
			correct, err := rt.src.settle(context.WithoutCancel(ctx), act, &res)
			if err != nil {
				return tools.ChildOutcome{}, err
			}
			if correct {
				node, prompts = workflow.CorrectionNode, nil
				act.ordinal++
				continue
			}
		}
		if res.next == "" {
			return rt.finishCard(ctx, act, res)
		}
		if res.next == workflow.ReturnTarget {
			res.next, res.prompts = act.returnTo, nil
			if err := rt.src.corrected(ctx, act); err != nil {
				return tools.ChildOutcome{}, err
			}
		}
		node, prompts = res.next, res.prompts
		act.ordinal++
	}
}

// finishCard publishes the natural outcome and computes promotion and
// exports.
func (rt *Runtime) finishCard(ctx context.Context, act *activation, res nodeResult) (tools.ChildOutcome, error) {
	id := act.card.ID
	status := map[string]cards.Status{"DONE": cards.Done, "FAILED": cards.Failed, "BLOCKED": cards.Blocked}[res.terminal]
	if _, err := rt.p.Cards.Finish(ctx, id, status); err != nil {
		return tools.ChildOutcome{}, err
	}
	// The advisory hook runs after the natural publication and is joined
	// before the outcome is delivered; it never changes the outcome.
	rt.runHook(ctx, act, string(status))
	out := tools.ChildOutcome{Card: id, Status: string(status), Reason: res.reason}
	promoted := res.result
	if p := res.tr.Promote; p != nil && p.LatestNode != "" {
		if r, ok := act.accepted[p.LatestNode]; ok {
			promoted = &r
		}
	}
	if promoted != nil {
		out.Outcome, out.Summary, out.Data = promoted.Outcome, promoted.Summary, promoted.Data
	}
	if len(res.tr.ExportRecords) > 0 {
		out.Exports = map[string]int{}
		for _, name := range res.tr.ExportRecords {
			ref, err := rt.p.Cards.RecordRef(ctx, id, name)
			if err != nil {
				return out, err
			}
			h, err := rt.p.Cards.Records().ReadHead(ref)
			if err != nil {
				return out, err
			}
			out.Exports[name] = h.Latest
		}
	}
	rt.hint("card", id)
	rt.hint("card", cards.ParentOf(id))
	rt.logEvent("card_finished", map[string]any{"card": id, "status": status, "outcome": out.Outcome, "summary": out.Summary,
		"data": out.Data, "exports": out.Exports, "reason": out.Reason})
	return out, nil
}

// nodeExec is one execution of an agent node.
type nodeExec struct {
	rt          *Runtime
	act         *activation
	nd          workflow.Node
	ag          workflow.Agent
	sess        *session
	writable    []string          // records with a draft opened for this node
	baselines   map[string]string // head uuid after entry preparation
	revisions   map[string]int
	snapshot    map[string]string // descendant record heads
	corrections int
	cancel      context.CancelCauseFunc
	done        *nodeResult
	afterResult map[string]func() // post-append callbacks by call id
}

func (rt *Runtime) root() string {
	if r, err := filepath.EvalSymlinks(rt.p.Root); err == nil {
		return r
	}
	return rt.p.Root
}

// runNode executes one node until its result is accepted, it fails or the
// Run halts (error).
func (rt *Runtime) runNode(ctx context.Context, act *activation, name string, prompts []*workflow.Prompt) (nodeResult, error) {
	nd, _ := act.tbl.Node(name)
	if nd.Kind == workflow.NodeAction {
		return rt.runAction(ctx, act, name, nd)
	}
	ag, _ := rt.p.Workflows.Agent(nd.Agent)
	route, ok := rt.models.Route(ag.ModelRoute)
	if !ok {
		return nodeResult{}, fmt.Errorf("node %s: agent %s has no bound route %s", name, ag.Name, ag.ModelRoute)
	}
	ne := &nodeExec{rt: rt, act: act, nd: nd, ag: ag, sess: rt.cardSession(act.card.ID, nd.Agent), afterResult: map[string]func(){}}
	if reason, err := ne.readGates(ctx); err != nil || reason != "" {
		return nodeResult{terminal: "BLOCKED", reason: reason}, err
	}
	if rt.src != nil {
		reason, err := rt.src.entryCheck(ctx, act, name)
		if err != nil {
			return nodeResult{}, fmt.Errorf("node %s of %s: check source: %w", name, act.card.ID, err)
		}
		if reason != "" {
			rt.logEvent("node_blocked", map[string]any{"card": act.card.ID, "node": name, "reason": reason})
			return nodeResult{terminal: "BLOCKED", reason: reason}, nil
		}
	}
	if err := ne.prepareRecords(ctx); err != nil {
		return nodeResult{}, err
	}
	var err error
	if ne.snapshot, err = ne.descendantHeads(ctx); err != nil {
		return nodeResult{}, err
	}
	// Entry: marker and instructions, with notifications for the recipient.
	var notes []cards.Message
	if name == act.tbl.NotificationRecipient() {
		if notes, err = rt.p.Cards.Messages(ctx, act.card.ID); err != nil {
			return nodeResult{}, err
		}
	}
	src := state.NewUUID()
	if err := ne.sess.append(markerRow(src, markerNode, map[string]any{"card": act.card.ID, "node": name, "ordinal": act.ordinal}),
		userRow(src, "", ne.entryText(prompts, notes))); err != nil {
		return nodeResult{}, err
	}
	if len(notes) > 0 {
		if err := rt.p.Cards.Dequeue(ctx, act.card.ID, messageIDs(notes)); err != nil {
			return nodeResult{}, err
		}
	}
	rt.logEvent("node_entered", map[string]any{"card": act.card.ID, "node": name, "agent": nd.Agent, "ordinal": act.ordinal})

	env := rt.toolEnv(tools.Caller{Agent: nd.Agent, Card: act.card.ID, Node: name, WorkRoot: filepath.Join(rt.root(), ".saivage", "work", "cards", act.card.ID),
		DraftRecords: ne.writable, RecordWrites: ag.MayWrite, Tools: nd.Tools})
	env.Children = rt
	if rt.src != nil {
		env.Source = rt.src
	}
	env.AfterActivation = func() {
		if h, err := ne.descendantHeads(context.WithoutCancel(ctx)); err == nil {
			ne.snapshot = h
		}
	}
	bound, err := tools.Build(nd.Tools, env)
	if err != nil {
		return nodeResult{}, fmt.Errorf("node %s: %w", name, err)
	}
	bound = append(bound, agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "emit_result", Parameters: nd.EmitResult,
		Description: "Finish this node: give the outcome, a short summary and the typed data fields. Your record drafts are accepted with the result; a rejected result is explained in the tool result and you can fix and call again."},
		Fn: ne.emit})
	iv := &invoker{rt: rt, route: route, sess: ne.sess, gated: true, system: ne.systemPrompt, tail: ne.stateBlock}
	steps := rt.opts.MaxNodeSteps
	for {
		turnCtx, cancel := context.WithCancelCause(ctx)
		ne.cancel = cancel
		cur, err := ne.sess.current()
		if err != nil {
			cancel(nil)
			return nodeResult{}, err
		}
		rec := newRecorder(ne.sess, state.NewUUID(), func() bool { return ctx.Err() != nil }, func(err error) { cancel(err) })
		rec.after = ne.afterResult
		res, runErr := agent.Run(turnCtx, agent.RunOptions{Model: iv, ModelName: route.Public, Messages: rowsToMessages(cur.Rows),
			Tools: bound, MaxSteps: steps, OnEvent: func(ev agent.Event) {
				rec.on(ev)
				switch e := ev.(type) {
				case agent.ToolError:
					// Arguments that are not JSON never reach emit_result;
					// they still count as a malformed result.
					if e.Name == "emit_result" && strings.Contains(e.Err, "not valid JSON") {
						if r, failed := ne.correction("malformed_result", e.Err); failed {
							ne.done = &r
							cancel(errNodeFail)
						}
					}
				case agent.ToolStart:
					rt.observe(Observation{Kind: ObsToolStart, Session: ne.sess.id, Tool: e.Name})
				case agent.ToolResultEvent:
					rt.observe(Observation{Kind: ObsToolEnd, Session: ne.sess.id, Tool: e.Name})
				}
			}})
		cause := context.Cause(turnCtx)
		cancel(nil)
		steps -= res.Steps
		switch {
		case ctx.Err() != nil:
			return nodeResult{}, context.Cause(ctx)
		case rec.err != nil:
			return nodeResult{}, rec.err
		case errors.Is(cause, errAccepted) || errors.Is(cause, errNodeFail):
			if err := ne.settled(); err != nil {
				return nodeResult{}, err
			}
			return *ne.done, nil
		case runErr != nil:
			var cp *ContentPolicyError
			res := nodeResult{terminal: "BLOCKED", reason: "model call failed: " + rt.redact(runErr.Error())}
			if errors.As(runErr, &cp) {
				res.reason = rt.redact(cp.Error())
			}
			rt.logEvent("node_blocked", map[string]any{"card": act.card.ID, "node": name, "reason": res.reason})
			return res, ne.settled()
		case res.Reason == agent.StopStepLimit || steps <= 0:
			return nodeResult{terminal: "FAILED", reason: fmt.Sprintf("node %s used its %d model calls without an accepted result", name, rt.opts.MaxNodeSteps)}, ne.settled()
		}
		// A plain-text answer: correct within the shared budget.
		text := "Your last reply was plain text, which does not finish this node. Call emit_result with the outcome, a summary and the data fields (" + ne.resultShape() + ")."
		if r, failed := ne.correction("plain_text", text); failed {
			return r, ne.settled()
		} else if err := ne.sess.append(userRow(state.NewUUID(), ":correction", r.reason)); err != nil {
			return nodeResult{}, err
		}
	}
}

func messageIDs(ms []cards.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.UUID
	}
	return out
}

// settled ends the node turn in the session.
func (ne *nodeExec) settled() error {
	return ne.sess.append(markerRow("settled-"+state.NewUUID(), markerSettled, map[string]any{"node": ne.nd.Name}))
}

// correction counts one corrective cause. It returns the correction text
// in reason, or failed=true with a FAILED result once the budget is spent.
func (ne *nodeExec) correction(kind, text string) (nodeResult, bool) {
	ne.corrections++
	budget := ne.rt.opts.CorrectionBudget
	ne.rt.logEvent("correction", map[string]any{"card": ne.act.card.ID, "node": ne.nd.Name, "kind": kind, "count": ne.corrections})
	if ne.corrections > budget {
		return nodeResult{terminal: "FAILED", reason: fmt.Sprintf("node %s exceeded its correction budget of %d (last: %s)", ne.nd.Name, budget, kind)}, true
	}
	if ne.nd.CorrectionPrompt != nil {
		text += "\n\n" + ne.nd.CorrectionPrompt.Text
	}
	return nodeResult{reason: fmt.Sprintf("%s\n(correction %d of %d)", text, ne.corrections, budget)}, false
}

// recordRef returns the ref of one of the card's records.
func (ne *nodeExec) recordRef(name string) records.Ref {
	return records.Ref{CardDir: ne.rt.p.Cards.CardDir(ne.act.card.ID), Card: ne.act.card.ID, Name: name}
}

// readGates checks gates of records the node cannot write: an agent cannot
// correct those, so a failure blocks the card at entry.
func (ne *nodeExec) readGates(ctx context.Context) (string, error) {
	for _, name := range sortedKeys(ne.nd.Records) {
		use := ne.nd.Records[name]
		if use.Writes() || use.Gate == "none" || use.Gate == "" {
			continue
		}
		h, err := ne.rt.p.Cards.Records().ReadHead(ne.recordRef(name))
		if err != nil {
			return "", err
		}
		if h.Latest < 1 {
			return fmt.Sprintf("record %s of %s has no accepted version, which node %s requires; write it (Analyst or operator) and run again", name, ne.act.card.ID, ne.nd.Name), nil
		}
	}
	return "", nil
}

// prepareRecords opens this node's drafts (clean: empty, initializers: the
// template, continue: current content) and captures head baselines. A
// draft left open by an interrupted activation is discarded first.
func (ne *nodeExec) prepareRecords(ctx context.Context) error {
	ne.rt.recordMu.Lock()
	defer ne.rt.recordMu.Unlock()
	rs := ne.rt.p.Cards.Records()
	ne.baselines, ne.revisions = map[string]string{}, map[string]int{}
	author := "agent:" + ne.nd.Agent
	for _, name := range sortedKeys(ne.nd.Records) {
		use := ne.nd.Records[name]
		if !use.Writes() {
			continue
		}
		ref := ne.recordRef(name)
		h, err := rs.ReadHead(ref)
		if err != nil {
			return err
		}
		if h.Draft != nil {
			if _, err := rs.DiscardDraft(ref); err != nil {
				return err
			}
		}
		if _, err := rs.OpenDraft(ref, author); err != nil {
			return err
		}
		switch {
		case slices.Contains(ne.nd.InitializeRecords, name):
			spec, _ := ne.act.tbl.Record(name)
			if _, err := rs.WriteDraft(ref, spec.Initial, author); err != nil {
				return err
			}
		case use.Mode == "clean":
			if _, err := rs.WriteDraft(ref, "", author); err != nil {
				return err
			}
		}
		if h, err = rs.ReadHead(ref); err != nil {
			return err
		}
		ne.baselines[name], ne.revisions[name] = h.HeadUUID, h.Revision
		ne.writable = append(ne.writable, name)
	}
	ne.rt.hint("card", ne.act.card.ID)
	return nil
}

// descendantHeads snapshots the heads of descendant records in context.
func (ne *nodeExec) descendantHeads(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if len(ne.nd.DescendantRecords) == 0 {
		return out, nil
	}
	err := ne.walkDescendants(ctx, func(c cards.Card, name string, h records.Head) error {
		out[c.ID+"/"+name] = fmt.Sprintf("%s@%d", h.HeadUUID, h.Revision)
		return nil
	})
	return out, err
}

// walkDescendants visits each active descendant's declared context records.
func (ne *nodeExec) walkDescendants(ctx context.Context, visit func(cards.Card, string, records.Head) error) error {
	queue := slices.Clone(ne.act.card.Children)
	if c, err := ne.rt.p.Cards.Get(ctx, ne.act.card.ID); err == nil {
		queue = slices.Clone(c.Children)
	}
	for len(queue) > 0 {
		c, err := ne.rt.p.Cards.Get(ctx, queue[0])
		queue = queue[1:]
		if err != nil {
			return err
		}
		if c.Tombstoned() {
			continue
		}
		queue = append(queue, c.Children...)
		tbl, _ := ne.rt.p.Workflows.Table(c.Type)
		for _, name := range ne.nd.DescendantRecords {
			if _, ok := tbl.Record(name); !ok {
				continue
			}
			ref := records.Ref{CardDir: ne.rt.p.Cards.CardDir(c.ID), Card: c.ID, Name: name}
			h, err := ne.rt.p.Cards.Records().ReadHead(ref)
			if err != nil {
				return err
			}
			if err := visit(c, name, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// resultShape describes emit_result's arguments.
func (ne *nodeExec) resultShape() string {
	s := "outcome one of " + strings.Join(ne.nd.Outcomes, ", ")
	for _, f := range sortedKeys(ne.nd.DataFields) {
		d := ne.nd.DataFields[f]
		if d.Type == "enum" {
			s += fmt.Sprintf("; data.%s one of %s", f, strings.Join(d.Enum, ", "))
		} else {
			s += fmt.Sprintf("; data.%s (%s)", f, d.Type)
		}
	}
	return s
}

func (ne *nodeExec) systemPrompt() string {
	var b strings.Builder
	if ne.ag.Prompt != nil {
		b.WriteString(strings.TrimSpace(ne.ag.Prompt.Text) + "\n\n")
	}
	fmt.Fprintf(&b, "You are the %s agent working on card %s of a Saivage project in %s.\n", ne.nd.Agent, ne.act.card.ID, ne.rt.root())
	b.WriteString("Records are read and written with the file tools through record paths: record:NAME for this card's records, " +
		"record:CARD/NAME for another card's, record:CARD/NAME@N for an exact accepted version. " +
		"Your record drafts are accepted only together with an accepted emit_result. " +
		"Finish every node by calling emit_result exactly once; a plain-text reply does not finish the node.")
	return b.String()
}

func (ne *nodeExec) entryText(prompts []*workflow.Prompt, notes []cards.Message) string {
	var b strings.Builder
	for _, p := range prompts {
		if p != nil && strings.TrimSpace(p.Text) != "" {
			b.WriteString(strings.TrimSpace(p.Text) + "\n\n")
		}
	}
	if ne.nd.Prompt != nil {
		b.WriteString(strings.TrimSpace(ne.nd.Prompt.Text) + "\n\n")
	}
	c := ne.act.card
	fmt.Fprintf(&b, "Card %s (%s): %s\n", c.ID, c.Type, c.Title)
	if c.Description != "" {
		b.WriteString(c.Description + "\n")
	}
	fmt.Fprintf(&b, "Node %s. Finish with emit_result: %s.\n", ne.nd.Name, ne.resultShape())
	if len(notes) > 0 {
		b.WriteString("\nNotifications for you:\n")
		for _, m := range notes {
			fmt.Fprintf(&b, "- from %s: %s\n", m.From, m.Text)
		}
	}
	return strings.TrimSpace(b.String())
}

// stateBlock is the final system block, observed for every model call:
// the card's status, descriptors of the node's records and of the
// descendant records it reviews (locator, kind, version, size — never
// their content, which the agent reads with its tools), and the card's
// children.
func (ne *nodeExec) stateBlock(ctx context.Context) stateSnapshot {
	c, err := ne.rt.p.Cards.Get(ctx, ne.act.card.ID)
	if err != nil {
		return stateSnapshot{}
	}
	var snap stateSnapshot
	rs := ne.rt.p.Cards.Records()
	for _, name := range sortedKeys(ne.nd.Records) {
		use := ne.nd.Records[name]
		cur, err := rs.Current(ne.recordRef(name))
		if err != nil {
			continue
		}
		o := recordObservation{Locator: "record:" + name, Card: c.ID, Record: name, Kind: records.SelAccepted, Version: cur.Version,
			Bytes: len(cur.Content), Mode: use.Mode, Gate: cmpOr(use.Gate, "none")}
		switch {
		case cur.Head.Draft != nil:
			o.Kind, o.Revision = records.SelDraft, cur.Head.Revision
		case cur.Version == 0:
			o.Kind = records.SelBaseline
		}
		snap.records = append(snap.records, o)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Latest state snapshot (observed for this model call; record descriptors only — read a record's content with the read tool at its locator)\n"+
		"Card %s (%s) is %s. Node: %s.\n", c.ID, c.Type, c.Status, ne.nd.Name)
	if len(snap.records) > 0 {
		b.WriteString("\n### Records of this card\n")
		for _, o := range snap.records {
			b.WriteString("- " + o.describe() + "\n")
		}
	}
	if kids := c.Children; len(kids) > 0 {
		b.WriteString("\n### Children\n")
		for _, k := range kids {
			kc, err := ne.rt.p.Cards.Get(ctx, k)
			if err != nil || kc.Tombstoned() {
				continue
			}
			deps := ""
			if len(kc.Dependencies) > 0 {
				deps = " (depends on " + strings.Join(kc.Dependencies, ", ") + ")"
			}
			fmt.Fprintf(&b, "- %s [%s] %s — %s%s\n", kc.ID, kc.Type, kc.Status, kc.Title, deps)
		}
	}
	if len(ne.nd.DescendantRecords) > 0 {
		var d strings.Builder
		_ = ne.walkDescendants(ctx, func(dc cards.Card, name string, h records.Head) error {
			if h.Latest < 1 {
				return nil
			}
			a, err := rs.Latest(records.Ref{CardDir: ne.rt.p.Cards.CardDir(dc.ID), Card: dc.ID, Name: name}, h)
			if err != nil {
				return nil
			}
			o := recordObservation{Locator: fmt.Sprintf("record:%s/%s@%d", dc.ID, name, h.Latest), Card: dc.ID, Record: name,
				Kind: records.SelAccepted, Version: h.Latest, Bytes: len(a.Content)}
			snap.records = append(snap.records, o)
			d.WriteString("- " + o.describe() + "\n")
			return nil
		})
		if d.Len() > 0 {
			b.WriteString("\n### Descendant records (latest accepted versions)\n" + d.String())
		}
	}
	snap.text = ne.rt.redact(b.String())
	return snap
}

// emit is the emit_result tool: validation, routing, gates, freshness,
// pending notifications, then acceptance (record close) and turn end.
func (ne *nodeExec) emit(ctx context.Context, raw json.RawMessage) (agent.ToolResult, error) {
	fail := func(kind, text string) (agent.ToolResult, error) {
		r, failed := ne.correction(kind, text)
		if failed {
			ne.done = &r
			ne.cancel(errNodeFail)
			return agent.ToolResult{Content: "Error: " + r.reason + ". The node has failed.", IsError: true}, nil
		}
		return agent.ToolResult{Content: "Error: result not accepted. " + r.reason, IsError: true}, nil
	}
	res, problems := validateResult(ne.nd, raw)
	if len(problems) > 0 {
		return fail("malformed_result", "emit_result arguments are invalid: "+strings.Join(problems, "; ")+". Expected "+ne.resultShape()+".")
	}
	r, err := ne.act.tbl.Route(ne.nd.Name, workflow.Result{Outcome: res.Outcome, Data: res.Data})
	if err != nil {
		return fail("malformed_result", "no route for outcome "+res.Outcome)
	}
	tr, alt := r.Transition, r.Pending
	terminal := tr.Destination().Terminal
	cardID := ne.act.card.ID
	// Record gates and descendants matter for results that move on.
	if terminal == "" || terminal == "DONE" {
		if problems := ne.gateProblems(); len(problems) > 0 {
			return fail("record_gate", "record gates are not met: "+strings.Join(problems, "; ")+".")
		}
	}
	if terminal == "DONE" {
		c, err := ne.rt.p.Cards.Get(ctx, cardID)
		if err != nil {
			return agent.ToolResult{}, err
		}
		var open []string
		for _, k := range c.Children {
			kc, err := ne.rt.p.Cards.Get(ctx, k)
			if err != nil {
				return agent.ToolResult{}, err
			}
			if !kc.Tombstoned() && !kc.Status.CompletesDescendant() {
				open = append(open, fmt.Sprintf("%s is %s", k, kc.Status))
			}
		}
		if len(open) > 0 {
			return fail("descendants", "the card cannot finish done while children are unfinished: "+strings.Join(open, ", ")+". Activate, cancel or report another outcome.")
		}
	}
	if ne.nd.RequireUnchanged {
		now, err := ne.descendantHeads(ctx)
		if err != nil {
			return agent.ToolResult{}, err
		}
		if !mapsEqual(now, ne.snapshot) {
			ne.snapshot = now
			return fail("stale_context", "descendant records changed since you last looked; the state block lists their new versions — read the changed ones and emit again.")
		}
	}
	// Pending notifications: the recipient reads them before finishing; a
	// non-recipient DONE takes its declared alternative.
	if terminal != "" || alt != nil {
		msgs, err := ne.rt.p.Cards.Messages(ctx, cardID)
		if err != nil {
			return agent.ToolResult{}, err
		}
		if len(msgs) > 0 {
			if ne.nd.Name == ne.act.tbl.NotificationRecipient() {
				var b strings.Builder
				for _, m := range msgs {
					fmt.Fprintf(&b, "\n- from %s: %s", m.From, m.Text)
				}
				if call, ok := agent.CallFrom(ctx); ok {
					ids := messageIDs(msgs)
					ne.afterResult[call.CallID] = func() { _ = ne.rt.p.Cards.Dequeue(context.WithoutCancel(ctx), cardID, ids) }
				}
				return fail("pending_notifications", "notifications arrived for this card; take them into account before finishing:"+b.String())
			}
			if alt != nil {
				tr, terminal = *alt, ""
			}
		}
	}
	if src := ne.rt.src; src != nil && (terminal == "" || terminal == "DONE") {
		msg, err := src.ready(ctx, ne, tr, res.Outcome)
		if err != nil {
			return agent.ToolResult{}, err
		}
		if msg != "" {
			return fail("source_ready", msg)
		}
	}
	closed, err := ne.closeRecords()
	if err != nil {
		return agent.ToolResult{}, err
	}
	ar := acceptedResult{Node: ne.nd.Name, Outcome: res.Outcome, Summary: res.Summary, Data: res.Data}
	if ne.nd.Purpose != workflow.PurposeCorrection { // correction never becomes a product result
		ne.act.accepted[ne.nd.Name] = ar
	}
	done := &nodeResult{tr: tr, result: &ar}
	if ne.nd.Purpose == workflow.PurposeCorrection {
		done.result = nil
	}
	msg := ""
	if terminal != "" {
		done.terminal = terminal
		msg = "the card finishes " + terminal
	} else {
		d := tr.Destination()
		done.next = d.Node
		if d.Return {
			done.next = workflow.ReturnTarget // executeCard returns to the saved entry
		}
		done.prompts = []*workflow.Prompt{tr.Prompt}
		msg = "next node: " + done.next
	}
	ne.done = done
	ne.rt.logEvent("result_accepted", map[string]any{"card": cardID, "node": ne.nd.Name, "outcome": res.Outcome, "records": closed, "next": done.next, "terminal": done.terminal})
	ne.cancel(errAccepted)
	return agent.ToolResult{Content: fmt.Sprintf("Result accepted (%s). Records accepted: %v; %s.", res.Outcome, closed, msg)}, nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// gateProblems checks the gates of records this node writes.
func (ne *nodeExec) gateProblems() []string {
	var out []string
	rs := ne.rt.p.Cards.Records()
	for _, name := range ne.writable {
		use := ne.nd.Records[name]
		h, err := rs.ReadHead(ne.recordRef(name))
		if err != nil {
			out = append(out, fmt.Sprintf("record %s: %v", name, err))
			continue
		}
		d := h.Draft
		written := d != nil && d.Changed && strings.TrimSpace(d.Content) != ""
		switch use.Gate {
		case "updated":
			switch {
			case d == nil:
				out = append(out, fmt.Sprintf("record:%s has no open draft", name))
			case d.Changed && strings.TrimSpace(d.Content) == "":
				out = append(out, fmt.Sprintf("record:%s is empty; write its content", name))
			case !d.Changed || h.HeadUUID == ne.baselines[name] || h.Revision <= ne.revisions[name]:
				out = append(out, fmt.Sprintf("record:%s was not updated in this node; write it", name))
			}
		case "exists":
			if h.Latest < 1 && !written {
				out = append(out, fmt.Sprintf("record:%s has no content yet; write it", name))
			}
		}
	}
	return out
}

// closeRecords accepts this node's changed, non-empty drafts (sorted by
// name; the configuration's maps carry no declaration order) and discards
// the others.
func (ne *nodeExec) closeRecords() (map[string]int, error) {
	ne.rt.recordMu.Lock()
	defer ne.rt.recordMu.Unlock()
	rs := ne.rt.p.Cards.Records()
	closed := map[string]int{}
	author := "agent:" + ne.nd.Agent
	for _, name := range ne.writable {
		ref := ne.recordRef(name)
		h, err := rs.ReadHead(ref)
		if err != nil {
			return closed, err
		}
		if h.Draft == nil {
			continue
		}
		if h.Draft.Changed && strings.TrimSpace(h.Draft.Content) != "" {
			a, err := rs.Accept(ref, author)
			if err != nil {
				return closed, err
			}
			closed[name] = a.Version
			continue
		}
		if _, err := rs.DiscardDraft(ref); err != nil {
			return closed, err
		}
	}
	ne.rt.hint("card", ne.act.card.ID)
	return closed, nil
}

// validateResult checks emit_result arguments against the node's schema.
func validateResult(nd workflow.Node, raw json.RawMessage) (acceptedResult, []string) {
	var problems []string
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return acceptedResult{}, []string{"the arguments must be a JSON object"}
	}
	res := acceptedResult{Node: nd.Name}
	for k := range obj {
		if k != "outcome" && k != "summary" && !(k == "data" && len(nd.DataFields) > 0) {
			problems = append(problems, fmt.Sprintf("unexpected field %q", k))
		}
	}
	if err := json.Unmarshal(obj["outcome"], &res.Outcome); err != nil || !slices.Contains(nd.Outcomes, res.Outcome) {
		problems = append(problems, "outcome must be one of "+strings.Join(nd.Outcomes, ", "))
	}
	if err := json.Unmarshal(obj["summary"], &res.Summary); err != nil || strings.TrimSpace(res.Summary) == "" {
		problems = append(problems, "summary must be a non-empty string")
	} else if utf8.RuneCountInString(res.Summary) > 4000 {
		problems = append(problems, "summary is longer than 4000 characters")
	}
	if len(nd.DataFields) == 0 {
		return res, problems
	}
	var data map[string]any
	if err := json.Unmarshal(obj["data"], &data); err != nil || data == nil {
		return res, append(problems, "data must be an object with "+strings.Join(sortedKeys(nd.DataFields), ", "))
	}
	for k := range data {
		if _, ok := nd.DataFields[k]; !ok {
			problems = append(problems, fmt.Sprintf("data has unexpected field %q", k))
		}
	}
	for _, name := range sortedKeys(nd.DataFields) {
		f := nd.DataFields[name]
		v, present := data[name]
		if !present {
			problems = append(problems, "data."+name+" is required")
			continue
		}
		if msg := checkField(f, v); msg != "" {
			problems = append(problems, "data."+name+" "+msg)
		}
	}
	res.Data = data
	return res, problems
}

func checkField(f workflow.DataField, v any) string {
	switch f.Type {
	case "enum":
		s, ok := v.(string)
		if !ok || !slices.Contains(f.Enum, s) {
			return "must be one of " + strings.Join(f.Enum, ", ")
		}
	case "string":
		if _, ok := v.(string); !ok {
			return "must be a string"
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "integer", "number":
		x, ok := v.(float64)
		if !ok || (f.Type == "integer" && x != float64(int64(x))) {
			return "must be " + map[string]string{"integer": "an integer", "number": "a number"}[f.Type]
		}
		if f.Min != nil && x < *f.Min || f.Max != nil && x > *f.Max {
			return "is outside its allowed range"
		}
	}
	return ""
}

// toolRuntime adapts the Runtime to the tools' Runtime port.
type toolRuntime struct{ rt *Runtime }

func (t toolRuntime) Status() tools.Status {
	v := t.rt.Status()
	return tools.Status{Status: string(v.Status), RunID: v.RunID, Activations: v.Activations, Error: v.Error}
}
func (t toolRuntime) Start(ctx context.Context) error  { return t.rt.Run(ctx) }
func (t toolRuntime) Pause(ctx context.Context) error  { return t.rt.Pause(ctx) }
func (t toolRuntime) Resume(ctx context.Context) error { return t.rt.Resume(ctx) }
func (t toolRuntime) Stop(ctx context.Context) error   { return t.rt.Stop(ctx) }
func (t toolRuntime) InterventionAllowed() error       { return t.rt.InterventionAllowed() }
func (t toolRuntime) Reconfigure(ctx context.Context, yaml string) error {
	return t.rt.Reconfigure(ctx, yaml)
}
