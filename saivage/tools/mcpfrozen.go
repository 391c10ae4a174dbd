package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/mcpbridge"
)

// ErrMCPCatalogFrozen is the refusal of a catalog that grew beyond the one
// a frozen manager bound for a server.
var ErrMCPCatalogFrozen = errors.New("the Git workflow is on (git_workflow.enabled: true), so an MCP server's tools are pinned to the catalog bound when it first became ready: new tools and changed schemas stay unavailable until a restart of saivage")

// mcpPin is a frozen manager's bound catalog of one server: the
// fingerprint of each tool's whole schema, by tool name.
type mcpPin map[string]string

func toolFingerprint(s agent.ToolSpec) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// localSpec is a bridge tool's spec under its name on its own server.
func localSpec(t agent.Tool) agent.ToolSpec {
	s := t.Spec()
	_, s.Name, _ = mcpbridge.SplitToolName(s.Name)
	return s
}

// exposedLocked returns the tools of bridge b that callers may use. A
// normal manager exposes the server's current listing. A frozen manager
// pins the listing it first sees from the ready server and from then on
// exposes only pinned tools whose schema is unchanged: a refresh, a
// tools/list_changed re-listing, a reconnect or a restart can narrow the
// surface but never enlarge it. m.mu is held.
func (m *MCPServers) exposedLocked(name string, b *mcpbridge.Bridge) []agent.Tool {
	all := b.Tools()
	if !m.frozen {
		return all
	}
	pin, ok := m.pins[name]
	if !ok {
		if b.Status()[0].State != mcpbridge.StateReady {
			return nil
		}
		pin = mcpPin{}
		for _, t := range all {
			s := localSpec(t)
			pin[s.Name] = toolFingerprint(s)
		}
		m.pins[name] = pin
	}
	var out []agent.Tool
	for _, t := range all {
		s := localSpec(t)
		if fp, ok := pin[s.Name]; ok && fp == toolFingerprint(s) {
			out = append(out, t)
		}
	}
	return out
}

// exposed is exposedLocked taking m.mu.
func (m *MCPServers) exposed(name string, b *mcpbridge.Bridge) []agent.Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exposedLocked(name, b)
}

// refuseEnlargement compares a frozen manager's pin of server name with
// the server's current listing after action (a refresh or a start). Tools
// the server no longer lists leave the pin (removals narrow); new tools
// and changed schemas are refused, naming them, and stay unavailable.
func (m *MCPServers) refuseEnlargement(action, name string, b *mcpbridge.Bridge) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.frozen {
		return nil
	}
	m.exposedLocked(name, b) // binds the pin if this is the first ready listing
	pin := m.pins[name]
	listed := map[string]string{}
	for _, t := range b.Tools() {
		s := localSpec(t)
		listed[s.Name] = toolFingerprint(s)
	}
	for tool := range pin {
		if _, ok := listed[tool]; !ok {
			delete(pin, tool)
		}
	}
	var added, changed []string
	for tool, fp := range listed {
		switch bound, ok := pin[tool]; {
		case !ok:
			added = append(added, tool)
		case bound != fp:
			changed = append(changed, tool)
		}
	}
	if len(added)+len(changed) == 0 {
		return nil
	}
	slices.Sort(added)
	slices.Sort(changed)
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "new tools "+strings.Join(added, ", "))
	}
	if len(changed) > 0 {
		parts = append(parts, "changed schemas of "+strings.Join(changed, ", "))
	}
	return fmt.Errorf("%s MCP server %q: its listing now has %s, refused: %w", action, name, strings.Join(parts, "; "), ErrMCPCatalogFrozen)
}
