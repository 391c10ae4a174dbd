package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Canonical provider identities of the built-in writers: capabilities that
// can change files outside the file tools (a command, a code-quality
// analyzer, an MCP server's tools). Observation and containment tools
// (wait_process, kill_process, mcp_tools) are not writers.
const (
	// ProviderProcess runs run_command's managed processes.
	ProviderProcess = "saivage:process"
	// providerQuality prefixes a code-quality analyzer's identity.
	providerQuality = "saivage:quality/"
	// providerMCP prefixes an MCP server's identity: "mcp:NAME=IDENTITY".
	providerMCP = "mcp:"
)

// mcpWriters are the tools that reach configured MCP servers' programs.
var mcpWriters = []string{"mcp_server_control", "mcp_tool_call"}

// IsWriter reports whether tool is a command-backed, quality or MCP
// writer, whose provider identity the Git workflow checks.
func IsWriter(tool string) bool {
	return tool == "run_command" || slices.Contains(mcpWriters, tool) || knownQualityTools[tool]
}

// QualityProvider is the canonical provider identity of quality tool name
// (code_quality_ANALYZER), "" when name is not one.
func QualityProvider(name string) string {
	a, ok := strings.CutPrefix(name, "code_quality_")
	if !ok || a == "" {
		return ""
	}
	return providerQuality + a
}

// MCPProvider is the canonical provider identity of MCP server name: a
// stdio server's program by its absolute, symlink-resolved path (an
// existing executable file) and a digest of its exact arguments, an HTTP
// server by its URL with the scheme and host lower-cased (user info and
// query, which may hold credentials, only as a digest). A bare program name looked up
// in PATH is not canonical: PATH decides what it runs.
func MCPProvider(name, command string, args []string, rawURL string) (string, error) {
	if command != "" {
		if !filepath.IsAbs(command) {
			return "", fmt.Errorf("command %q is not an absolute path, so which program runs depends on PATH", command)
		}
		real, err := filepath.EvalSymlinks(command)
		if err != nil {
			return "", fmt.Errorf("command %s cannot be resolved: %w", command, err)
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("command %s is not an executable file (%s)", command, real)
		}
		id := providerMCP + name + "=stdio:" + strconv.Quote(real)
		if len(args) > 0 {
			q := make([]string, len(args))
			for i, a := range args {
				q[i] = strconv.Quote(a)
			}
			id += " args " + digest(strings.Join(q, " "))
		}
		return id, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("the url is not an http(s) URL")
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	id := providerMCP + name + "=" + u.Scheme + "://" + u.Host + u.EscapedPath()
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		id += " " + digest(u.String())
	}
	return id, nil
}

// digest stands for identity parts that may carry credentials (arguments,
// URL user info and query): identities appear in refusals.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// WriterProviders returns the canonical provider identities the compiled
// source policy knows for agent's writer tool (nil when the agent was not
// declared with it): the bound surface may not exceed them.
func (g *GitPolicy) WriterProviders(agent, tool string) ([]string, bool) {
	if g == nil {
		return nil, false
	}
	p, ok := g.writers[agent][tool]
	return p, ok
}

// checkGitWriters is declaration-time validation under the Git workflow:
// every writer an agent selects must have a canonical provider identity,
// recorded in the policy for the check at binding.
func (c *compiler) checkGitWriters(p *GitPolicy, agents map[string]Agent) error {
	p.writers = map[string]map[string][]string{}
	for _, name := range sorted(agents) {
		a := agents[name]
		for _, t := range a.BoundTools() {
			if !IsWriter(t) {
				continue
			}
			var ids []string
			switch {
			case t == "run_command":
				ids = []string{ProviderProcess}
			case knownQualityTools[t]:
				ids = []string{QualityProvider(t)}
			default:
				for _, s := range sorted(c.cfg.MCPServers) {
					m := c.cfg.MCPServers[s]
					if m.Disabled {
						continue
					}
					id, err := MCPProvider(s, m.Command, m.Args, m.URL)
					if err != nil {
						return fail(c.toolPath(name, a, t), "tool %q would write through MCP server %q, whose provider is unknown to the Git workflow's source policy: %v; name the program by its absolute path (or disable the server)", t, s, err)
					}
					ids = append(ids, id)
				}
			}
			if p.writers[name] == nil {
				p.writers[name] = map[string][]string{}
			}
			p.writers[name][t] = ids
		}
	}
	return nil
}

// toolPath is the configuration path of agent's tool t.
func (c *compiler) toolPath(name string, a Agent, t string) string {
	if i := slices.Index(a.Tools, t); i >= 0 {
		return fmt.Sprintf("agents.%s.tools[%d]", name, i)
	}
	return fmt.Sprintf("agents.%s.quality_tools[%d]", name, slices.Index(a.QualityTools, t))
}
