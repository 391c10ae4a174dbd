package documents

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InfoInput is document_info's arguments.
type InfoInput struct {
	Path string `json:"path" jsonschema:"absolute path of a local PDF, DOCX, PPTX, ODT, RTF, HTML, Markdown or text file"`
}

// ReadInput is document_read's arguments.
type ReadInput struct {
	Path     string `json:"path" jsonschema:"absolute path of the document"`
	Page     int    `json:"page,omitempty" jsonschema:"1-based page (PDF page, PPTX slide) to start at; not with cursor"`
	Cursor   string `json:"cursor,omitempty" jsonschema:"continuation cursor from document_read, document_info or document_search; not with page"`
	MaxChars int    `json:"max_chars,omitempty" jsonschema:"characters to return, default 6000, at most 12000"`
	MaxPages int    `json:"max_pages,omitempty" jsonschema:"pages to span, default 1, at most 3"`
}

// SearchInput is document_search's arguments.
type SearchInput struct {
	Path         string `json:"path" jsonschema:"absolute path of the document"`
	Query        string `json:"query" jsonschema:"what to look for; words and phrases, matched lexically and semantically"`
	MaxResults   int    `json:"max_results,omitempty" jsonschema:"excerpts to return, default 5, at most 10"`
	ContextChars int    `json:"context_chars,omitempty" jsonschema:"characters per excerpt, default 300, at most 800"`
}

// NewServer returns the documents MCP server exposing svc's three tools.
func NewServer(svc *Service, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-documents", Version: version}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	mcp.AddTool(s, &mcp.Tool{
		Name: "document_info",
		Description: "Describe one local document without returning its body: name, canonical path, format, size, " +
			"modification time, page and character totals, warnings and up to 50 headings with cursors.",
		Annotations: ro,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in InfoInput) (*mcp.CallToolResult, *InfoResult, error) {
		r, err := svc.Info(ctx, in.Path)
		if r != nil {
			r.Kind = "file"
		}
		return nil, r, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "document_read",
		Description: "Read a bounded part of one local document (default 6,000 characters and one page; at most " +
			"12,000 characters and three pages). Start at a page or at a cursor, not both; continue with navigation.nextCursor while navigation.hasMore.",
		Annotations: ro,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, *ReadResult, error) {
		r, err := svc.Read(ctx, ReadRequest(in))
		return nil, r, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "document_search",
		Description: "Search one local document for a question or phrase and return the best excerpts (default 5 of 300 " +
			"characters; at most 10 of 800), each with page, offset and a cursor for document_read.",
		Annotations: ro,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, *SearchResult, error) {
		r, err := svc.Search(ctx, SearchRequest(in))
		return nil, r, err
	})
	return s
}
