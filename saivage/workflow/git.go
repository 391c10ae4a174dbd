package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
)

// CorrectionNode is the generated node name of the Git correction
// participant in each source-delivering card type's state table.
const CorrectionNode = "git-correction"

// Node purposes, explicit in the compiled contract (never inferred from
// prompt text).
const (
	PurposeProduct    = "product"
	PurposeCorrection = "correction"
)

// commandTools are the tools that write files outside the runtime's
// source-admission gate; a global-session agent may not hold them while
// the native Git workflow is on.
var commandTools = []string{"run_command", "wait_process", "kill_process", "mcp_tool_call", "mcp_server_control", "mcp_tools"}

// GitPolicy is the compiled native Git workflow (nil when it is off).
type GitPolicy struct {
	DeliveryBranch string   `json:"delivery_branch"`
	RefNamespace   string   `json:"private_ref_namespace"`
	ExcludedPaths  []string `json:"excluded_paths"`
	SourceRoots    []string `json:"source_roots"`
	Integration    string   `json:"integration"`
	// Preservation is {interrupted_rebase, source_checkpoint}.
	Preservation [2]string `json:"preservation"`
	// Reviews maps a source-delivering card type to its approving review.
	Reviews map[string]ReviewBinding `json:"review_bindings"`
	// CorrectionAgent runs the generated correction node.
	CorrectionAgent string `json:"correction_agent"`
	// Digest identifies this exact policy; a commissioned root records it
	// and a later start must compile the same digest.
	Digest string `json:"-"`
	// writers are the canonical provider identities of each agent's
	// declared writer tools (writers.go); not part of the digest, since a
	// changed MCP declaration is a restart, not a new commissioning.
	writers map[string]map[string][]string
}

// ReviewBinding is a card type's approving review: the node and the
// outcome or case id whose result approves the card's source.
type ReviewBinding struct {
	Node            string `json:"node"`
	ApprovedOutcome string `json:"approved_outcome"`
}

// Git returns the compiled Git policy, or nil when the workflow is off.
func (s *Set) Git() *GitPolicy { return s.git }

// Delivers reports whether cards of the type deliver reviewed source.
func (g *GitPolicy) Delivers(cardType string) bool {
	if g == nil {
		return false
	}
	_, ok := g.Reviews[cardType]
	return ok
}

// Approves reports whether a result of node with outcome and routed case
// id approves the card's source under the type's review binding.
func (g *GitPolicy) Approves(cardType, node, outcome, caseID string) bool {
	if g == nil {
		return false
	}
	b, ok := g.Reviews[cardType]
	return ok && b.Node == node && (b.ApprovedOutcome == caseID || caseID == "" && b.ApprovedOutcome == outcome)
}

// gitPolicy compiles the ON section (config.Validate has checked shapes).
func (c *compiler) gitPolicy() (*GitPolicy, error) {
	g := c.cfg.GitWorkflow
	if !c.cfg.GitOn() {
		return nil, nil
	}
	p := &GitPolicy{DeliveryBranch: g.DeliveryBranch, RefNamespace: g.RefNamespace(), ExcludedPaths: slices.Clone(g.ExcludedPaths),
		SourceRoots: g.Roots(), Integration: g.IntegrationMode(), Preservation: [2]string{g.RebasePreservation(), g.CheckpointPreservation()},
		Reviews: map[string]ReviewBinding{}, CorrectionAgent: g.Correction.Agent}
	if p.ExcludedPaths == nil {
		p.ExcludedPaths = []string{}
	}
	slices.Sort(p.ExcludedPaths)
	for ct, b := range g.ReviewBindings {
		p.Reviews[ct] = ReviewBinding{Node: b.Node, ApprovedOutcome: b.ApprovedOutcome}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	p.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return p, nil
}

// checkGitAgents applies the ON rules to the compiled agents: global
// agents hold no command or MCP writers.
func (c *compiler) checkGitAgents(agents map[string]Agent) error {
	for _, name := range sorted(agents) {
		a := agents[name]
		if a.Session != "global" {
			continue
		}
		for i, t := range a.Tools {
			if slices.Contains(commandTools, t) {
				return fail("agents."+name+".tools["+strconv.Itoa(i)+"]", "tool %q writes files outside the source gate, which a global agent may not hold while git_workflow is enabled", t)
			}
		}
	}
	return nil
}

// reviewBinding checks a card type's binding against its compiled table:
// an agent node with a done route whose case id or outcome approves.
func (c *compiler) reviewBinding(typeName string, t *Table) error {
	b := c.cfg.GitWorkflow.ReviewBindings[typeName]
	bp := "git_workflow.review_bindings." + typeName
	n, ok := t.nodes[b.Node]
	if !ok || n.Kind != NodeAgent {
		return fail(bp+".node", "node %q of %s is not an agent node", b.Node, typeName)
	}
	st, _ := t.State("node:" + b.Node)
	for _, tr := range st.Transitions {
		if tr.CaseID == b.ApprovedOutcome || tr.CaseID == "" && tr.Outcome == b.ApprovedOutcome {
			if tr.Target != "terminal:DONE" {
				return fail(bp+".approved_outcome", "%q of node %s routes to %s; an approving review must finish the card DONE", b.ApprovedOutcome, b.Node, tr.Target)
			}
			return nil
		}
	}
	return fail(bp+".approved_outcome", "node %s of %s has no outcome or case %q", b.Node, typeName, b.ApprovedOutcome)
}

// correctionNode generates the correction participant of a
// source-delivering card type: the correction agent with the correction
// prompt; done returns to the saved entry node, blocked blocks the card.
func (c *compiler) correctionNode(t *Table) error {
	g := c.cfg.GitWorkflow.Correction
	a := c.agents[g.Agent]
	pr, err := c.prompt("git_workflow.correction.prompt", g.Prompt)
	if err != nil {
		return err
	}
	cp, err := c.prompt("git_workflow.correction.correction_prompt", g.CorrectionPrompt)
	if err != nil {
		return err
	}
	n := Node{Name: CorrectionNode, Kind: NodeAgent, Purpose: PurposeCorrection, Agent: g.Agent, Prompt: pr, CorrectionPrompt: cp,
		Tools:      slices.DeleteFunc(slices.Clone(a.BoundTools()), func(s string) bool { return s == "create_card" }),
		DataFields: map[string]DataField{}, Outcomes: []string{"blocked", "done"}, Records: map[string]RecordUse{}}
	n.EmitResult = emitResultSchema(n)
	t.nodes[CorrectionNode] = n
	t.index["node:"+CorrectionNode] = len(t.states)
	t.states = append(t.states, State{ID: "node:" + CorrectionNode, Kind: StateNode, Name: CorrectionNode, Transitions: []Transition{
		{Variant: VariantOutcome, Outcome: "blocked", Target: "terminal:BLOCKED"},
		{Variant: VariantOutcome, Outcome: "done", Target: ReturnTarget},
	}})
	if !slices.Contains(t.agents, g.Agent) {
		t.agents = append(t.agents, g.Agent)
		slices.Sort(t.agents)
	}
	return nil
}

// ReturnTarget is the generated correction node's done target: the node
// whose entry the correction interrupted (the saved entry), verified by
// the runtime before it returns there.
const ReturnTarget = "return:saved-entry"
