package tools

import (
	"context"
	"fmt"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
)

func init() {
	register("get_status", getStatusTool)
	register("start_project", runtimeOp("start_project", "Start the Run: activate the root card. Execution continues autonomously until the root finishes or the runtime is paused or stopped.", Runtime.Start))
	register("pause_runtime", runtimeOp("pause_runtime", "Pause the Run: no new autonomous model call starts; running tools and commands finish.", Runtime.Pause))
	register("resume_runtime", runtimeOp("resume_runtime", "Resume a paused Run.", Runtime.Resume))
	register("stop_project", runtimeOp("stop_project", "Stop the Run: halt all card work now. Running cards stay running on disk and the next Run recovers them.", Runtime.Stop))
	register("show_config", showConfigTool)
	register("reconfigure", reconfigureTool)
	register("queue_notification", queueNotificationTool)
}

var emptySchema = `{"type":"object","properties":{},"additionalProperties":false}`

func getStatusTool(env *Env) agent.Tool {
	return tool(spec("get_status", "Show the runtime status (uninitialized, starting, running, pausing, paused, stopped, closing or error) and the active cards.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			if env.Runtime == nil {
				return failf("no runtime is attached"), nil
			}
			st := env.Runtime.Status()
			root, err := env.Cards.Get(ctx, cards.RootID)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(map[string]any{"runtime": st, "root": map[string]any{"id": root.ID, "status": root.Status, "title": root.Title}}), nil
		})
}

func runtimeOp(name, desc string, op func(Runtime, context.Context) error) factory {
	return func(env *Env) agent.Tool {
		return tool(spec(name, desc, emptySchema), func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			if env.Runtime == nil {
				return failf("no runtime is attached"), nil
			}
			if err := op(env.Runtime, ctx); err != nil {
				return failf("%v", err), nil
			}
			env.logEvent("control_action", map[string]any{"action": name, "author": env.Caller.Author()})
			return jsonResult(map[string]any{"ok": true, "runtime": env.Runtime.Status()}), nil
		})
	}
}

func showConfigTool(env *Env) agent.Tool {
	return tool(spec("show_config", "Show the effective configuration with credentials, base URLs and MCP secrets redacted.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			m, err := config.Redact(env.Config)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(m), nil
		})
}

type reconfigureArgs struct {
	YAML string `json:"yaml"`
}

func reconfigureTool(env *Env) agent.Tool {
	return tool(spec("reconfigure", "Replace config.yaml with a complete new configuration. It is validated and compiled first and takes effect at the next server start (requires_restart).",
		`{"type":"object","properties":{"yaml":{"type":"string","minLength":1}},"required":["yaml"],"additionalProperties":false}`),
		func(ctx context.Context, a reconfigureArgs) (agent.ToolResult, error) {
			if env.Runtime == nil {
				return failf("no runtime is attached"), nil
			}
			if err := env.Runtime.Reconfigure(ctx, a.YAML); err != nil {
				return failf("configuration refused: %v", err), nil
			}
			env.logEvent("control_action", map[string]any{"action": "reconfigure", "author": env.Caller.Author()})
			return jsonResult(map[string]any{"ok": true, "requires_restart": true}), nil
		})
}

type notifyArgs struct {
	CardID  string `json:"card_id"`
	Message string `json:"message"`
}

func queueNotificationTool(env *Env) agent.Tool {
	return tool(spec("queue_notification", fmt.Sprintf("Queue a message (at most %d bytes) for a card's designated recipient node (its Planner); it is delivered when that node next runs. Queuing acknowledges admission, not delivery.", cards.MaxMessage),
		`{"type":"object","properties":{"card_id":{"type":"string"},"message":{"type":"string","minLength":1}},"required":["card_id","message"],"additionalProperties":false}`),
		func(ctx context.Context, a notifyArgs) (agent.ToolResult, error) {
			c, err := env.Cards.Get(ctx, a.CardID)
			if err != nil {
				return failf("%v", err), nil
			}
			tbl, _ := env.Workflows.Table(c.Type)
			if tbl.NotificationRecipient() == "" {
				return failf("card type %s has no notification recipient; nobody would read the message", c.Type), nil
			}
			m, err := env.Cards.Enqueue(ctx, a.CardID, env.Caller.Author(), a.Message)
			if err != nil {
				return failf("%v", err), nil
			}
			env.hint("card", a.CardID)
			env.logEvent("notification_queued", map[string]any{"card": a.CardID, "message": m.UUID, "author": env.Caller.Author()})
			return ok(fmt.Sprintf("queued for %s's %s node", a.CardID, tbl.NotificationRecipient())), nil
		})
}
