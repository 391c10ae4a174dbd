package main

import (
	"context"
	"os"

	"github.com/agentstack/agentstack/steward/connectors/shell"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func init() {
	registerMCP("shell", func(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
		cfg, err := env.Config()
		if err != nil {
			return nil, err
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		r := shell.NewRunner(shell.Options{Guard: newPathGuard(cfg), Home: home})
		return shell.NewServer(r, version), nil
	})
}
