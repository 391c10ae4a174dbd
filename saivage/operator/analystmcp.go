package operator

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/runtime"
)

// The external Analyst endpoint: in analyst mode external or both, the
// configured Analyst's tools are served as MCP tools over streamable HTTP
// on a loopback listener of their own, with their own bearer token, so an
// operator's agent (Claude Code, Codex, any MCP client) can drive the
// project without the internal model.

// Environment and files of the external endpoint.
const (
	// EnvAnalystMCPToken overrides the generated external token.
	EnvAnalystMCPToken = "SAIVAGE_ANALYST_MCP_TOKEN"
	// EnvAnalystMCPPort fixes the loopback port (default: any free port).
	EnvAnalystMCPPort = "SAIVAGE_ANALYST_MCP_PORT"
	// AnalystMCPTokenFile is the generated external token under .saivage.
	AnalystMCPTokenFile = "analyst-mcp-token"
)

// AnalystMCPPath derives the endpoint's path from the project digest (the
// SHA-256 of the canonical project root), so a client configured for one
// project cannot silently reach another one's server on the same port.
func AnalystMCPPath(root string) string {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	sum := sha256.Sum256([]byte(root))
	return "/mcp/" + hex.EncodeToString(sum[:8])
}

// newAnalystMCP returns the authenticated handler of the external
// endpoint. Transports are stateless and request-local: every POST is
// served by a temporary session over the same tool set. A tool call runs
// under the runtime's operation owner, so a client that disconnects
// neither cancels nor replays it; its body-free receipt lands in the app
// log (GET /api/external-tool-calls).
func newAnalystMCP(rt *runtime.Runtime, token, version string, log *slog.Logger) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "saivage-analyst", Version: version}, &mcp.ServerOptions{
		Instructions: "Tools of the Saivage project's Analyst: inspect and maintain the card tree, write records, control the Run. " +
			"Card maintenance needs the runtime stopped or paused.",
	})
	for _, sp := range rt.AnalystTools() {
		name := sp.Name
		srv.AddTool(&mcp.Tool{Name: name, Description: sp.Description, InputSchema: sp.Parameters},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := rt.Operate(ctx, runtime.PrincipalExternal, name, req.Params.Arguments)
				if err != nil {
					if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
						return nil, err
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}, nil
				}
				out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}
				if len(res.Data) > 0 && res.Data[0] == '{' && json.Valid(res.Data) {
					out.StructuredContent = res.Data
				}
				return out, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got = strings.TrimSpace(got)
		if !ok || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="saivage-analyst-mcp"`)
			writeError(w, http.StatusUnauthorized, "Unauthorized", "missing or wrong bearer token: send Authorization: Bearer <token> ("+EnvAnalystMCPToken+" or .saivage/"+AnalystMCPTokenFile+"; not the operator token)")
			return
		}
		h.ServeHTTP(w, r)
	})
}
