// Package policy is Steward's deterministic tool policy: every tool the agent
// sees is wrapped so that it is allowed, gated behind the user's approval, or
// denied — decided by code and configuration, never by prompt text, so that
// injected content cannot redefine it.
package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/yamlstrict"
)

// Decision is what the policy does with a tool call.
type Decision string

// Decisions.
const (
	Allow Decision = "allow" // run at once
	Gate  Decision = "gate"  // ask the user first
	Deny  Decision = "deny"  // refuse without asking
)

// Rules are exact tool names per decision plus denied name prefixes.
type Rules struct {
	Allow        []string `yaml:"allow"`
	Gate         []string `yaml:"gate"`
	Deny         []string `yaml:"deny"`
	DenyPrefixes []string `yaml:"deny_prefixes"`
}

// BuiltinAllow lists the exceptions that run without a card although no
// trusted readOnlyHint says they only read: the host's own tools and the
// voice channel's call tools. Steward's connectors' reads are allowed by
// their MCP annotations (see Hints), not by name. A rule for an
// mcp__<server>__ tool applies only when server is one of Options.Connectors.
var BuiltinAllow = []string{
	// watches (observing or reducing background work)
	"create_watch", "stop_watch", "list_watches",
	// the voice channel's own call tools (its writes still ask, by voice)
	"mcp__voice__call_start", "mcp__voice__call_status", "mcp__voice__call_end", "mcp__voice__converse",
	"set_call_rate", // the active call's rate only
	// host tools; execute_action_step only dispatches: the step's own tool
	// goes through this policy (and its approval card) on the same turn
	"ask_user", "execute_action_step",
}

// BuiltinGate lists tools that must always ask, whatever a prefix or an
// annotation says.
var BuiltinGate = []string{"create_agent_watch", "mcp__shell__run_write",
	"mcp__wiki__wiki_write_page", "mcp__wiki__wiki_ingest", "mcp__wiki__wiki_rescan", "set_voice_defaults"}

// Hints reports what a tool's MCP server declared about it. The bridge
// (mcpbridge.Bridge) is one; StaticHints is a fixed one.
type Hints interface {
	// ReadOnlyHint reports whether tool is listed and whether its server
	// annotated it readOnlyHint.
	ReadOnlyHint(tool string) (readOnly, listed bool)
}

// StaticHints is a fixed set of tools annotated read-only, for a host whose
// tools are known up front (benchmarks, tests).
type StaticHints map[string]bool

// ReadOnlyHint implements Hints.
func (h StaticHints) ReadOnlyHint(tool string) (readOnly, listed bool) {
	readOnly, listed = h[tool]
	return readOnly, listed
}

// Options configures a Policy.
type Options struct {
	// User is the user's policy.yaml.
	User Rules
	// Connectors names the MCP servers that are Steward's own connector
	// registrations (steward mcp NAME) in this process. Built-in rules bind to
	// them, not to a name: a user's mcp.json server named like a connector
	// Steward does not run here (wiki, say) gets none of the built-in allows,
	// so its tools are gated. The host refuses user servers that take the
	// name of a registered connector, which keeps the names unambiguous.
	Connectors []string
	// Hints are the tools' MCP annotations. A tool of one of Connectors
	// that its server annotates readOnlyHint is allowed by default; the
	// same claim from any other server (a user's mcp.json) is not trusted,
	// so such a tool is gated. Nil: no tool is allowed by annotation.
	Hints Hints
}

// Policy decides tool calls.
type Policy struct {
	mu            sync.RWMutex // Replace swaps the rules of a running host
	user, builtin map[string]Decision
	denyPrefixes  []string
	own           map[string]bool // Options.Connectors
	hints         Hints
}

// Replace makes p decide as q does from now on (SIGHUP reloads policy.yaml
// this way, so every holder of p sees the new rules).
func (p *Policy) Replace(q *Policy) {
	q.mu.RLock()
	user, builtin, prefixes, own, hints := q.user, q.builtin, q.denyPrefixes, q.own, q.hints
	q.mu.RUnlock()
	p.mu.Lock()
	p.user, p.builtin, p.denyPrefixes, p.own, p.hints = user, builtin, prefixes, own, hints
	p.mu.Unlock()
}

// New combines the built-in rules for opts.Connectors and the host's own
// tools with the user's.
func New(opts Options) (*Policy, error) {
	user := opts.User
	if err := user.validate(); err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for _, c := range opts.Connectors {
		own[c] = true
	}
	p := &Policy{user: map[string]Decision{}, builtin: map[string]Decision{}, own: own, hints: opts.Hints}
	builtin := func(d Decision, names []string) {
		for _, n := range names {
			if server, _, ok := mcpbridge.SplitToolName(n); ok && !own[server] {
				continue // that connector is not Steward's here: the name may be anyone's
			}
			p.builtin[n] = d
		}
	}
	builtin(Allow, BuiltinAllow)
	builtin(Gate, BuiltinGate) // a gate wins over an allow
	for d, names := range map[Decision][]string{Allow: user.Allow, Gate: user.Gate, Deny: user.Deny} {
		for _, n := range names {
			p.user[n] = d
		}
	}
	p.denyPrefixes = append(p.denyPrefixes, user.DenyPrefixes...)
	return p, nil
}

func (r Rules) validate() error {
	var errs []error
	seen := map[string]string{}
	for list, names := range map[string][]string{"allow": r.Allow, "gate": r.Gate, "deny": r.Deny} {
		for _, n := range names {
			if strings.TrimSpace(n) == "" || n != strings.TrimSpace(n) {
				errs = append(errs, fmt.Errorf("%s: %q is not a tool name", list, n))
			}
			if other, dup := seen[n]; dup && other != list {
				errs = append(errs, fmt.Errorf("tool %q is in both %s and %s", n, other, list))
			}
			seen[n] = list
		}
	}
	for _, p := range r.DenyPrefixes {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, errors.New("deny_prefixes: an empty prefix would deny every tool"))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// Decide returns the decision for a tool: the user's exact rules, then the
// user's deny prefixes, then the built-in exact rules, then a registered
// connector's readOnlyHint (allow), then the default gate. The user's rules
// win over every default (a deny prefix closes a whole namespace).
func (p *Policy) Decide(tool string) Decision {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if d, ok := p.user[tool]; ok {
		return d
	}
	for _, pre := range p.denyPrefixes {
		if strings.HasPrefix(tool, pre) {
			return Deny
		}
	}
	if d, ok := p.builtin[tool]; ok {
		return d
	}
	if p.trustedRead(tool) {
		return Allow
	}
	return Gate
}

// trustedRead reports whether tool belongs to one of Steward's registered
// connectors and that connector annotated it readOnlyHint.
func (p *Policy) trustedRead(tool string) bool {
	if p.hints == nil {
		return false
	}
	server, _, ok := mcpbridge.SplitToolName(tool)
	if !ok || !p.own[server] {
		return false
	}
	ro, listed := p.hints.ReadOnlyHint(tool)
	return ro && listed
}

// LoadRules reads STEWARD_HOME/policy.yaml strictly. A missing file means no
// user rules; a malformed one is an error naming the file, which stops start-up.
func LoadRules(path string) (Rules, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Rules{}, nil
	}
	if err != nil {
		return Rules{}, fmt.Errorf("read policy %s: %w", path, err)
	}
	var r Rules
	if err := yamlstrict.Decode(b, &r); err != nil { // an empty file is no rules
		return Rules{}, fmt.Errorf("policy %s: %w", path, err)
	}
	if err := r.validate(); err != nil {
		return Rules{}, fmt.Errorf("policy %s: %w", path, err)
	}
	return r, nil
}
