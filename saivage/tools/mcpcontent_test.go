package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

// TestMCPRootsAndImagesAgainstServerEverything: a stdio server is offered
// the project directory as its one root and sees it through roots/list; a
// native image block reaches the model as a normalized PNG, the result's
// data keeping metadata, not base64.
func TestMCPRootsAndImagesAgainstServerEverything(t *testing.T) {
	node, entry := everything(t)
	f := newFixture(t, analyst())
	m := tools.NewMCPServers(map[string]config.MCPServer{"everything": {Command: node, Args: []string{entry, "stdio"}}}, f.env.Root, nil)
	defer m.Close()
	ctx := context.Background()
	if st, err := m.Control(ctx, "everything", "start"); err != nil || st.State != "ready" {
		t.Fatalf("start = %+v, %v", st, err)
	}
	res, err := m.Call(ctx, "everything", "get-roots-list", json.RawMessage(`{}`))
	root := (&url.URL{Scheme: "file", Path: f.env.Root}).String()
	if err != nil || res.IsError || !strings.Contains(res.Content, root) {
		t.Fatalf("get-roots-list = %+v, %v (want %s)", res.Content, err, root)
	}
	res, err = m.Call(ctx, "everything", "get-tiny-image", json.RawMessage(`{}`))
	if err != nil || res.IsError || len(res.Images) != 1 || res.Images[0].MIME != "image/png" {
		t.Fatalf("get-tiny-image = %q, %d images, %v", res.Content, len(res.Images), err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(res.Images[0].Data))
	if err != nil || cfg.Width == 0 {
		t.Fatalf("image = %+v, %v", cfg, err)
	}
	var data struct {
		Content []struct {
			Type  string `json:"type"`
			Image *struct {
				Width  int    `json:"width"`
				SHA256 string `json:"sha256"`
			} `json:"image"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res.Data, &data); err != nil {
		t.Fatal(err)
	}
	var img int
	for _, c := range data.Content {
		if c.Type == "image" && c.Image != nil && c.Image.Width == cfg.Width && c.Image.SHA256 != "" {
			img++
		}
	}
	if img != 1 || bytes.Contains(res.Data, []byte("iVBOR")) {
		t.Errorf("result data = %.300s", res.Data)
	}
}

// contentServer serves one MCP server over loopback HTTP with tools
// returning what the limits are about.
func contentServer(t *testing.T, opts *mcp.ServerOptions, onList func()) string {
	t.Helper()
	quad, err := os.ReadFile(filepath.Join("..", "images", "testdata", "quad.png"))
	if err != nil {
		t.Fatal(err)
	}
	jpg, err := os.ReadFile(filepath.Join("..", "images", "testdata", "quad.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "content", Version: "1"}, opts)
	add := func(name string, res *mcp.CallToolResult) {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: name},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return res, nil, nil
			})
	}
	add("picture", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "before"}, &mcp.ImageContent{MIMEType: "image/png", Data: quad}, &mcp.TextContent{Text: "after"}}})
	add("gif", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/gif", Data: []byte("GIF89a")}}})
	add("mislabelled", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: jpg}}})
	add("failed", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", 600)}, &mcp.ImageContent{MIMEType: "image/png", Data: quad}}})
	add("blob", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///big.bin", MIMEType: "application/octet-stream", Blob: bytes.Repeat([]byte{1}, tools.MCPMaxDecoded+1)}}}})
	add("wire", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("w", tools.MCPMaxWire)}}})
	add("long", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("l", tools.MCPMaxProjected-1024)}}})
	add("too-long", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("t", tools.MCPMaxProjected+1)}}})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onList != nil && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte(`"method":"tools/list"`)) {
				onList()
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestMCPContentLimits: images become normalized PNGs in order, unusable
// image blocks are named but select no pixels, error results keep 512
// bytes and no pixels, and results over the projected non-image (1 MiB),
// decoded (32 MiB) or wire (48 MiB) limits are refused whole.
func TestMCPContentLimits(t *testing.T) {
	f := newFixture(t, analyst())
	m := tools.NewMCPServers(map[string]config.MCPServer{"content": {Transport: "http", URL: contentServer(t, nil, nil)}}, f.env.Root, nil)
	defer m.Close()
	ctx := context.Background()
	if _, err := m.Control(ctx, "content", "start"); err != nil {
		t.Fatal(err)
	}
	call := func(tool string) (string, int, bool) {
		t.Helper()
		res, err := m.Call(ctx, "content", tool, json.RawMessage(`{}`))
		if err != nil {
			return err.Error(), 0, true
		}
		return res.Content, len(res.Images), res.IsError
	}
	for _, tc := range []struct {
		tool    string
		want    string
		images  int
		isError bool
	}{
		{"picture", "before\n[image image/png, ", 1, false},
		{"gif", `not shown: "image/gif" is not image/png, image/jpeg or image/webp`, 0, false},
		{"mislabelled", "not shown: declared image/png but the bytes are jpeg", 0, false},
		{"failed", "éé", 0, true},
		{"blob", "33554433 bytes of binary content, over the 33554432-byte limit", 0, true},
		{"long", strings.Repeat("l", 1000), 0, false},
		{"too-long", "the tool's result is 1048577 bytes, over the 1048576-byte limit", 0, true},
		{"wire", "over the 50331648-byte limit", 0, true}, // last: the server's connection is gone after it
	} {
		t.Run(tc.tool, func(t *testing.T) {
			text, imgs, isErr := call(tc.tool)
			if !strings.Contains(text, tc.want) || imgs != tc.images || isErr != tc.isError {
				t.Errorf("%s = %.200q, %d images, error %v", tc.tool, text, imgs, isErr)
			}
			if tc.tool == "failed" && len(text) > tools.MCPMaxError+len("…") {
				t.Errorf("error text is %d bytes", len(text))
			}
			if tc.tool == "long" && len(text) != tools.MCPMaxProjected-1024 {
				t.Errorf("a result under the projected limit arrived with %d bytes", len(text))
			}
		})
	}
}

// TestMCPDiscoveryBudgetCoversEveryPage: initialize and all tool-list
// pages share one start budget; pages that each fit but together exceed it
// fail the start.
func TestMCPDiscoveryBudgetCoversEveryPage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		ready bool
	}{
		{"pages within the budget", 50 * time.Millisecond, true},
		{"pages together over the budget", 2 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, analyst())
			lists := 0
			u := contentServer(t, &mcp.ServerOptions{PageSize: 2}, func() { lists++; time.Sleep(tc.delay) })
			m := tools.NewMCPServers(map[string]config.MCPServer{"content": {Transport: "http", URL: u}}, f.env.Root, nil)
			m.StartBudget = 3 * time.Second
			defer m.Close()
			st, err := m.Control(context.Background(), "content", "start")
			if tc.ready {
				if err != nil || st.State != "ready" || st.Tools != 8 || lists != 4 {
					t.Fatalf("start = %+v, %v after %d list pages", st, err, lists)
				}
				return
			}
			if err != nil || st.State == "ready" || !strings.Contains(st.LastError, "did not start within 3s") {
				t.Errorf("start = %+v, %v", st, err)
			}
		})
	}
}
