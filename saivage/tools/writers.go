package tools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/workflow"
)

// checkWriterBinding is the binding half of the Git workflow's canonical
// provider identity check (the declaration half is workflow's
// checkGitWriters): each command-backed, quality or MCP writer bound for
// the caller's agent must have been declared for that agent, and every
// provider it would reach now must be one the compiled source policy
// recorded. The bound surface never exceeds the declared one.
func checkWriterBinding(names []string, env *Env) error {
	if env.Workflows == nil || env.Workflows.Git() == nil {
		return nil
	}
	pol, agent := env.Workflows.Git(), env.Caller.Agent
	for _, n := range names {
		if !workflow.IsWriter(n) {
			continue
		}
		known, declared := pol.WriterProviders(agent, n)
		if !declared {
			return fmt.Errorf("bind %s for agent %s: the Git workflow's source policy does not declare this writer for %s, so it cannot be bound", n, agent, agent)
		}
		bound, err := env.writerProviders(n)
		if err != nil {
			return fmt.Errorf("bind %s for agent %s: %w", n, agent, err)
		}
		for _, id := range bound {
			if !slices.Contains(known, id) {
				return fmt.Errorf("bind %s for agent %s: provider %s is not one the Git workflow's source policy declared (%s); declare it in config.yaml and restart",
					n, agent, id, strings.Join(known, ", "))
			}
		}
	}
	return nil
}

// writerProviders are the canonical identities of the providers writer n
// would reach in this environment.
func (e *Env) writerProviders(n string) ([]string, error) {
	switch {
	case n == "run_command":
		return []string{workflow.ProviderProcess}, nil
	case workflow.QualityProvider(n) != "":
		return []string{workflow.QualityProvider(n)}, nil
	case e.MCP == nil:
		return nil, nil
	}
	return e.MCP.Providers()
}

// Providers returns the canonical provider identity of every server the
// manager runs (config.yaml and dynamic ones alike).
func (m *MCPServers) Providers() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name, sc := range m.cfgs {
		id, err := workflow.MCPProvider(name, sc.Command, sc.Args, sc.URL)
		if err != nil {
			return nil, fmt.Errorf("MCP server %q has no canonical provider identity: %w", name, err)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}
