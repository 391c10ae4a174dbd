package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
)

func init() { register("checkpoint_source", checkpointSourceTool) }

// SourceCheckpoint is what one checkpoint_source call did.
type SourceCheckpoint struct {
	// Commit is the card's checkpoint commit after the call.
	Commit string `json:"commit"`
	// Changed is false when nothing differed from the last checkpoint.
	Changed bool `json:"changed"`
	// Paths are the added, modified or removed paths.
	Paths []string `json:"paths,omitempty"`
}

// SourceCheckpointer checkpoints the caller card's source (the runtime's
// native Git workflow). A checkpoint that leaves the checkout different
// from the new commit (a hook that rewrote the index, say) is an error
// naming the paths.
type SourceCheckpointer interface {
	CheckpointSource(ctx context.Context, card, message string) (SourceCheckpoint, error)
}

type checkpointArgs struct {
	Message string `json:"message,omitempty"`
}

func checkpointSourceTool(env *Env) agent.Tool {
	return tool(spec("checkpoint_source", "Checkpoint this card's source: every change to the project's files since the last checkpoint becomes a commit on the card's private ref (the reviewer reviews the last checkpoint; only checkpointed work is delivered). Git is the runtime's: do not run git yourself.",
		`{"type":"object","properties":{"message":{"type":"string","maxLength":500,"description":"what this step changed (optional)"}},"additionalProperties":false}`),
		func(ctx context.Context, a checkpointArgs) (agent.ToolResult, error) {
			if env.Source == nil || env.Caller.Card == "" {
				return unavailable("checkpoint_source", "the native Git workflow is not active for this caller"), nil
			}
			if strings.ContainsAny(a.Message, "\x00") {
				return failf("message must be text"), nil
			}
			cp, err := env.Source.CheckpointSource(ctx, env.Caller.Card, a.Message)
			if err != nil {
				return failf("checkpoint_source: %s", env.redact(err.Error())), nil
			}
			text := fmt.Sprintf("Nothing changed since the last checkpoint (%s).", short(cp.Commit))
			if cp.Changed {
				text = fmt.Sprintf("Checkpointed %d path(s) as %s: %s.", len(cp.Paths), short(cp.Commit), strings.Join(cp.Paths, ", "))
			}
			return agent.ToolResult{Content: text, Data: mustJSON(cp)}, nil
		})
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
