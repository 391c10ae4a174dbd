package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/state"
)

// MCPDefinitionsFile is the dynamic MCP definitions file, relative to
// .saivage. It is outside the card state, so a project reset keeps it.
const MCPDefinitionsFile = "mcp-servers.json"

// Outbound MCP limits.
const (
	// MCPRefreshBudget bounds a catalog refresh, queueing included.
	MCPRefreshBudget = 30 * time.Second
	// MCPInvokeDeadline bounds one tool call.
	MCPInvokeDeadline = 900 * time.Second
	// MCPMaxProjected is the largest non-image result the model is given;
	// a larger one is refused, not cut.
	MCPMaxProjected = 1 << 20
	// MCPMaxError is the longest error text kept from a server.
	MCPMaxError = 512
	// maxMCPDefinitionsFile bounds mcp-servers.json.
	maxMCPDefinitionsFile = 1 << 20
)

// MCPDefinition is one dynamically registered server: a literal connection
// (no ${NAME} interpolation) that never autostarts.
type MCPDefinition struct {
	Transport string            `json:"transport,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

type mcpDefinitionsDoc struct {
	FormatVersion int                      `json:"format_version"`
	Servers       map[string]MCPDefinition `json:"servers"`
}

// MCPServerInfo is one server as mcp_servers and the operator API show it.
type MCPServerInfo struct {
	MCPStatus
	// Source is "config" (config.yaml) or "dynamic" (mcp-servers.json).
	Source string `json:"source"`
	// CatalogUUID identifies the current tool catalog; a refresh issues a
	// new one even when the tools are unchanged.
	CatalogUUID string `json:"catalog_uuid,omitempty"`
	// Fingerprint is the SHA-256 of the catalog's complete tool schemas.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// ErrMCPFrozen is the refusal of a change to a frozen MCP server set.
var ErrMCPFrozen = errors.New("the Git workflow is on (git_workflow.enabled: true), so the MCP server set is frozen: declare servers in config.yaml and restart")

// Freeze puts the manager in frozen mode for the Git workflow: the server
// set bound at startup is the whole capability surface, so register,
// replace, unregister and loading persisted dynamic definitions are
// refused, and each server's tools are pinned to the catalog first bound
// (see exposedLocked). Listing, starting, stopping and calling existing
// servers are unchanged. There is no way back: only a restart with the
// workflow off unfreezes.
func (m *MCPServers) Freeze() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = true
}

// refuseFrozen is the refusal of action on server name when frozen.
func (m *MCPServers) refuseFrozen(action, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen {
		return fmt.Errorf("%s MCP server %q: %w", action, name, ErrMCPFrozen)
	}
	return nil
}

// EnableDefinitions loads the dynamic definitions at path (absent is
// empty) and makes register/replace/unregister publish there through pub.
// A dynamic name that shadows a config.yaml server fails, and so does any
// definition when the manager is frozen.
func (m *MCPServers) EnableDefinitions(path string, pub *state.Publisher) error {
	defs, err := readMCPDefinitions(path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen && len(defs) > 0 {
		return fmt.Errorf("%s: %d dynamic MCP server(s) (%s) cannot be loaded: %w; remove them from the file or turn the workflow off",
			path, len(defs), strings.Join(sortedNames(defs), ", "), ErrMCPFrozen)
	}
	for name, d := range defs {
		if m.yaml[name] {
			return fmt.Errorf("%s: server %q shadows the config.yaml server of the same name", path, name)
		}
		m.cfgs[name] = d.serverConfig(name, m.dir)
	}
	m.defsPath, m.pub, m.dynamic = path, pub, defs
	return nil
}

func readMCPDefinitions(path string) (map[string]MCPDefinition, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]MCPDefinition{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MCP definitions: %w", err)
	}
	defs, err := ParseMCPDefinitions(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return defs, nil
}

// ParseMCPDefinitions strictly decodes an mcp-servers.json document:
// format_version 1, known fields only, one JSON value, valid definitions.
func ParseMCPDefinitions(data []byte) (map[string]MCPDefinition, error) {
	if len(data) > maxMCPDefinitionsFile {
		return nil, fmt.Errorf("exceeds %d bytes", maxMCPDefinitionsFile)
	}
	var doc mcpDefinitionsDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the document")
	}
	if doc.FormatVersion != 1 {
		return nil, fmt.Errorf("format_version must be 1, not %d", doc.FormatVersion)
	}
	if doc.Servers == nil {
		doc.Servers = map[string]MCPDefinition{}
	}
	for name, d := range doc.Servers {
		if err := d.validate(name); err != nil {
			return nil, err
		}
	}
	return doc.Servers, nil
}

func (d MCPDefinition) serverConfig(name, dir string) mcpbridge.ServerConfig {
	sc := mcpbridge.ServerConfig{Name: name, Command: d.Command, Args: d.Args, Env: d.Env, URL: d.URL, Headers: d.Headers}
	if d.Command != "" {
		sc.Dir, sc.Roots = dir, stdioRoots(dir)
	}
	return sc
}

func (d MCPDefinition) validate(name string) error {
	if !config.ValidName(name) {
		return fmt.Errorf("server name %q must use a-z, 0-9, '_' and '-'", name)
	}
	switch d.Transport {
	case "", "stdio":
		if d.Command == "" || d.URL != "" || d.Headers != nil {
			return fmt.Errorf("server %s: stdio takes command, args and env", name)
		}
	case "http":
		if d.URL == "" || d.Command != "" || d.Args != nil || d.Env != nil {
			return fmt.Errorf("server %s: http takes url and headers", name)
		}
	default:
		return fmt.Errorf("server %s: transport must be stdio or http, not %q", name, d.Transport)
	}
	if err := d.serverConfig(name, "").Validate(); err != nil {
		return fmt.Errorf("server %s: %w", name, err)
	}
	return nil
}

// publishLocked writes defs as the whole definitions file; m.mu is held.
func (m *MCPServers) publishLocked(defs map[string]MCPDefinition) error {
	if m.pub == nil {
		return errors.New("dynamic MCP definitions are not enabled on this server")
	}
	b, err := json.MarshalIndent(mcpDefinitionsDoc{FormatVersion: 1, Servers: defs}, "", "  ")
	if err != nil {
		return err
	}
	if err := m.pub.Replace(m.defsPath, append(b, '\n')); err != nil {
		return fmt.Errorf("publish %s: %w", MCPDefinitionsFile, err)
	}
	m.dynamic = defs
	return nil
}

// Register adds a dynamic server. Its name must be new (config.yaml names
// included); it is not started.
func (m *MCPServers) Register(name string, d MCPDefinition) error {
	if err := m.refuseFrozen("register", name); err != nil {
		return err
	}
	if err := d.validate(name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.yaml[name] {
		return fmt.Errorf("server %q is declared in config.yaml; dynamic definitions cannot shadow it", name)
	}
	if _, ok := m.dynamic[name]; ok {
		return fmt.Errorf("server %q is already registered; use mcp_server_replace", name)
	}
	next := maps.Clone(m.dynamic)
	next[name] = d
	if err := m.publishLocked(next); err != nil {
		return err
	}
	m.cfgs[name], m.auto[name] = d.serverConfig(name, m.dir), false
	return nil
}

// Replace publishes a new definition for a dynamic server, then retires the
// running connection (joining its stop). It is not restarted.
func (m *MCPServers) Replace(name string, d MCPDefinition) error {
	if err := m.refuseFrozen("replace", name); err != nil {
		return err
	}
	if err := d.validate(name); err != nil {
		return err
	}
	m.mu.Lock()
	if _, ok := m.dynamic[name]; !ok {
		m.mu.Unlock()
		return m.notDynamic(name)
	}
	next := maps.Clone(m.dynamic)
	next[name] = d
	if err := m.publishLocked(next); err != nil {
		m.mu.Unlock()
		return err
	}
	m.cfgs[name] = d.serverConfig(name, m.dir)
	old := m.takeLocked(name)
	m.mu.Unlock()
	return closeBridge(name, old)
}

// Unregister removes a dynamic server: the removal is published first, then
// the connection is stopped.
func (m *MCPServers) Unregister(name string) error {
	if err := m.refuseFrozen("unregister", name); err != nil {
		return err
	}
	m.mu.Lock()
	if _, ok := m.dynamic[name]; !ok {
		m.mu.Unlock()
		return m.notDynamic(name)
	}
	next := maps.Clone(m.dynamic)
	delete(next, name)
	if err := m.publishLocked(next); err != nil {
		m.mu.Unlock()
		return err
	}
	delete(m.cfgs, name)
	delete(m.auto, name)
	old := m.takeLocked(name)
	m.mu.Unlock()
	return closeBridge(name, old)
}

func (m *MCPServers) notDynamic(name string) error {
	if m.yaml[name] {
		return fmt.Errorf("server %q is declared in config.yaml; change it there (reconfigure)", name)
	}
	return fmt.Errorf("no dynamically registered MCP server %q", name)
}

// takeLocked detaches a server's running bridge and catalog; m.mu is held.
func (m *MCPServers) takeLocked(name string) *mcpbridge.Bridge {
	b := m.bridges[name]
	delete(m.bridges, name)
	delete(m.catalogs, name)
	delete(m.fenced, name)
	return b
}

func closeBridge(name string, b *mcpbridge.Bridge) error {
	if b == nil {
		return nil
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("stop MCP server %s: %w", name, err)
	}
	return nil
}

type mcpCatalog struct {
	uuid, fingerprint string
}

func catalogOf(specs []agent.ToolSpec) mcpCatalog {
	h := sha256.New()
	for _, s := range specs {
		b, _ := json.Marshal(s)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return mcpCatalog{uuid: state.NewUUID(), fingerprint: hex.EncodeToString(h.Sum(nil))}
}

// Refresh re-lists a started server's tools on its current connection and
// issues a fresh catalog UUID, even when the tools are unchanged. A frozen
// manager refuses a listing that adds tools or changes a schema (see
// refuseEnlargement); removals narrow.
func (m *MCPServers) Refresh(ctx context.Context, name string) (MCPServerInfo, error) {
	b, err := m.bridge(name)
	if err != nil {
		return MCPServerInfo{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, MCPRefreshBudget)
	defer cancel()
	if _, err := b.RefreshTools(rctx, name); err != nil {
		return MCPServerInfo{}, err
	}
	if err := m.refuseEnlargement("refresh", name, b); err != nil {
		return MCPServerInfo{}, err // the catalog identity stays as bound
	}
	specs, err := m.Tools(name)
	if err != nil {
		return MCPServerInfo{}, err
	}
	m.mu.Lock()
	if m.bridges[name] == b {
		m.catalogs[name] = catalogOf(specs)
	}
	m.mu.Unlock()
	return m.Info(name)
}

// Servers lists every enabled server with its source and catalog.
func (m *MCPServers) Servers() []MCPServerInfo {
	var out []MCPServerInfo
	for _, st := range m.Status() {
		out = append(out, m.info(st))
	}
	return out
}

// Info describes one server.
func (m *MCPServers) Info(name string) (MCPServerInfo, error) {
	for _, st := range m.Status() {
		if st.Name == name {
			return m.info(st), nil
		}
	}
	return MCPServerInfo{}, fmt.Errorf("no enabled MCP server %q", name)
}

func (m *MCPServers) info(st MCPStatus) MCPServerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := MCPServerInfo{MCPStatus: st, Source: "config"}
	if _, ok := m.dynamic[st.Name]; ok {
		in.Source = "dynamic"
	}
	if c, ok := m.catalogs[st.Name]; ok {
		in.CatalogUUID, in.Fingerprint = c.uuid, c.fingerprint
	}
	return in
}

// ensureCatalog records the first catalog of a newly ready server.
func (m *MCPServers) ensureCatalog(name string, b *mcpbridge.Bridge) {
	specs, err := m.Tools(name)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.catalogs[name]; !ok && m.bridges[name] == b {
		m.catalogs[name] = catalogOf(specs)
	}
}

// validateArgs checks a call's arguments against the tool's whole input
// schema: JSON Schema 2020-12 when $schema is absent or 2020-12, draft-07
// only when declared; no coercion, defaults or network references.
func validateArgs(schema json.RawMessage, args json.RawMessage) error {
	var head struct {
		Schema string `json:"$schema"`
	}
	_ = json.Unmarshal(schema, &head)
	switch strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(head.Schema, "http://"), "https://"), "#") {
	case "", "json-schema.org/draft/2020-12/schema", "json-schema.org/draft-07/schema":
	default:
		return fmt.Errorf("the tool declares JSON Schema dialect %q; only 2020-12 and draft-07 are supported", head.Schema)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("the tool's input schema is not valid JSON Schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("the tool's input schema does not resolve: %w", err)
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fmt.Errorf("arguments are not JSON: %w", err)
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("arguments do not match the tool's input schema: %w", err)
	}
	return nil
}

func init() {
	register("mcp_servers", mcpServersTool)
	register("mcp_server_register", mcpDefineTool("mcp_server_register", "Register a new MCP server (stdio command or http url) in .saivage/mcp-servers.json. It is not started; start it with mcp_server_control.", (*MCPServers).Register))
	register("mcp_server_replace", mcpDefineTool("mcp_server_replace", "Replace a registered MCP server's definition. A running connection is stopped; start it again with mcp_server_control.", (*MCPServers).Replace))
	register("mcp_server_unregister", mcpUnregisterTool)
	register("mcp_catalog_refresh", mcpRefreshTool)
}

func mcpServersTool(env *Env) agent.Tool {
	return tool(spec("mcp_servers", "List the MCP servers with their source (config or dynamic), state, tool count and catalog identity.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are attached"), nil
			}
			return jsonResult(map[string]any{"servers": env.MCP.Servers()}), nil
		})
}

type mcpDefineArgs struct {
	Name string `json:"name"`
	MCPDefinition
}

const mcpDefineSchema = `{"type":"object","properties":{"name":{"type":"string"},"transport":{"type":"string","enum":["stdio","http"]},"command":{"type":"string"},"args":{"type":"array","items":{"type":"string"}},"env":{"type":"object","additionalProperties":{"type":"string"}},"url":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}}},"required":["name"],"additionalProperties":false}`

func mcpDefineTool(name, desc string, op func(*MCPServers, string, MCPDefinition) error) factory {
	return func(env *Env) agent.Tool {
		return tool(spec(name, desc, mcpDefineSchema), func(ctx context.Context, a mcpDefineArgs) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are attached"), nil
			}
			if err := op(env.MCP, a.Name, a.MCPDefinition); err != nil {
				return failf("%s", env.redact(err.Error())), nil
			}
			env.logEvent("mcp_definition", map[string]any{"server": a.Name, "action": strings.TrimPrefix(name, "mcp_server_"), "author": env.Caller.Author()})
			in, err := env.MCP.Info(a.Name)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(in), nil
		})
	}
}

func mcpUnregisterTool(env *Env) agent.Tool {
	return tool(spec("mcp_server_unregister", "Remove a registered MCP server from .saivage/mcp-servers.json and stop it.",
		`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Name string `json:"name"`
		}) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are attached"), nil
			}
			if err := env.MCP.Unregister(a.Name); err != nil {
				return failf("%s", env.redact(err.Error())), nil
			}
			env.logEvent("mcp_definition", map[string]any{"server": a.Name, "action": "unregister", "author": env.Caller.Author()})
			return jsonResult(map[string]any{"ok": true, "unregistered": a.Name}), nil
		})
}

func mcpRefreshTool(env *Env) agent.Tool {
	return tool(spec("mcp_catalog_refresh", "Re-read a started MCP server's tool list on its current connection; returns the new catalog identity.",
		`{"type":"object","properties":{"server":{"type":"string"}},"required":["server"],"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Server string `json:"server"`
		}) (agent.ToolResult, error) {
			if env.MCP == nil {
				return failf("no MCP servers are attached"), nil
			}
			in, err := env.MCP.Refresh(ctx, a.Server)
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%s", env.redact(err.Error())), nil
			}
			return jsonResult(in), nil
		})
}
