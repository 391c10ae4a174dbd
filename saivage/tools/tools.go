// Package tools implements the agent tools of the Saivage runtime: workspace
// files and search, patches, managed processes, card and record tools,
// version evidence, bounded webfetch, notifications and the Analyst's
// runtime operations. A tool's power comes from the configuration and the
// caller's scope (Caller), never from the tool's name: the same create_card
// is parent-scoped for a Planner and project-wide for the Analyst.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Caller is the scope a set of tools is bound to.
type Caller struct {
	// Agent is the configured agent name.
	Agent string
	// Card is the card the caller works on; "" for a global caller (the
	// Analyst).
	Card string
	// Node is the workflow node being executed (card callers).
	Node string
	// WorkRoot is the card work directory exported to commands as
	// SAIVAGE_CARD_WORK_ROOT; card callers only.
	WorkRoot string
	// DraftRecords are the current card's records with a draft opened for
	// this node (clean or continue mode). A card caller may write only
	// these, and only when it holds the write tool.
	DraftRecords []string
	// RecordWrites reports whether the agent's record_writes globs match a
	// record name (direct acceptance for global callers).
	RecordWrites func(name string) bool
	// Tools are the tool names bound for the caller (write authority on
	// records needs the write tool even when edit is used).
	Tools []string
	// Principal, when set, is the author label of a non-model caller of the
	// Analyst's operations ("operator", "external:mcp"): it names the
	// credential used, not a verified client identity.
	Principal string
}

// Has reports whether the caller holds tool name.
func (c Caller) Has(name string) bool { return slices.Contains(c.Tools, name) }

// Global reports whether the caller is a global session.
func (c Caller) Global() bool { return c.Card == "" }

// Author is the author label written into records and cards.
func (c Caller) Author() string {
	if c.Principal != "" {
		return c.Principal
	}
	return "agent:" + c.Agent
}

// Status is the runtime observation tools report.
type Status struct {
	Status      string   `json:"status"`
	RunID       string   `json:"run_id,omitempty"`
	Activations []string `json:"activations,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// Runtime is the Supervisor surface used by the Analyst's runtime tools and
// by intervention admission.
type Runtime interface {
	Status() Status
	Start(ctx context.Context) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	Stop(ctx context.Context) error
	// InterventionAllowed returns nil when the runtime is stopped or fully
	// paused, else an error saying why card maintenance must wait.
	InterventionAllowed() error
	// Reconfigure validates a complete configuration candidate and
	// publishes it for the next start.
	Reconfigure(ctx context.Context, yaml string) error
}

// ChildOutcome is what a child activation ended with.
type ChildOutcome struct {
	Card    string            `json:"card"`
	Status  string            `json:"status"`
	Outcome string            `json:"outcome,omitempty"`
	Summary string            `json:"summary,omitempty"`
	Data    map[string]any    `json:"data,omitempty"`
	Exports map[string]int    `json:"exported_records,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Extra   map[string]string `json:"-"`
}

// Activator runs a child card's workflow for its parent's Planner and
// returns when the child reaches an outcome.
type Activator interface {
	ActivateChild(ctx context.Context, parent, child string) (ChildOutcome, error)
}

// Hinter receives freshness hints after publications (operator live sync).
type Hinter interface {
	Hint(topic, key string)
}

// EventLog appends app log events.
type EventLog interface {
	LogEvent(typ string, data map[string]any) error
}

// Env is everything the tools of one caller need.
type Env struct {
	// Root is the project directory (absolute, symlinks resolved).
	Root string
	// StateDir is Root/.saivage.
	StateDir  string
	Cards     *cards.Store
	Workflows *workflow.Set
	Config    *config.Config
	Processes *Processes
	// RecordMu serialises record mutations across callers.
	RecordMu *sync.Mutex
	Caller   Caller
	Runtime  Runtime
	Children Activator
	Hints    Hinter
	Events   EventLog
	// Evidence serves the observation tools (runtime events, sessions).
	Evidence Evidence
	// MCP runs the configured outbound MCP servers.
	MCP *MCPServers
	// HTTPClient performs webfetch requests (default: a bounded client).
	HTTPClient *http.Client
	// WebSearch answers websearch; nil reports the tool unavailable.
	WebSearch WebSearcher
	// Retrieval serves the observed-collection tools; nil reports them
	// unavailable.
	Retrieval Retrieval
	// Quality runs the code-quality analyzers; nil reports the quality
	// tools unavailable.
	Quality QualityRunner
	// RestartServer schedules a restart of the server process; nil reports
	// restart_server unavailable.
	RestartServer func(ctx context.Context, reason string) error
	// Redact removes configured secrets from text the model sees.
	Redact func(string) string
	// Source checkpoints card callers' source (checkpoint_source); nil
	// when the native Git workflow is off.
	Source SourceCheckpointer
	// AfterActivation is called after activate_card returned (the Planner
	// observed fresh descendant state).
	AfterActivation func()
	// SourceGate admits a global caller's file writes under the native Git
	// workflow (required then); nil otherwise.
	SourceGate SourceGate
}

func (e *Env) redact(s string) string {
	if e.Redact != nil {
		return e.Redact(s)
	}
	return s
}

func (e *Env) hint(topic, key string) {
	if e.Hints != nil {
		e.Hints.Hint(topic, key)
	}
}

func (e *Env) logEvent(typ string, data map[string]any) {
	if e.Events != nil {
		_ = e.Events.LogEvent(typ, data)
	}
}

// factory builds one tool for env.
type factory func(env *Env) agent.Tool

var catalogue = map[string]factory{}

func register(name string, f factory) { catalogue[name] = f }

// Names returns the implemented tool names, sorted.
func Names() []string {
	out := make([]string, 0, len(catalogue))
	for n := range catalogue {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Build binds the named tools to env, in the given order. The workflow
// compiler admits only names this build provides, so a name without a
// factory is an error naming it, never a silent drop.
func Build(names []string, env *Env) ([]agent.Tool, error) {
	if err := requireSourceGate(names, env); err != nil {
		return nil, err
	}
	if err := checkWriterBinding(names, env); err != nil {
		return nil, err
	}
	bound := make([]agent.Tool, 0, len(names))
	var missing []string
	for _, n := range names {
		f, ok := catalogue[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		bound = append(bound, f(env))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("this build does not provide the tools %s", strings.Join(missing, ", "))
	}
	return bound, nil
}

// spec builds a ToolSpec with a JSON schema literal.
func spec(name, desc, schema string) agent.ToolSpec {
	return agent.ToolSpec{Name: name, Description: desc, Parameters: json.RawMessage(schema)}
}

// tool is a ToolFunc with decoded arguments.
func tool[A any](s agent.ToolSpec, fn func(ctx context.Context, a A) (agent.ToolResult, error)) agent.Tool {
	return agent.ToolFunc{ToolSpec: s, Fn: func(ctx context.Context, raw json.RawMessage) (agent.ToolResult, error) {
		var a A
		if err := decodeArgs(raw, &a); err != nil {
			return failf("invalid arguments for %s: %v", s.Name, err), nil
		}
		return fn(ctx, a)
	}}
}

func decodeArgs(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the arguments object")
	}
	return nil
}

// failf is an error result the model sees.
func failf(format string, args ...any) agent.ToolResult {
	return agent.ToolResult{Content: "Error: " + fmt.Sprintf(format, args...), IsError: true}
}

// ok is a plain success result.
func ok(text string) agent.ToolResult { return agent.ToolResult{Content: text} }

// jsonResult renders v as the model-visible content and as Data.
func jsonResult(v any) agent.ToolResult {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return failf("encode result: %v", err)
	}
	return agent.ToolResult{Content: string(b), Data: json.RawMessage(mustCompact(b))}
}

func mustCompact(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}
