package mcpbridge

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultData is what ToolResult.Data holds when a result has more than text:
// every content block whole (images and blobs base64, as on the wire) and the
// structured content, for clients to render.
type resultData struct {
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
}

// convertResult turns an MCP tool result into the agent's form. Text blocks
// are joined for the model; other blocks are summarised in the text and kept
// whole in Data; isError is kept; an empty successful result stays an empty
// successful result.
func convertResult(res *mcp.CallToolResult) (agent.ToolResult, error) {
	out := agent.ToolResult{IsError: res.IsError}
	var parts []string
	rich := res.StructuredContent != nil
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
			continue
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, describeLink(c))
		case *mcp.EmbeddedResource:
			parts = append(parts, describeResource(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
		rich = true
	}
	out.Content = strings.Join(parts, "\n")
	if out.Content == "" && res.StructuredContent != nil {
		// Servers SHOULD mirror structured output as text but not all do; the
		// model must still see the result.
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return out, fmt.Errorf("encode structured content: %w", err)
		}
		out.Content = string(b)
	}
	if rich {
		data, err := json.Marshal(resultData{Content: res.Content, StructuredContent: res.StructuredContent})
		if err != nil {
			return out, fmt.Errorf("encode result content: %w", err)
		}
		out.Data = data
	}
	return out, nil
}

func describeLink(l *mcp.ResourceLink) string {
	s := "[resource link " + l.URI
	if l.Name != "" && l.Name != l.URI {
		s += " (" + l.Name + ")"
	}
	if l.MIMEType != "" {
		s += ", " + l.MIMEType
	}
	if l.Description != "" {
		s += ": " + l.Description
	}
	return s + "]"
}

func describeResource(r *mcp.ResourceContents) string {
	if r == nil {
		return "[empty resource]"
	}
	head := "[resource " + r.URI
	if r.MIMEType != "" {
		head += ", " + r.MIMEType
	}
	if r.Blob != nil {
		return fmt.Sprintf("%s, %d bytes]", head, len(r.Blob))
	}
	// An embedded text resource is content the server chose to return; the
	// model gets it after the header.
	return head + "]\n" + r.Text
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown type"
	}
	return s
}
