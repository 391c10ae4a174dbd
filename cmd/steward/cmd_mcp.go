package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServerFactory builds one of Steward's own MCP connectors.
type mcpServerFactory func(ctx context.Context, env *cliEnv) (*mcp.Server, error)

// mcpServers holds the connectors runnable as `steward mcp NAME`, filled by
// registerMCP calls in init functions of this package's cmd_*.go files.
var mcpServers = map[string]mcpServerFactory{}

func registerMCP(name string, f mcpServerFactory) {
	if _, dup := mcpServers[name]; dup {
		panic("steward: duplicate MCP connector " + name)
	}
	mcpServers[name] = f
}

func mcpNames() []string {
	names := make([]string, 0, len(mcpServers))
	for n := range mcpServers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	register(&command{
		Name:    "mcp",
		Summary: "run one of Steward's connectors as an MCP server on stdio",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "mcp", "NAME", fmt.Sprintf(
				"Runs a Steward connector as an MCP server speaking JSON-RPC on stdin/stdout, as the host\n"+
					"spawns it; any MCP client (another agent, a desktop app) can use it too.\n\nConnectors: %s",
				strings.Join(mcpNames(), ", ")))
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			if fs.NArg() != 1 {
				fs.Usage()
				return errUsage
			}
			factory, ok := mcpServers[fs.Arg(0)]
			if !ok {
				return fmt.Errorf("unknown connector %q (have: %s)", fs.Arg(0), strings.Join(mcpNames(), ", "))
			}
			server, err := factory(ctx, env)
			if err != nil {
				return fmt.Errorf("start connector %s: %w", fs.Arg(0), err)
			}
			return server.Run(ctx, &mcp.StdioTransport{})
		},
	})
}
