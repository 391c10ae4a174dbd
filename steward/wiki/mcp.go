package wiki

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool"
)

const serverInstructions = `The user's wiki: long-term memory as Markdown pages (an Obsidian vault) with YAML frontmatter (title, type, sources, created, updated) and [[wikilinks]].
Use wiki_search first (hybrid keyword + meaning search, with related pages added through the link graph), then wiki_read for a page (5,000 characters at a time; follow nextOffset).
Answers that use the wiki cite each page as a Markdown link to its "link" value, e.g. [Project Atlas](#/wiki/wiki%2FProject%20Atlas.md).
The wiki holds distilled knowledge; for the exact latest email or event, use the mail or calendar tools.
wiki_write_page, wiki_ingest and wiki_rescan change the wiki and need the user's approval.`

// GraphRequest asks for a page's neighbourhood, or the graph's summary.
type GraphRequest struct {
	Path  string `json:"path,omitempty" jsonschema:"page whose related pages to return; empty for the communities and insights of the whole wiki"`
	Limit int    `json:"limit,omitempty" jsonschema:"maximum neighbours (default 10, max 50)"`
}

// GraphResult is a page's neighbours or the graph summary.
type GraphResult struct {
	Path        string      `json:"path,omitempty"`
	Community   int         `json:"community,omitempty"`
	Neighbors   []Neighbor  `json:"neighbors,omitempty"`
	Pages       int         `json:"pages"`
	Links       int         `json:"links"`
	Communities []Community `json:"communities,omitempty"`
	Modularity  float64     `json:"modularity"`
	Insights    *Insights   `json:"insights,omitempty"`
}

// GraphSummary answers wiki_graph.
func (s *Service) GraphSummary(ctx context.Context, req GraphRequest) (*GraphResult, error) {
	g, err := s.Graph(ctx)
	if err != nil {
		return nil, err
	}
	res := &GraphResult{Pages: len(g.Nodes), Links: len(g.Edges), Modularity: g.Modularity}
	if req.Path == "" {
		res.Communities = g.Communities[:min(len(g.Communities), 30)]
		res.Insights = &g.Insights
		return res, nil
	}
	p, err := CleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	i, ok := g.index[p]
	if !ok { // a title or link target instead of a path
		if to := s.vault.Resolve(strings.TrimSuffix(p, ".md"), ""); to != "" {
			p = to
			i, ok = g.index[to]
		}
	}
	if !ok {
		return nil, fmt.Errorf("wiki_graph: no page %s", req.Path)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 10
	}
	res.Path, res.Community = p, g.Nodes[i].Community
	res.Neighbors = g.Neighbors(p, min(limit, 50))
	if res.Neighbors == nil {
		res.Neighbors = []Neighbor{}
	}
	return res, nil
}

// IngestRequest asks to ingest a source.
type IngestRequest struct {
	Path    string `json:"path" jsonschema:"a file under raw/sources/ of the wiki, or an absolute path of a file to add there first"`
	Context string `json:"context,omitempty" jsonschema:"optional classification context, e.g. the folder or project the file belongs to"`
}

// IngestResult is the queued task.
type IngestResult struct {
	Added *AddItem `json:"added,omitempty"`
	Task  *Task    `json:"task,omitempty"`
}

// IngestPath adds path first when it lies outside the vault, then queues
// its ingest.
func (s *Service) IngestPath(ctx context.Context, req IngestRequest) (*IngestResult, error) {
	if filepath.IsAbs(req.Path) {
		if st, err := os.Stat(req.Path); err != nil || st.IsDir() {
			return nil, fmt.Errorf("wiki_ingest: %s is not a file", req.Path)
		}
		items, tasks, err := s.Add(ctx, AddOptions{Inputs: []string{req.Path}})
		if err != nil {
			return nil, err
		}
		res := &IngestResult{Added: &items[0]}
		if len(tasks) > 0 {
			res.Task = tasks[0]
		} else if items[0].Dest != "" {
			res.Task, err = s.Ingest(ctx, items[0].Dest, req.Context)
			return res, err
		}
		if items[0].Action == "ignored" {
			return nil, fmt.Errorf("wiki_ingest: %s was not added: %s", req.Path, items[0].Reason)
		}
		return res, nil
	}
	t, err := s.Ingest(ctx, req.Path, req.Context)
	if err != nil {
		return nil, err
	}
	return &IngestResult{Task: t}, nil
}

// Empty is the input of tools without arguments.
type Empty struct{}

// NewMCPServer returns the wiki connector's MCP server. open is called by
// each tool call until it succeeds.
func NewMCPServer(open func(context.Context) (*Service, error), version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-wiki", Title: "Steward wiki", Version: version},
		&mcp.ServerOptions{Instructions: serverInstructions})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	rw := &mcp.ToolAnnotations{OpenWorldHint: new(bool)}
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_search", Annotations: ro,
		Description: "Search the wiki's pages by keywords or meaning (CJK and accents handled, substrings match); related pages are added through the link graph (via). Returns path, title, snippet and link per hit; limit defaults to 10 (max 50)."},
		mcptool.Handler(open, (*Service).Search))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_read", Annotations: ro,
		Description: "Read a wiki page: 5,000 characters from offset (continue with nextOffset), its frontmatter, resolved links and backlinks, and the hash to pass to wiki_write_page."},
		mcptool.Handler(open, (*Service).Read))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_graph", Annotations: ro,
		Description: "Pages related to a page, ranked by direct links, shared sources, common neighbours and type; without a path, the wiki's communities and insights (isolated pages, sparse communities, bridges)."},
		mcptool.Handler(open, (*Service).GraphSummary))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_list", Annotations: ro,
		Description: "List wiki pages by path, optionally under a folder or of one type; 100 per call, continue with nextOffset."},
		mcptool.Handler(open, (*Service).List))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_lint", Annotations: ro,
		Description: "Check the wiki: broken links and headings, orphans, pages without sources, duplicate titles, frontmatter errors, overdue review_by, unreadable files."},
		mcptool.Handler(open, func(svc *Service, ctx context.Context, _ Empty) (LintReport, error) { return svc.Lint(ctx), nil }))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_status", Annotations: ro,
		Description: "Counts of the wiki: pages, sources, index and embeddings, the ingest queue, lint issues and communities."},
		mcptool.Handler(open, func(svc *Service, ctx context.Context, _ Empty) (*Status, error) { return svc.Status(ctx) }))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_write_page", Annotations: rw,
		Description: "Create or replace a page (whole file: frontmatter and body). Pass baseHash from wiki_read, or \"new\" for a new page, so that a page changed meanwhile is not overwritten."},
		mcptool.Handler(open, (*Service).WritePage))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_ingest", Annotations: rw,
		Description: "Queue a source for ingest into pages (a file under raw/sources/, or an absolute path to add first). The model analyses it and writes or updates pages with their sources."},
		mcptool.Handler(open, (*Service).IngestPath))
	mcp.AddTool(s, &mcp.Tool{Name: "wiki_rescan", Annotations: rw,
		Description: "Re-read the wiki's files (after edits outside Steward) and update the index."},
		mcptool.Handler(open, func(svc *Service, ctx context.Context, _ Empty) (SyncStats, error) { return svc.Rescan(ctx) }))
	return s
}
