package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
)

// ownChildEnv is the environment Steward gives its own child processes
// (connectors, scheduler jobs) on top of the allow-listed basics. A child
// reads STEWARD_HOME/config.env itself; it is also given the settings of
// this process's environment that Steward knows, so that a value set only
// in the environment reaches it too, but no secret besides the gateway key.
func ownChildEnv(cfg *config.Config, gatewayURL, gatewayKey string) map[string]string {
	env := map[string]string{"STEWARD_HOME": cfg.Home, "GATEWAY_BASE_URL": gatewayURL}
	if gatewayKey != "" {
		env["GATEWAY_API_KEY"] = gatewayKey
	}
	for _, v := range config.Vars {
		if _, set := env[v.Name]; set || v.Secret {
			continue
		}
		if val, ok := os.LookupEnv(v.Name); ok {
			env[v.Name] = val
		}
	}
	return env
}

// connectorServers returns the MCP servers the host starts: Steward's own
// connectors (this binary, `steward mcp NAME`) and the user's servers from
// STEWARD_HOME/mcp.json. A malformed mcp.json or a user server that takes a
// connector's name stops start-up.
func connectorServers(cfg *config.Config, gatewayURL, gatewayKey string) ([]mcpbridge.ServerConfig, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the steward binary for its connectors: %w", err)
	}
	env := ownChildEnv(cfg, gatewayURL, gatewayKey)
	var servers []mcpbridge.ServerConfig
	own := map[string]bool{}
	for _, name := range mcpNames() {
		own[name] = true
		servers = append(servers, mcpbridge.ServerConfig{Name: name, Command: self, Args: []string{"mcp", name}, Env: env})
	}
	path := filepath.Join(cfg.Home, "mcp.json")
	user, err := mcpbridge.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	for _, s := range user {
		if own[s.Name] {
			return nil, fmt.Errorf("%s: server %q has the name of a Steward connector; rename it", path, s.Name)
		}
		servers = append(servers, s)
	}
	return servers, nil
}
