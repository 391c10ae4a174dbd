package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"unicode/utf8"

	"github.com/agentstack/agentstack/saivage/config"
)

// MaxPromptBytes bounds one prompt or record template file.
const MaxPromptBytes = 256 << 10

// Agent is a compiled agent declaration.
type Agent struct {
	Name              string   `json:"name"`
	Session           string   `json:"session"`
	ModelRoute        string   `json:"model_route"`
	Candidates        []string `json:"candidates"`
	Tools             []string `json:"tools"`
	QualityTools      []string `json:"quality_tools,omitempty"`
	RecordWrites      []string `json:"record_writes,omitempty"`
	CanCreateChildren bool     `json:"can_create_children,omitempty"`
	Skills            bool     `json:"skills,omitempty"`
	Prompt            *Prompt  `json:"prompt"`
}

// MayWrite reports whether one of the agent's record_writes globs matches
// the record name.
func (a Agent) MayWrite(record string) bool {
	for _, g := range a.RecordWrites {
		if ok, _ := path.Match(g, record); ok {
			return true
		}
	}
	return false
}

// BoundTools are the tool identities the agent is bound with: its tools
// followed by its quality tools.
func (a Agent) BoundTools() []string {
	return append(slices.Clone(a.Tools), a.QualityTools...)
}

// Set is the compiled workflow of a whole configuration.
type Set struct {
	tables    map[string]*Table
	agents    map[string]Agent
	analyst   string
	oversight string
	git       *GitPolicy
}

// Table returns the state table of a card type.
func (s *Set) Table(cardType string) (*Table, bool) {
	t, ok := s.tables[cardType]
	return t, ok
}

// CardTypes returns the compiled card types, sorted.
func (s *Set) CardTypes() []string {
	out := make([]string, 0, len(s.tables))
	for n := range s.tables {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Agent returns a compiled agent.
func (s *Set) Agent(name string) (Agent, bool) {
	a, ok := s.agents[name]
	return a, ok
}

// Analyst returns the configured Analyst agent name.
func (s *Set) Analyst() string { return s.analyst }

// Oversight returns the Oversight agent name, or "" when not configured.
func (s *Set) Oversight() string { return s.oversight }

// Options configures Compile.
type Options struct {
	// Prompts resolves prompt and record-template references; it is rooted
	// at the project's .saivage directory.
	Prompts fs.FS
}

// Compile validates cfg and builds one immutable state table per card type.
// The first problem is returned as a *config.Error whose path names the card
// type, node and field.
func Compile(ctx context.Context, cfg *config.Config, opts Options) (*Set, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := config.Validate(cfg); err != nil {
		return nil, err
	}
	c := &compiler{cfg: cfg, fsys: opts.Prompts, prompts: map[string]string{}}
	set := &Set{tables: map[string]*Table{}, agents: map[string]Agent{}, analyst: cfg.AnalystAgent}
	if cfg.Oversight != nil {
		set.oversight = cfg.Oversight.Agent
	}
	for _, name := range sorted(cfg.Agents) {
		a, err := c.agent(name, cfg.Agents[name])
		if err != nil {
			return nil, err
		}
		set.agents[name] = a
	}
	c.agents = set.agents
	var err error
	if set.git, err = c.gitPolicy(); err != nil {
		return nil, err
	}
	if set.git != nil {
		if err := c.checkGitAgents(set.agents); err != nil {
			return nil, err
		}
		if err := c.checkGitWriters(set.git, set.agents); err != nil {
			return nil, err
		}
	}
	for _, name := range sorted(cfg.CardTypes) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := c.cardType(name, cfg.CardTypes[name])
		if err != nil {
			return nil, err
		}
		if set.git.Delivers(name) {
			if err := c.reviewBinding(name, t); err != nil {
				return nil, err
			}
			if err := c.correctionNode(t); err != nil {
				return nil, err
			}
		}
		set.tables[name] = t
	}
	return set, nil
}

type compiler struct {
	cfg     *config.Config
	fsys    fs.FS
	prompts map[string]string
	agents  map[string]Agent
}

func fail(p, format string, args ...any) error {
	return &config.Error{Path: p, Msg: fmt.Sprintf(format, args...)}
}

func (c *compiler) readFile(p, ref string) (string, error) {
	if text, ok := c.prompts[ref]; ok {
		return text, nil
	}
	if ref == "" {
		return "", fail(p, "reference is required")
	}
	if !fs.ValidPath(ref) || ref == "." {
		return "", fail(p, "reference %q must be a relative path inside .saivage without '..'", ref)
	}
	if c.fsys == nil {
		return "", fail(p, "cannot read %q: no prompt directory", ref)
	}
	f, err := c.fsys.Open(ref)
	if err != nil {
		return "", fail(p, "prompt file %q: %v", ref, unwrapPathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fail(p, "prompt file %q: %v", ref, unwrapPathErr(err))
	}
	if !st.Mode().IsRegular() {
		return "", fail(p, "prompt file %q is not a regular file", ref)
	}
	if st.Size() > MaxPromptBytes {
		return "", fail(p, "prompt file %q is %d bytes, over the %d-byte limit", ref, st.Size(), MaxPromptBytes)
	}
	data, err := fs.ReadFile(c.fsys, ref)
	if err != nil {
		return "", fail(p, "prompt file %q: %v", ref, unwrapPathErr(err))
	}
	if !utf8.Valid(data) {
		return "", fail(p, "prompt file %q is not valid UTF-8", ref)
	}
	c.prompts[ref] = string(data)
	return string(data), nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func (c *compiler) prompt(p string, ref *config.PromptRef) (*Prompt, error) {
	if ref == nil {
		return nil, nil
	}
	text, err := c.readFile(p+".reference", ref.Reference)
	if err != nil {
		return nil, err
	}
	return &Prompt{Reference: ref.Reference, Text: text, Compactable: ref.Compactable, CompactionKey: ref.CompactionKey}, nil
}

func (c *compiler) agent(name string, a config.Agent) (Agent, error) {
	p := "agents." + name
	if !config.ValidName(name) {
		return Agent{}, fail(p, "agent names use a-z, 0-9, '_' and '-'")
	}
	seen := map[string]bool{}
	for i, t := range a.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", p, i)
		switch {
		case t == "emit_result":
			return Agent{}, fail(tp, "emit_result is generated per node and cannot be configured")
		case !knownTools[t]:
			return Agent{}, fail(tp, "unknown tool %q", t)
		case t == "checkpoint_source" && !c.cfg.GitOn():
			return Agent{}, fail(tp, "tool %q needs the native Git workflow (git_workflow.enabled: true)", t)
		case t == "checkpoint_source" && a.Session != "card":
			return Agent{}, fail(tp, "tool checkpoint_source needs a card session; agent %q is global", name)
		case t == "skill" && !a.Skills:
			return Agent{}, fail(tp, "tool skill needs skills: true on agent %q", name)
		case seen[t]:
			return Agent{}, fail(tp, "tool %q listed twice", t)
		case a.Session == "global" && cardOnlyTools[t]:
			return Agent{}, fail(tp, "tool %q needs a card session; agent %q is global", t, name)
		}
		seen[t] = true
	}
	for i, q := range a.QualityTools {
		qp := fmt.Sprintf("%s.quality_tools[%d]", p, i)
		switch {
		case !knownQualityTools[q]:
			return Agent{}, fail(qp, "unknown quality tool %q", q)
		case seen[q]:
			return Agent{}, fail(qp, "quality tool %q listed twice", q)
		}
		seen[q] = true
	}
	for i, g := range a.RecordWrites {
		if _, err := path.Match(g, "x"); err != nil {
			return Agent{}, fail(fmt.Sprintf("%s.record_writes[%d]", p, i), "invalid glob %q", g)
		}
	}
	if o := c.cfg.Oversight; o != nil && o.Agent == name {
		for i, t := range a.Tools {
			if !oversightAllowedTools[t] {
				return Agent{}, fail(fmt.Sprintf("%s.tools[%d]", p, i), "Oversight agent may not hold %q", t)
			}
		}
		if len(a.RecordWrites) > 0 || a.CanCreateChildren || len(a.QualityTools) > 0 || a.Skills {
			return Agent{}, fail(p, "Oversight agent may not write records, create children, use quality tools or skills")
		}
	}
	pr, err := c.prompt(p+".prompt", a.Prompt)
	if err != nil {
		return Agent{}, err
	}
	return Agent{
		Name: name, Session: a.Session, ModelRoute: a.ModelRoute,
		Candidates: slices.Clone(c.cfg.Models.Routes[a.ModelRoute].Candidates),
		Tools:      slices.Clone(a.Tools), QualityTools: slices.Clone(a.QualityTools),
		RecordWrites: slices.Clone(a.RecordWrites), CanCreateChildren: a.CanCreateChildren,
		Skills: a.Skills, Prompt: pr,
	}, nil
}

func sorted[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// childClosure returns every type reachable through permitted_child_types.
func (c *compiler) childClosure(cardType string) map[string]bool {
	seen := map[string]bool{}
	queue := slices.Clone(c.cfg.CardTypes[cardType].PermittedChildTypes)
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if seen[t] {
			continue
		}
		seen[t] = true
		queue = append(queue, c.cfg.CardTypes[t].PermittedChildTypes...)
	}
	return seen
}

func (c *compiler) cardType(name string, ct config.CardType) (*Table, error) {
	base := "card_types." + name
	wp := base + ".workflow"
	for i, child := range ct.PermittedChildTypes {
		if _, ok := c.cfg.CardTypes[child]; !ok {
			return nil, fail(fmt.Sprintf("%s.permitted_child_types[%d]", base, i), "unknown card type %q", child)
		}
		if slices.Index(ct.PermittedChildTypes, child) != i {
			return nil, fail(fmt.Sprintf("%s.permitted_child_types[%d]", base, i), "card type %q listed twice", child)
		}
	}
	t := &Table{
		cardType: name, index: map[string]int{}, nodes: map[string]Node{},
		childTypes: slices.Clone(ct.PermittedChildTypes), recipient: ct.Workflow.NotificationRecipient,
	}
	for _, rn := range sorted(ct.Records) {
		r := ct.Records[rn]
		spec := RecordSpec{Name: rn, Format: r.Format, Bootstrap: r.Bootstrap}
		if r.Initialization != nil {
			text, err := c.readFile(base+".records."+rn+".initialization.template", r.Initialization.Template)
			if err != nil {
				return nil, err
			}
			spec.Initial = text
		}
		t.records = append(t.records, spec)
	}
	w := ct.Workflow
	if w.FormatVersion != 1 {
		return nil, fail(wp+".format_version", "must be 1")
	}
	if len(w.Nodes) == 0 {
		return nil, fail(wp+".nodes", "at least one node is required")
	}
	// Nodes first (without transitions), so edges can refer to them.
	for _, nn := range sorted(w.Nodes) {
		n, err := c.node(name, ct, nn, w.Nodes[nn])
		if err != nil {
			return nil, err
		}
		t.nodes[nn] = n
	}
	if r := w.NotificationRecipient; r != "" {
		n, ok := t.nodes[r]
		if !ok {
			return nil, fail(wp+".notification_recipient", "unknown node %q", r)
		}
		if n.Kind != NodeAgent {
			return nil, fail(wp+".notification_recipient", "node %q is not an agent node", r)
		}
	}
	t.states = append(t.states, State{ID: "ready", Kind: StateReady, Name: "ready"})
	entries := map[string]*config.Entry{"BACKLOG": w.Entries.BACKLOG, "CHANGED": w.Entries.CHANGED, "BLOCKED": w.Entries.BLOCKED, "STOPPED": w.Entries.STOPPED}
	for _, e := range Entries {
		ep := wp + ".entries." + e
		decl := entries[e]
		if decl == nil {
			return nil, fail(ep, "required")
		}
		if _, ok := t.nodes[decl.Node]; !ok {
			return nil, fail(ep+".node", "unknown node %q", decl.Node)
		}
		pr, err := c.prompt(ep+".prompt", decl.Prompt)
		if err != nil {
			return nil, err
		}
		t.states[0].Transitions = append(t.states[0].Transitions, Transition{Variant: VariantLifecycle, Outcome: e, Target: "entry:" + e})
		t.states = append(t.states, State{ID: "entry:" + e, Kind: StateEntry, Name: e,
			Transitions: []Transition{{Variant: VariantEntry, Target: "node:" + decl.Node, Prompt: pr}}})
	}
	for _, nn := range sorted(w.Nodes) {
		trs, err := c.edges(name, ct, t, nn, w.Nodes[nn])
		if err != nil {
			return nil, err
		}
		t.states = append(t.states, State{ID: "node:" + nn, Kind: StateNode, Name: nn, Transitions: trs})
	}
	for _, term := range Terminals {
		t.states = append(t.states, State{ID: "terminal:" + term, Kind: StateTerminal, Name: term})
	}
	for i, s := range t.states {
		t.index[s.ID] = i
	}
	if err := c.graphChecks(name, ct, t); err != nil {
		return nil, err
	}
	if h := w.AfterActivationCommit; h != nil {
		hp := wp + ".after_activation_commit"
		if h.Execution.Kind != "action" {
			return nil, fail(hp+".execution.kind", `must be "action"`)
		}
		if err := c.action(hp+".execution", h.Execution); err != nil {
			return nil, err
		}
		if len(h.Statuses) == 0 {
			return nil, fail(hp+".statuses", "list at least one of done, blocked, failed")
		}
		for i, s := range h.Statuses {
			if s != "done" && s != "blocked" && s != "failed" {
				return nil, fail(fmt.Sprintf("%s.statuses[%d]", hp, i), "must be done, blocked or failed, not %q", s)
			}
		}
		hook := &Hook{Action: h.Execution.Action, ContractVersion: h.Execution.ContractVersion, Config: h.Execution.Config,
			Statuses: slices.Clone(h.Statuses), Inputs: map[string]any{}}
		for in, v := range h.Execution.Inputs {
			if v.Source != "" || v.Literal == nil {
				return nil, fail(hp+".execution.inputs."+in, "a hook takes literal inputs only")
			}
			hook.Inputs[in] = v.Literal
		}
		t.hook = hook
	}
	agents := map[string]bool{}
	for _, n := range t.nodes {
		if n.Kind == NodeAgent {
			agents[n.Agent] = true
		}
	}
	t.agents = sorted(agents)
	return t, nil
}

func (c *compiler) node(typeName string, ct config.CardType, nn string, n config.Node) (Node, error) {
	np := "card_types." + typeName + ".workflow.nodes." + nn
	if !config.ValidName(nn) {
		return Node{}, fail(np, "node names use a-z, 0-9, '_' and '-'")
	}
	out := Node{Name: nn, Purpose: PurposeProduct, Records: map[string]RecordUse{}}
	e := n.Execution
	ep := np + ".execution"
	var agent Agent
	switch e.Kind {
	case "agent":
		out.Kind = NodeAgent
		if e.Action != "" || e.Config != nil || e.ContractVersion != 0 {
			return Node{}, fail(ep, "agent executions take agent, prompt, correction_prompt, data_inputs and inputs only")
		}
		a, ok := c.agents[e.Agent]
		if !ok {
			return Node{}, fail(ep+".agent", "unknown agent %q", e.Agent)
		}
		if a.Session != "card" {
			return Node{}, fail(ep+".agent", "agent %q has session %q; workflow nodes need session: card", e.Agent, a.Session)
		}
		agent = a
		out.Agent = e.Agent
		var err error
		if out.Prompt, err = c.prompt(ep+".prompt", e.Prompt); err != nil {
			return Node{}, err
		}
		if out.Prompt == nil {
			return Node{}, fail(ep+".prompt", "required")
		}
		if out.CorrectionPrompt, err = c.prompt(ep+".correction_prompt", e.CorrectionPrompt); err != nil {
			return Node{}, err
		}
		canCreate := a.CanCreateChildren && len(ct.PermittedChildTypes) > 0
		for _, tool := range a.Tools {
			if tool == "create_card" && !canCreate {
				continue
			}
			out.Tools = append(out.Tools, tool)
		}
		out.Tools = append(out.Tools, a.QualityTools...)
		out.DataFields = map[string]DataField{}
		for _, fn := range sorted(e.DataInputs) {
			f, err := dataField(ep+".data_inputs."+fn, fn, e.DataInputs[fn])
			if err != nil {
				return Node{}, err
			}
			out.DataFields[fn] = f
		}
	case "action":
		out.Kind = NodeAction
		if err := c.action(ep, e); err != nil {
			return Node{}, err
		}
		out.Action, out.ContractVersion, out.ActionConfig = e.Action, e.ContractVersion, e.Config
		out.DataFields = ActionFields(e.Action)
		for en := range n.Edges {
			if !slices.Contains(actionOutcomes, en) {
				return Node{}, fail(np+".edges."+en, "action nodes route the outcomes done and failed, not %q", en)
			}
		}
	default:
		return Node{}, fail(ep+".kind", `must be "agent" or "action", not %q`, e.Kind)
	}
	for _, in := range sorted(e.Inputs) {
		v := e.Inputs[in]
		ip := ep + ".inputs." + in
		if out.Inputs == nil {
			out.Inputs = map[string]Input{}
		}
		out.Inputs[in] = Input{Literal: v.Literal, Source: v.Source}
		if (v.Literal == nil) == (v.Source == "") {
			return Node{}, fail(ip, "give exactly one of literal or source")
		}
		if v.Source != "" {
			src, field, ok := cut(v.Source)
			if !ok {
				return Node{}, fail(ip+".source", "expected <node>.<field>, not %q", v.Source)
			}
			sn, ok := ct.Workflow.Nodes[src]
			if !ok {
				return Node{}, fail(ip+".source", "unknown node %q", src)
			}
			_, typed := sn.Execution.DataInputs[field]
			_, factual := ActionFields(sn.Execution.Action)[field]
			if !typed && !factual {
				return Node{}, fail(ip+".source", "node %q has no data field %q", src, field)
			}
		}
	}
	for _, rn := range sorted(n.Records) {
		r := n.Records[rn]
		rp := np + ".records." + rn
		if _, ok := ct.Records[rn]; !ok {
			return Node{}, fail(rp, "record %q is not declared by card type %q", rn, typeName)
		}
		use := RecordUse{Mode: r.Mode, Gate: r.Gate}
		if use.Gate == "" {
			use.Gate = "none"
		}
		switch use.Mode {
		case "read", "clean", "continue":
		default:
			return Node{}, fail(rp+".mode", "must be read, clean or continue, not %q", r.Mode)
		}
		switch use.Gate {
		case "none", "exists":
		case "updated":
			if !use.Writes() {
				return Node{}, fail(rp+".gate", "gate updated needs mode clean or continue")
			}
		default:
			return Node{}, fail(rp+".gate", "must be none, exists or updated, not %q", r.Gate)
		}
		if use.Writes() && out.Kind == NodeAgent {
			if !agent.MayWrite(rn) {
				return Node{}, fail(rp+".mode", "agent %q has no record_writes glob matching %q", agent.Name, rn)
			}
			if !slices.Contains(agent.Tools, "write") {
				return Node{}, fail(rp+".mode", "agent %q needs the write tool to write record %q", agent.Name, rn)
			}
		}
		if use.Writes() && out.Kind == NodeAction && rn != n.OutputRecord {
			return Node{}, fail(rp+".mode", "an action node writes only its output_record")
		}
		out.Records[rn] = use
	}
	for i, rn := range n.InitializeRecords {
		if !out.Records[rn].Writes() {
			return Node{}, fail(fmt.Sprintf("%s.initialize_records[%d]", np, i), "record %q must have mode clean or continue on this node", rn)
		}
	}
	out.InitializeRecords = slices.Clone(n.InitializeRecords)
	if n.OutputRecord != "" {
		op := np + ".output_record"
		if out.Kind != NodeAction {
			return Node{}, fail(op, "only action nodes declare an output_record")
		}
		decl, ok := ct.Records[n.OutputRecord]
		if !ok {
			return Node{}, fail(op, "record %q is not declared by card type %q", n.OutputRecord, typeName)
		}
		if decl.Bootstrap {
			return Node{}, fail(op, "record %q is a bootstrap record", n.OutputRecord)
		}
		if u := out.Records[n.OutputRecord]; u.Mode != "continue" || u.Gate != "updated" {
			return Node{}, fail(op, "record %q needs {mode: continue, gate: updated} on this node", n.OutputRecord)
		}
		out.OutputRecord = n.OutputRecord
	}
	for i, rp := range n.RecordPrompts {
		pp := fmt.Sprintf("%s.record_prompts[%d]", np, i)
		if _, ok := ct.Records[rp.Record]; !ok {
			return Node{}, fail(pp+".record", "record %q is not declared by card type %q", rp.Record, typeName)
		}
		if rp.Presence != "present" && rp.Presence != "absent" {
			return Node{}, fail(pp+".presence", "must be present or absent")
		}
		if rp.Selection != "" && rp.Selection != "current" && rp.Selection != "accepted" {
			return Node{}, fail(pp+".selection", "must be current or accepted")
		}
		if _, err := c.prompt(pp+".prompt", rp.Prompt); err != nil {
			return Node{}, err
		}
	}
	if dc := n.DescendantContext; dc != nil {
		dp := np + ".descendant_context"
		closure := c.childClosure(typeName)
		if len(closure) == 0 {
			return Node{}, fail(dp, "card type %q permits no child types", typeName)
		}
		for i, rn := range dc.Records {
			found := false
			for t := range closure {
				if _, ok := c.cfg.CardTypes[t].Records[rn]; ok {
					found = true
				}
			}
			if !found {
				return Node{}, fail(fmt.Sprintf("%s.records[%d]", dp, i), "no descendant card type of %q declares record %q", typeName, rn)
			}
		}
		out.DescendantRecords = slices.Clone(dc.Records)
		out.RequireUnchanged = dc.RequireUnchangedUntilAccept
	}
	if len(n.Edges) == 0 {
		return Node{}, fail(np+".edges", "at least one outcome edge is required")
	}
	out.Outcomes = sorted(n.Edges)
	for _, o := range out.Outcomes {
		if !config.ValidName(o) {
			return Node{}, fail(np+".edges."+o, "outcome names use a-z, 0-9, '_' and '-'")
		}
	}
	if out.Kind == NodeAgent {
		out.EmitResult = emitResultSchema(out)
	}
	return out, nil
}

func cut(s string) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

func dataField(p, name string, d config.DataInput) (DataField, error) {
	if !config.ValidName(name) {
		return DataField{}, fail(p, "field names use a-z, 0-9, '_' and '-'")
	}
	switch d.Type {
	case "enum":
		if len(d.Enum) == 0 {
			return DataField{}, fail(p+".enum", "an enum needs at least one value")
		}
		if d.Min != nil || d.Max != nil {
			return DataField{}, fail(p, "an enum takes no min/max")
		}
		for i, v := range d.Enum {
			if slices.Index(d.Enum, v) != i {
				return DataField{}, fail(fmt.Sprintf("%s.enum[%d]", p, i), "duplicate value %q", v)
			}
		}
	case "integer", "number":
		if d.Enum != nil {
			return DataField{}, fail(p+".enum", "only enum fields take enum")
		}
		if d.Min != nil && d.Max != nil && *d.Min > *d.Max {
			return DataField{}, fail(p, "min is greater than max")
		}
	case "string", "boolean":
		if d.Enum != nil || d.Min != nil || d.Max != nil {
			return DataField{}, fail(p, "%s fields take only type", d.Type)
		}
	default:
		return DataField{}, fail(p+".type", "must be enum, integer, number, string or boolean, not %q", d.Type)
	}
	return DataField{Type: d.Type, Enum: slices.Clone(d.Enum), Min: d.Min, Max: d.Max}, nil
}

// emitResultSchema is the JSON schema of a node's emit_result parameters:
// outcome is one of the node's edge outcomes, summary is required text and
// data (when the node declares data inputs) carries every typed field.
func emitResultSchema(n Node) json.RawMessage {
	props := map[string]any{
		"outcome": map[string]any{"type": "string", "enum": n.Outcomes},
		"summary": map[string]any{"type": "string", "minLength": 1, "maxLength": 4000},
	}
	required := []string{"outcome", "summary"}
	if len(n.DataFields) > 0 {
		dprops := map[string]any{}
		for _, name := range sorted(n.DataFields) {
			f := n.DataFields[name]
			s := map[string]any{}
			switch f.Type {
			case "enum":
				s["type"], s["enum"] = "string", f.Enum
			default:
				s["type"] = f.Type
				if f.Min != nil {
					s["minimum"] = *f.Min
				}
				if f.Max != nil {
					s["maximum"] = *f.Max
				}
			}
			dprops[name] = s
		}
		props["data"] = map[string]any{
			"type": "object", "additionalProperties": false,
			"properties": dprops, "required": sorted(n.DataFields),
		}
		required = append(required, "data")
	}
	schema := map[string]any{
		"type": "object", "additionalProperties": false,
		"properties": props, "required": required,
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // only maps, strings and numbers
	}
	return b
}
