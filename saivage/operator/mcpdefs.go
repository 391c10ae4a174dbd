package operator

import (
	"fmt"
	"net/http"

	"github.com/agentstack/agentstack/saivage/tools"
)

// mcpDefinitionBody is a dynamic MCP server definition; register also
// carries its name.
type mcpDefinitionBody struct {
	Name string `json:"name,omitempty"`
	tools.MCPDefinition
}

func (s *Server) getMCPServers(w http.ResponseWriter, r *http.Request) error {
	return s.writeRedacted(w, http.StatusOK, map[string]any{"servers": s.rt.MCP().Servers()})
}

func (s *Server) postMCPDefinition(replace bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var b mcpDefinitionBody
		if err := decodeBody(w, r, &b); err != nil {
			return err
		}
		action, op := "register", s.rt.MCP().Register
		if replace {
			action, op = "replace", s.rt.MCP().Replace
			if b.Name != "" && b.Name != r.PathValue("name") {
				return badRequest("InvalidBody", "name in the body differs from the path")
			}
			b.Name = r.PathValue("name")
		}
		err := op(b.Name, b.MCPDefinition)
		_ = s.rt.LogEvent("mcp_definition", map[string]any{"server": b.Name, "action": action, "author": "operator", "ok": err == nil})
		if err != nil {
			return conflict("McpDefinitionRefused", fmt.Sprintf("%s %s: %v", action, b.Name, err))
		}
		in, err := s.rt.MCP().Info(b.Name)
		if err != nil {
			return err
		}
		return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "server": in})
	}
}

func (s *Server) postMCPUnregister(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.rt.MCP().Unregister(name)
	_ = s.rt.LogEvent("mcp_definition", map[string]any{"server": name, "action": "unregister", "author": "operator", "ok": err == nil})
	if err != nil {
		return conflict("McpDefinitionRefused", fmt.Sprintf("unregister %s: %v", name, err))
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "unregistered": name})
}

func (s *Server) postMCPRefresh(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	in, err := s.rt.MCP().Refresh(r.Context(), name)
	if err != nil {
		return conflict("McpRefreshFailed", fmt.Sprintf("refresh %s: %v", name, err))
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "server": in})
}
