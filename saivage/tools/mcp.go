package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/state"
)

// MCPStartBudget bounds a server's discovery: process or connection,
// initialize/initialized and every page of its tool list, under one budget.
const MCPStartBudget = 180 * time.Second

// MCPStatus is one configured outbound MCP server.
type MCPStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Autostart bool   `json:"autostart"`
	State     string `json:"state"` // not_started, starting, ready, failed, restarting, stopped
	Tools     int    `json:"tools"`
	LastError string `json:"last_error,omitempty"`
}

// MCPServers runs the project's configured outbound MCP servers (one
// mcpbridge.Bridge each, so each starts and stops on its own) and exposes
// them to the mcp_* tools. Disabled servers are not listed.
type MCPServers struct {
	mu      sync.Mutex
	cfgs    map[string]mcpbridge.ServerConfig
	auto    map[string]bool
	bridges map[string]*mcpbridge.Bridge
	log     *slog.Logger
	closed  bool
	dir     string
	// yaml names the config.yaml servers (disabled ones included), which
	// dynamic definitions cannot shadow.
	yaml map[string]bool
	// Dynamic definitions (see EnableDefinitions).
	defsPath string
	pub      *state.Publisher
	dynamic  map[string]MCPDefinition
	catalogs map[string]mcpCatalog
	// frozen refuses every change to the server set (see Freeze);
	// pins are the catalogs it bound, which survive stop and restart.
	frozen bool
	pins   map[string]mcpPin
	// fenced names the stdio servers stopped because a call was abandoned
	// at the invoke deadline, with the reason Status reports until the
	// next start.
	fenced map[string]string
	// StartBudget replaces MCPStartBudget when positive (tests).
	StartBudget time.Duration
	// InvokeDeadline replaces MCPInvokeDeadline when positive (tests).
	InvokeDeadline time.Duration
}

// stdioRoots is the MCP roots offered to a stdio server running in dir:
// the project directory.
func stdioRoots(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{dir}
}

func (m *MCPServers) startBudget() time.Duration {
	if m.StartBudget > 0 {
		return m.StartBudget
	}
	return MCPStartBudget
}

func (m *MCPServers) invokeDeadline() time.Duration {
	if m.InvokeDeadline > 0 {
		return m.InvokeDeadline
	}
	return MCPInvokeDeadline
}

// NewMCPServers prepares the enabled servers of cfg; commands run in dir.
func NewMCPServers(servers map[string]config.MCPServer, dir string, logger *slog.Logger) *MCPServers {
	m := &MCPServers{cfgs: map[string]mcpbridge.ServerConfig{}, auto: map[string]bool{}, bridges: map[string]*mcpbridge.Bridge{}, log: logger,
		dir: dir, yaml: map[string]bool{}, dynamic: map[string]MCPDefinition{}, catalogs: map[string]mcpCatalog{},
		pins: map[string]mcpPin{}, fenced: map[string]string{}}
	for name, s := range servers {
		m.yaml[name] = true
		if s.Disabled {
			continue
		}
		sc := mcpbridge.ServerConfig{Name: name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		if s.Command != "" {
			sc.Dir, sc.Roots = dir, stdioRoots(dir)
		}
		m.cfgs[name], m.auto[name] = sc, s.Autostart
	}
	return m
}

// StartAutostart starts the servers marked autostart without waiting.
func (m *MCPServers) StartAutostart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.cfgs {
		if m.auto[name] {
			m.startLocked(name)
		}
	}
}

func (m *MCPServers) startLocked(name string) *mcpbridge.Bridge {
	if b, ok := m.bridges[name]; ok {
		return b
	}
	b := mcpbridge.New(mcpbridge.Options{Servers: []mcpbridge.ServerConfig{m.cfgs[name]}, StartTimeout: m.startBudget(), Logger: m.log,
		ClientName: "saivage", MaxMessageBytes: MCPMaxWire})
	b.Start(context.Background())
	m.bridges[name] = b
	delete(m.fenced, name)
	return b
}

// Status lists the configured servers.
func (m *MCPServers) Status() []MCPStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []MCPStatus
	for _, name := range sortedNames(m.cfgs) {
		st := MCPStatus{Name: name, Transport: m.cfgs[name].Transport(), Autostart: m.auto[name], State: "not_started"}
		if b, ok := m.bridges[name]; ok {
			s := b.Status()[0]
			st.State, st.Tools, st.LastError = string(s.State), s.Tools, s.LastError
			if m.frozen {
				st.Tools = len(m.exposedLocked(name, b))
			}
		} else if reason, ok := m.fenced[name]; ok {
			st.State, st.LastError = "stopped", reason
		}
		out = append(out, st)
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (m *MCPServers) bridge(name string) (*mcpbridge.Bridge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cfgs[name]; !ok {
		return nil, fmt.Errorf("no enabled MCP server %q (configured: %v)", name, sortedNames(m.cfgs))
	}
	b, ok := m.bridges[name]
	if !ok {
		return nil, fmt.Errorf("MCP server %q is not started; start it with mcp_server_control", name)
	}
	return b, nil
}

// Control starts, stops or restarts a server, or reports its status.
// Starting waits for the first start attempt.
func (m *MCPServers) Control(ctx context.Context, name, action string) (MCPStatus, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return MCPStatus{}, fmt.Errorf("the server is shutting down")
	}
	if _, ok := m.cfgs[name]; !ok {
		m.mu.Unlock()
		return MCPStatus{}, fmt.Errorf("no enabled MCP server %q (configured: %v)", name, sortedNames(m.cfgs))
	}
	var stop *mcpbridge.Bridge
	switch action {
	case "status":
	case "stop", "restart":
		stop = m.bridges[name]
		delete(m.bridges, name)
		delete(m.catalogs, name)
	case "start":
	default:
		m.mu.Unlock()
		return MCPStatus{}, fmt.Errorf("action must be start, stop, restart or status, not %q", action)
	}
	m.mu.Unlock()
	if stop != nil {
		_ = stop.Close()
	}
	var started *mcpbridge.Bridge
	if action == "start" || action == "restart" {
		m.mu.Lock()
		b := m.startLocked(name)
		m.mu.Unlock()
		started = b
		// The bridge's own budget decides; the grace lets its verdict (ready
		// or "did not start within") arrive before this wait gives up.
		wctx, cancel := context.WithTimeout(ctx, m.startBudget()+10*time.Second)
		err := b.WaitStarted(wctx)
		cancel()
		if err != nil {
			return MCPStatus{}, err
		}
		m.ensureCatalog(name, b)
	}
	for _, st := range m.Status() {
		if st.Name == name {
			if started != nil {
				return st, m.refuseEnlargement(action, name, started)
			}
			return st, nil
		}
	}
	return MCPStatus{}, fmt.Errorf("no MCP server %q", name)
}

// Tools returns the tool specs of a started server.
func (m *MCPServers) Tools(name string) ([]agent.ToolSpec, error) {
	b, err := m.bridge(name)
	if err != nil {
		return nil, err
	}
	var out []agent.ToolSpec
	for _, t := range m.exposed(name, b) {
		out = append(out, localSpec(t))
	}
	return out, nil
}

// Call invokes one tool of a started server.
func (m *MCPServers) Call(ctx context.Context, name, tool string, args json.RawMessage) (agent.ToolResult, error) {
	b, err := m.bridge(name)
	if err != nil {
		return agent.ToolResult{}, err
	}
	want := mcpbridge.ToolName(name, tool)
	for _, t := range m.exposed(name, b) {
		if t.Spec().Name == want {
			if err := validateArgs(t.Spec().Parameters, args); err != nil {
				return failf("%s.%s: %v", name, tool, err), nil
			}
			deadline := m.invokeDeadline()
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			res, err := t.Call(cctx, args)
			if err != nil {
				if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
					return res, m.abandoned(name, tool, b, deadline)
				}
				return res, err
			}
			return projectResult(res), nil
		}
	}
	if slices.ContainsFunc(b.Tools(), func(t agent.Tool) bool { return t.Spec().Name == want }) {
		return agent.ToolResult{}, fmt.Errorf("MCP server %q tool %q is not in its bound catalog: %w", name, tool, ErrMCPCatalogFrozen)
	}
	return agent.ToolResult{}, fmt.Errorf("MCP server %q has no ready tool %q (see mcp_tools)", name, tool)
}

// abandoned reports a call ended at the invoke deadline. Over HTTP the
// abort is request-local and the connection stays. Over stdio the server
// may still be working on the abandoned request, so its connection admits
// nothing more: the server is stopped (its process contained and joined)
// and is not restarted automatically.
func (m *MCPServers) abandoned(name, tool string, b *mcpbridge.Bridge, deadline time.Duration) error {
	msg := fmt.Sprintf("MCP server %q tool %q did not answer within the %s invoke deadline; the call was abandoned", name, tool, deadline)
	m.mu.Lock()
	stdio := m.cfgs[name].Transport() == "stdio"
	fence := stdio && m.bridges[name] == b
	if fence {
		m.takeLocked(name)
		m.fenced[name] = msg + "; the server was stopped"
	}
	m.mu.Unlock()
	if !stdio {
		return errors.New(msg + " (the connection stays open)")
	}
	if err := closeBridge(name, b); err != nil {
		return fmt.Errorf("%s, and stopping the server failed: %w", msg, err)
	}
	return errors.New(msg + "; an abandoned stdio call fences its connection, so the server was stopped: restart it with mcp_server_control")
}

// Close stops every server.
func (m *MCPServers) Close() {
	m.mu.Lock()
	m.closed = true
	bridges := m.bridges
	m.bridges = map[string]*mcpbridge.Bridge{}
	m.mu.Unlock()
	for _, b := range bridges {
		_ = b.Close()
	}
}

func init() {
	register("mcp_tools", mcpToolsTool)
	register("mcp_tool_call", mcpCallTool)
	register("mcp_server_control", mcpControlTool)
}

type mcpListArgs struct {
	Server string `json:"server,omitempty"`
}

func mcpToolsTool(env *Env) agent.Tool {
	return tool(spec("mcp_tools", "List the configured MCP servers, or with server the tools of one started server (name, description, argument schema).",
		`{"type":"object","properties":{"server":{"type":"string"}},"additionalProperties":false}`),
		func(ctx context.Context, a mcpListArgs) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are configured"), nil
			}
			if a.Server == "" {
				return jsonResult(map[string]any{"servers": env.MCP.Status()}), nil
			}
			specs, err := env.MCP.Tools(a.Server)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(map[string]any{"server": a.Server, "tools": specs}), nil
		})
}

type mcpCallArgs struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

func mcpCallTool(env *Env) agent.Tool {
	return tool(spec("mcp_tool_call", "Call a tool of a started MCP server with a JSON object of arguments.",
		`{"type":"object","properties":{"server":{"type":"string"},"tool":{"type":"string"},"arguments":{"type":"object"}},"required":["server","tool"],"additionalProperties":false}`),
		func(ctx context.Context, a mcpCallArgs) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are configured"), nil
			}
			started := time.Now()
			res, err := env.MCP.Call(ctx, a.Server, a.Tool, a.Arguments)
			// A body-free receipt of the settled external call: no arguments
			// and no result, only who called what and how it ended.
			receipt := map[string]any{"server": a.Server, "tool": a.Tool, "agent": env.Caller.Agent,
				"duration_ms": time.Since(started).Milliseconds(), "outcome": "ok"}
			if env.Caller.Card != "" {
				receipt["card"] = env.Caller.Card
			}
			switch {
			case err != nil && ctx.Err() != nil:
				receipt["outcome"] = "cancelled"
			case err != nil || res.IsError:
				receipt["outcome"] = "error"
			}
			env.logEvent("external_tool_call", receipt)
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%v", env.redact(err.Error())), nil
			}
			res.Content = env.redact(res.Content)
			return res, nil
		})
}

type mcpControlArgs struct {
	Server string `json:"server"`
	Action string `json:"action"`
}

func mcpControlTool(env *Env) agent.Tool {
	return tool(spec("mcp_server_control", "Start, stop or restart a configured MCP server, or show its status. Restart is a stop followed by a fresh start.",
		`{"type":"object","properties":{"server":{"type":"string"},"action":{"type":"string","enum":["start","stop","restart","status"]}},"required":["server","action"],"additionalProperties":false}`),
		func(ctx context.Context, a mcpControlArgs) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are configured"), nil
			}
			st, err := env.MCP.Control(ctx, a.Server, a.Action)
			if err != nil {
				return failf("%v", err), nil
			}
			env.logEvent("mcp_control", map[string]any{"server": a.Server, "action": a.Action, "state": st.State, "author": env.Caller.Author()})
			return jsonResult(st), nil
		})
}
