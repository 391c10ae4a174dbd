// Package workflow compiles a Saivage configuration into one immutable state
// table per card type and validates it structurally: reachability, a path to
// a terminal from every node, sources for exported records, reachable
// promotions, known agents, tools and models, record authority and the
// closure of descendant context. Compilation reads the configuration and
// prompt files only; it has no network, process or generated-state effects.
//
// A compiled table also evaluates its transitions (route.go): the entry an
// activation starts in, the edge a node's accepted result takes (a direct
// outcome, else the first matching typed case, else otherwise, with its
// pending-notifications alternative), where that edge leads (a node, a
// terminal or the correction's return to the saved entry) and the values of
// a node's literal and predecessor-fact inputs. Evaluation is pure; the
// runtime reads the facts, asks the table and performs the I/O.
package workflow

import (
	"encoding/json"
	"slices"
)

// StateKind classifies a state of a compiled table.
type StateKind string

// State kinds. A card rests in the ready state; a lifecycle entry starts a
// node; nodes route to nodes or terminals.
const (
	StateReady    StateKind = "ready"
	StateEntry    StateKind = "entry"
	StateNode     StateKind = "node"
	StateTerminal StateKind = "terminal"
)

// Lifecycle entries, in declaration order.
var Entries = []string{"BACKLOG", "CHANGED", "BLOCKED", "STOPPED"}

// Terminals a node may route to.
var Terminals = []string{"DONE", "FAILED", "BLOCKED"}

// Variant is the semantic kind of a transition.
type Variant string

// Transition variants.
const (
	// VariantLifecycle leaves ready for an entry, selected by card status.
	VariantLifecycle Variant = "lifecycle"
	// VariantEntry starts the entry's node.
	VariantEntry Variant = "entry"
	// VariantOutcome routes a result outcome directly.
	VariantOutcome Variant = "outcome"
	// VariantCase routes a result outcome when its condition matches; the
	// first matching case of an outcome wins.
	VariantCase Variant = "case"
	// VariantOtherwise routes a result outcome when no case matched.
	VariantOtherwise Variant = "otherwise"
	// VariantPendingNotifications replaces a DONE route while notifications
	// are pending for the designated recipient.
	VariantPendingNotifications Variant = "pending_notifications"
)

// Prompt is a prompt reference with its text, loaded at compile time.
type Prompt struct {
	Reference     string `json:"reference"`
	Text          string `json:"-"`
	Compactable   bool   `json:"compactable,omitempty"`
	CompactionKey string `json:"compaction_key,omitempty"`
}

// Condition compares one typed result field with a value.
type Condition struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value"`
}

// Promotion selects the result promoted at a terminal.
type Promotion struct {
	Current    bool   `json:"current,omitempty"`
	LatestNode string `json:"latest_node,omitempty"`
}

// Transition is one edge of a state table, with exactly one target state ID.
type Transition struct {
	Variant       Variant           `json:"variant"`
	Outcome       string            `json:"outcome,omitempty"`
	CaseID        string            `json:"case_id,omitempty"`
	When          *Condition        `json:"when,omitempty"`
	Target        string            `json:"target"`
	Prompt        *Prompt           `json:"prompt,omitempty"`
	Promote       *Promotion        `json:"promote,omitempty"`
	ExportRecords []string          `json:"export_records,omitempty"`
	Inputs        map[string]string `json:"inputs,omitempty"`

	path string // configuration key path, for compile errors
}

// State is one state of a table.
type State struct {
	ID          string       `json:"id"`
	Kind        StateKind    `json:"kind"`
	Name        string       `json:"name"`
	Transitions []Transition `json:"transitions,omitempty"`
}

// NodeKind is agent or action.
type NodeKind string

// Node kinds.
const (
	NodeAgent  NodeKind = "agent"
	NodeAction NodeKind = "action"
)

// RecordUse is a node's use of a record.
type RecordUse struct {
	Mode string `json:"mode"`
	Gate string `json:"gate"`
}

// Writes reports whether the mode writes the record directly.
func (r RecordUse) Writes() bool { return r.Mode == "clean" || r.Mode == "continue" }

// DataField is one typed field of a node's emit_result data.
type DataField struct {
	Type string   `json:"type"`
	Enum []string `json:"enum,omitempty"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
}

// Node is a compiled workflow node.
type Node struct {
	Name string   `json:"name"`
	Kind NodeKind `json:"kind"`
	// Purpose is product for authored nodes and correction for the
	// generated Git correction participant, whose results never become
	// accepted product results.
	Purpose string `json:"purpose"`
	// Agent nodes.
	Agent            string               `json:"agent,omitempty"`
	Tools            []string             `json:"tools,omitempty"`
	Prompt           *Prompt              `json:"prompt,omitempty"`
	CorrectionPrompt *Prompt              `json:"correction_prompt,omitempty"`
	DataFields       map[string]DataField `json:"data_fields,omitempty"`
	// Action nodes.
	Action          string         `json:"action,omitempty"`
	ContractVersion int            `json:"contract_version,omitempty"`
	ActionConfig    map[string]any `json:"action_config,omitempty"`
	OutputRecord    string         `json:"output_record,omitempty"`
	// Both.
	Inputs            map[string]Input     `json:"inputs,omitempty"`
	Outcomes          []string             `json:"outcomes"`
	Records           map[string]RecordUse `json:"records,omitempty"`
	InitializeRecords []string             `json:"initialize_records,omitempty"`
	DescendantRecords []string             `json:"descendant_records,omitempty"`
	RequireUnchanged  bool                 `json:"require_unchanged_until_accept,omitempty"`
	// EmitResult is the JSON schema of the node's generated emit_result tool
	// parameters (agent nodes only).
	EmitResult json.RawMessage `json:"emit_result,omitempty"`
}

// Input is a node input: a literal value or a predecessor fact
// "<node>.<field>".
type Input struct {
	Literal any    `json:"literal,omitempty"`
	Source  string `json:"source,omitempty"`
}

// RecordSpec is a declared record of a card type.
type RecordSpec struct {
	Name      string `json:"name"`
	Format    string `json:"format"`
	Bootstrap bool   `json:"bootstrap,omitempty"`
	// Initial is the baseline content (revision 0), from the initialization
	// template or empty.
	Initial string `json:"-"`
}

// Table is the immutable compiled state table of one card type. Its
// accessors return copies.
type Table struct {
	cardType   string
	states     []State
	index      map[string]int
	nodes      map[string]Node
	records    []RecordSpec
	childTypes []string
	recipient  string
	agents     []string
	hook       *Hook
}

// CardType returns the card type the table belongs to.
func (t *Table) CardType() string { return t.cardType }

// States returns every state: ready, entries, nodes (sorted) and terminals.
func (t *Table) States() []State {
	out := make([]State, len(t.states))
	for i, s := range t.states {
		out[i] = s
		out[i].Transitions = slices.Clone(s.Transitions)
	}
	return out
}

// State returns the state with the given ID ("ready", "entry:BACKLOG",
// "node:plan", "terminal:DONE").
func (t *Table) State(id string) (State, bool) {
	i, ok := t.index[id]
	if !ok {
		return State{}, false
	}
	s := t.states[i]
	s.Transitions = slices.Clone(s.Transitions)
	return s, true
}

// Node returns a compiled node by name.
func (t *Table) Node(name string) (Node, bool) {
	n, ok := t.nodes[name]
	return n, ok
}

// NodeNames returns the node names in sorted order.
func (t *Table) NodeNames() []string {
	names := make([]string, 0, len(t.nodes))
	for n := range t.nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Records returns the declared records sorted by name.
func (t *Table) Records() []RecordSpec { return slices.Clone(t.records) }

// Record returns one declared record.
func (t *Table) Record(name string) (RecordSpec, bool) {
	i, ok := slices.BinarySearchFunc(t.records, name, func(r RecordSpec, n string) int {
		switch {
		case r.Name < n:
			return -1
		case r.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return RecordSpec{}, false
	}
	return t.records[i], true
}

// PermittedChildTypes returns the types a card of this type may create.
func (t *Table) PermittedChildTypes() []string { return slices.Clone(t.childTypes) }

// PermitsChild reports whether childType may be created under this type.
func (t *Table) PermitsChild(childType string) bool { return slices.Contains(t.childTypes, childType) }

// NotificationRecipient returns the designated recipient node, or "".
func (t *Table) NotificationRecipient() string { return t.recipient }

// SessionAgents returns the distinct card-session agents of this type's
// nodes, sorted; each card of the type has one session per agent.
func (t *Table) SessionAgents() []string { return slices.Clone(t.agents) }
