package tools

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentstack/agentstack/agent"
)

func init() {
	register("navigate_workspace", navigateTool)
	register("navigate_back", navigateBackTool)
	register("read_control_actions", controlActionsTool)
	register("restart_server", restartServerTool)
}

// Navigation is the strict target a navigation tool returns; the cockpit
// applies only results of this exact shape.
type Navigation struct {
	Intent string `json:"intent"` // open | back
	View   string `json:"view,omitempty"`
	CardID string `json:"card_id,omitempty"`
	Record string `json:"record,omitempty"`
	Path   string `json:"path,omitempty"`
	// Route is the cockpit hash route the target opens.
	Route string `json:"route,omitempty"`
}

type navigateArgs struct {
	View   string `json:"view"`
	CardID string `json:"card_id,omitempty"`
	Record string `json:"record,omitempty"`
	Path   string `json:"path,omitempty"`
}

func navigateTool(env *Env) agent.Tool {
	return tool(spec("navigate_workspace", "Open a view in the operator's cockpit: a card (card_id), one of its records (card_id and record), a project file or folder (path) or a system view (events, errors, processes, mcp, config). The target is checked before the cockpit navigates.",
		`{"type":"object","properties":{"view":{"type":"string","enum":["home","card","record","files","system"]},"card_id":{"type":"string"},"record":{"type":"string"},"path":{"type":"string"}},"required":["view"],"additionalProperties":false}`),
		func(ctx context.Context, a navigateArgs) (agent.ToolResult, error) {
			nav := Navigation{Intent: "open", View: a.View}
			switch a.View {
			case "home":
				nav.Route = "#/"
			case "card", "record":
				c, err := env.Cards.Get(ctx, a.CardID)
				if err != nil {
					return failf("%v", err), nil
				}
				nav.CardID, nav.Route = c.ID, "#/card/"+url.PathEscape(c.ID)
				if a.View == "record" {
					tbl, _ := env.Workflows.Table(c.Type)
					if _, ok := tbl.Record(a.Record); !ok {
						return failf("card type %s declares no record %q", c.Type, a.Record), nil
					}
					nav.Record, nav.Route = a.Record, nav.Route+"/records?record="+url.QueryEscape(a.Record)
				}
			case "files":
				p, err := env.readPath(a.Path)
				if err != nil {
					return failf("%v", err), nil
				}
				if !within(env.Root, p) {
					return failf("%s is outside the project; the cockpit shows project files only", a.Path), nil
				}
				if _, err := os.Stat(p); err != nil {
					return failf("%v", cleanErr(err, env.display(p))), nil
				}
				nav.Path = filepath.ToSlash(env.display(p))
				nav.Route = "#/files?path=" + url.QueryEscape(nav.Path)
			case "system":
				switch a.Path {
				case "", "events", "errors", "processes", "mcp", "config":
				default:
					return failf("system view %q is not one of events, errors, processes, mcp, config", a.Path), nil
				}
				nav.Path = a.Path
				if nav.Path == "" {
					nav.Path = "events"
				}
				nav.Route = "#/system/" + nav.Path
			default:
				return failf("view must be home, card, record, files or system, not %q", a.View), nil
			}
			return navResult(nav), nil
		})
}

func navigateBackTool(env *Env) agent.Tool {
	return tool(spec("navigate_back", "Return the operator's cockpit to the previous view.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			return navResult(Navigation{Intent: "back"}), nil
		})
}

func navResult(n Navigation) agent.ToolResult {
	// The recorded content is the navigation itself: the cockpit acts on
	// the result row (the session keeps content, not data).
	b, _ := json.Marshal(map[string]any{"navigation": n})
	return agent.ToolResult{Content: string(b), Data: b}
}

// ControlEventTypes are the app log event types that record control
// actions: lifecycle operations, reconfiguration and MCP server management.
func ControlEventTypes() []string {
	return []string{"control_action", "config_replaced", "mcp_control", "mcp_definition"}
}

func controlActionsTool(env *Env) agent.Tool {
	return tool(spec("read_control_actions", "Read recent control actions (start, pause, resume, stop, reconfigure, restarts and MCP server management) with who performed them, newest last.",
		`{"type":"object","properties":{"limit":{"type":"integer","minimum":1}},"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Limit int `json:"limit,omitempty"`
		}) (agent.ToolResult, error) {
			if env.Evidence == nil {
				return failf("no runtime evidence is attached"), nil
			}
			evs, err := env.Evidence.Events(ctx, EventFilter{})
			if err != nil {
				return failf("%v", err), nil
			}
			kept := evs[:0]
			for _, ev := range evs {
				if slices.Contains(ControlEventTypes(), ev.Type) {
					kept = append(kept, ev)
				}
			}
			_, limit := window(0, a.Limit, DefaultEventLimit)
			limit = min(limit, maxObservationLimit)
			total := len(kept)
			kept = kept[max(0, total-limit):]
			b, _ := json.MarshalIndent(map[string]any{"total": total, "actions": kept}, "", "  ")
			return ok(env.redact(string(b))), nil
		})
}

func restartServerTool(env *Env) agent.Tool {
	return tool(spec("restart_server", "Restart the Saivage server process (stop, then start with the configuration on disk, for example after reconfigure). The conversation continues after the restart.",
		`{"type":"object","properties":{"reason":{"type":"string"}},"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Reason string `json:"reason,omitempty"`
		}) (agent.ToolResult, error) {
			if env.RestartServer == nil {
				return unavailable("restart_server", "this server was not started under a supervisor that can restart it; restart it from the command line"), nil
			}
			if err := env.RestartServer(ctx, a.Reason); err != nil {
				return failf("restart refused: %v", err), nil
			}
			env.logEvent("control_action", map[string]any{"action": "restart_server", "author": env.Caller.Author(), "reason": a.Reason})
			return jsonResult(map[string]any{"ok": true, "restarting": true}), nil
		})
}
