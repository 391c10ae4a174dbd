package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mail/outbox"
	"github.com/agentstack/agentstack/steward/writeops"
)

// Tool _meta keys the host's MCP bridge reads: a tool naming a preflight
// companion gets its arguments validated and normalised by that companion
// before the approval card is shown (and again after an edit); hidden
// tools are not offered to the model.
const (
	MetaPreflight = "steward/preflight"
	MetaHidden    = "steward/hidden"
)

// Sender journals and sends mail; *outbox.Service implements it.
type Sender interface {
	Preflight(ctx context.Context, tool string, d outbox.Draft) (outbox.Draft, error)
	Submit(ctx context.Context, tool, origin string, d outbox.Draft) (outbox.Result, error)
}

var writeTools = []struct{ name, desc string }{
	{outbox.ToolSend, "Send an email now from one of the user's accounts (asks the user first). to/cc/bcc are addresses " +
		"(resolve names with mcp__contacts__resolve_recipient); attachments are local paths or attachmentIds. " +
		"Returns the write operationId and its journal state; script_returned means the server accepted it, confirmed comes later."},
	{outbox.ToolReply, "Reply to a mirrored message (messageId from search_mail): linked to it (In-Reply-To/References), " +
		"addressed to its sender (replyAll adds the other recipients), subject Re: and the quoted original appended. Asks the user first."},
	{outbox.ToolSchedule, "Schedule an email for sendAt (RFC 3339 instant with an explicit offset); the send-due job sends it then. " +
		"Asks the user first. Returns the operationId; nothing is sent before sendAt."},
}

func addWriteTools(s *mcp.Server, sender Sender) {
	for _, t := range writeTools {
		tool := t.name
		companion := "preflight_" + tool
		mcp.AddTool(s, &mcp.Tool{Name: tool, Description: t.desc, Meta: mcp.Meta{MetaPreflight: companion},
			Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(true)}},
			func(ctx context.Context, req *mcp.CallToolRequest, d outbox.Draft) (*mcp.CallToolResult, *outbox.Result, error) {
				var origin string
				if req != nil && req.Params != nil {
					origin = writeops.OriginFromMeta(req.Params.Meta)
				}
				res, err := sender.Submit(ctx, tool, origin, d)
				if err != nil {
					return nil, nil, writeErr(err)
				}
				return nil, &res, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: companion, Meta: mcp.Meta{MetaHidden: true},
			Description: "Validate " + tool + "'s arguments and return them normalised with a preview of exactly what will be sent. Sends nothing.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}},
			func(ctx context.Context, _ *mcp.CallToolRequest, d outbox.Draft) (*mcp.CallToolResult, *outbox.Draft, error) {
				out, err := sender.Preflight(ctx, tool, d)
				if err != nil {
					return nil, nil, writeErr(err)
				}
				return nil, &out, nil
			})
	}
}

func writeErr(err error) error {
	var ie *outbox.InputError
	if errors.As(err, &ie) {
		return fmt.Errorf("NOT SENT: %w", err)
	}
	return fmt.Errorf("NOT SENT: mail connector error: %w", err)
}
