package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a tiny MCP server: started with
// MCPBRIDGE_TEST_SERVE=1 in its environment it serves on stdio instead of
// running tests. The bridge passes that variable through the server's own
// "env", like any real configuration would.
const (
	envServe      = "MCPBRIDGE_TEST_SERVE"
	envStartDelay = "MCPBRIDGE_TEST_START_DELAY" // sleep this long before serving
	envWaitFile   = "MCPBRIDGE_TEST_WAIT_FILE"   // do not serve before this file exists
	envFailStart  = "MCPBRIDGE_TEST_FAIL_START"  // when set, print a fatal error to stderr and exit 2
	envSecret     = "MCPBRIDGE_TEST_SECRET"      // printed to stderr at start (must be masked)
	envLogWarn    = "MCPBRIDGE_TEST_LOG_WARN"    // logged at start as a slog WARN record on stderr
)

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		os.Exit(runTestServer())
	}
	os.Exit(m.Run())
}

// testServerConfig runs this test binary as an MCP server named name.
func testServerConfig(t *testing.T, name string, env map[string]string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{envServe: "1"}
	for k, v := range env {
		all[k] = v
	}
	return ServerConfig{Name: name, Command: exe, Env: all}
}

var objectSchema = map[string]any{"type": "object"}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func runTestServer() int {
	if d := os.Getenv(envStartDelay); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad delay:", err)
			return 1
		}
		time.Sleep(dur)
	}
	if path := os.Getenv(envWaitFile); path != "" {
		for {
			if _, err := os.Stat(path); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if os.Getenv(envFailStart) != "" {
		fmt.Fprintln(os.Stderr, "fatal: config file unreadable")
		return 2
	}
	fmt.Fprintf(os.Stderr, "testserver starting (secret %s)\n", os.Getenv(envSecret))
	if w := os.Getenv(envLogWarn); w != "" {
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn(w, "err", "first line\nsecond \"quoted\" line")
	}

	s := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return textResult("echo: " + in.Text), nil
	})
	s.AddTool(&mcp.Tool{Name: "args", Description: "Returns its raw arguments.", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult(string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res := textResult("deliberate failure")
			res.IsError = true
			return res, nil
		})
	s.AddTool(&mcp.Tool{Name: "empty", Description: "Succeeds with no content.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exits the process.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "crashing on request")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Never answers.", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintf(os.Stderr, "hang: call received %s\n", req.Params.Arguments)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "env", Description: "Reports the process environment.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult(strings.Join(os.Environ(), "\n")), nil
		})
	s.AddTool(&mcp.Tool{Name: "rich", Description: "Returns text, an image, a resource and structured content.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "here it is"},
					&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "note body"}},
				},
				StructuredContent: map[string]any{"count": 2},
			}, nil
		})
	s.AddTool(&mcp.Tool{Name: "grow", Description: "Adds the tool 'grown'.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(&mcp.Tool{Name: "grown", InputSchema: objectSchema},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return textResult("grown"), nil
				})
			return textResult("added"), nil
		})
	s.AddTool(&mcp.Tool{Name: "dotted.name", Description: "A name models cannot use as is.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("dotted"), nil
		})
	mcp.AddReceivingCustomMethod(s, "test/ping", func(context.Context, *mcp.ServerSession, *customParams) (*pingResult, error) {
		return &pingResult{Pong: "pong"}, nil
	})
	s.AddTool(&mcp.Tool{Name: "book", Description: "Books a day; preflighted.", InputSchema: objectSchema,
		Meta: mcp.Meta{MetaPreflight: "book_preflight"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("booked " + string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "book_preflight", Description: "Validates book's arguments.", InputSchema: objectSchema,
		Meta: mcp.Meta{MetaHidden: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Day string `json:"day"`
			}
			json.Unmarshal(req.Params.Arguments, &in)
			if in.Day == "" {
				res := textResult("day is required")
				res.IsError = true
				return res, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"day": strings.ToUpper(in.Day)}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
	return 0
}

type pingResult struct {
	mcp.ResultBase
	Pong string `json:"pong"`
}
