package shell

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FindInput is find_files' arguments.
type FindInput struct {
	Root           string   `json:"root,omitempty" jsonschema:"absolute directory to search (default: the home directory)"`
	Name           string   `json:"name,omitempty" jsonschema:"case-insensitive part of the file name"`
	Glob           string   `json:"glob,omitempty" jsonschema:"shell pattern for the file name, e.g. *.pdf or report-202?.*"`
	Extensions     []string `json:"extensions,omitempty" jsonschema:"file extensions to keep, e.g. [\"pdf\",\"docx\"]"`
	ModifiedAfter  string   `json:"modified_after,omitempty" jsonschema:"keep files modified at or after this date (YYYY-MM-DD or RFC 3339)"`
	ModifiedBefore string   `json:"modified_before,omitempty" jsonschema:"keep files modified before this date (YYYY-MM-DD or RFC 3339)"`
	MinSize        int64    `json:"min_size,omitempty" jsonschema:"minimum size in bytes"`
	MaxSize        int64    `json:"max_size,omitempty" jsonschema:"maximum size in bytes"`
	Type           string   `json:"type,omitempty" jsonschema:"file (default), dir or any"`
	MaxResults     int      `json:"max_results,omitempty" jsonschema:"results to return, default 50, at most 500"`
	MaxDepth       int      `json:"max_depth,omitempty" jsonschema:"directory levels below root, default 12"`
	IncludeHidden  bool     `json:"include_hidden,omitempty" jsonschema:"also search dot-files and dot-directories"`
}

// CommandInput is run_readonly's and run_write's arguments.
type CommandInput struct {
	Command   string `json:"command" jsonschema:"the command line, e.g. ls -la ~/Documents | sort -k5 -n | tail -5; pipes are allowed, no shell features"`
	Directory string `json:"directory,omitempty" jsonschema:"absolute working directory (default: the home directory)"`
}

func parseDate(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, refuse("%s %q is not a date (use YYYY-MM-DD or RFC 3339)", field, v)
}

// NewServer returns the shell MCP server with find_files, run_readonly and
// run_write.
func NewServer(r *Runner, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-shell", Version: version}, nil)
	no := false
	mcp.AddTool(s, &mcp.Tool{
		Name: "find_files",
		Description: "Find files under a directory by name, glob, extension, modification date and size. " +
			"Protected locations (keys, credentials, Steward's data) are never listed; hidden files only on request.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in FindInput) (*mcp.CallToolResult, *FindResult, error) {
		after, err := parseDate("modified_after", in.ModifiedAfter)
		if err != nil {
			return nil, nil, err
		}
		before, err := parseDate("modified_before", in.ModifiedBefore)
		if err != nil {
			return nil, nil, err
		}
		res, err := r.FindFiles(ctx, FindRequest{
			Root: in.Root, Name: in.Name, Glob: in.Glob, Extensions: in.Extensions, ModifiedAfter: after, ModifiedBefore: before,
			MinSize: in.MinSize, MaxSize: in.MaxSize, Type: in.Type, MaxResults: in.MaxResults, MaxDepth: in.MaxDepth, IncludeHidden: in.IncludeHidden,
		})
		if res != nil {
			res.Kind = "search_results"
			for i := range res.Files {
				res.Files[i].Kind = "file"
			}
		}
		return nil, res, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "run_readonly",
		Description: fmt.Sprintf("Run a read-only command line without a shell: one pipeline of allow-listed programs (%s). "+
			"Quotes and globs work; $(…), backticks, variables, redirection, ;, &&, & and env assignments are refused. "+
			"Output (64 KiB), time (15 s) and memory are bounded.", strings.Join(ReadOnlyPrograms(), ", ")),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in CommandInput) (*mcp.CallToolResult, *Result, error) {
		res, err := r.RunReadOnly(ctx, in.Command, in.Directory)
		return nil, res, err
	})
	yes := true
	mcp.AddTool(s, &mcp.Tool{
		Name: "run_write",
		Description: fmt.Sprintf("Run a file-changing command line (%s, optionally in a pipeline with read-only programs) "+
			"inside the home or temporary directory. Requires the user's approval.", strings.Join(WritePrograms(), ", ")),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in CommandInput) (*mcp.CallToolResult, *Result, error) {
		res, err := r.RunWrite(ctx, in.Command, in.Directory)
		return nil, res, err
	})
	return s
}
