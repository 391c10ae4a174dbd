package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestConvertResult(t *testing.T) {
	size := int64(10)
	cases := []struct {
		name    string
		in      *mcp.CallToolResult
		content string
		isError bool
		dataHas []string // substrings of Data; nil means Data must be empty
	}{
		{"text joined", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, "a\nb", false, nil},
		{"error kept", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, "boom", true, nil},
		{"empty success", &mcp.CallToolResult{}, "", false, nil},
		{"empty error", &mcp.CallToolResult{IsError: true}, "", true, nil},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte("abc")}}},
			"[image image/png, 3 bytes]", false, []string{`"type":"image"`, `"data":"YWJj"`}},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: []byte("ab")}}},
			"[audio of unknown type, 2 bytes]", false, []string{`"type":"audio"`}},
		{"resource link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///a.txt", Name: "a", MIMEType: "text/plain", Description: "notes", Size: &size}}},
			"[resource link file:///a.txt (a), text/plain: notes]", false, []string{`"type":"resource_link"`, `"size":10`}},
		{"blob resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://x", Blob: []byte{1, 2}}}}},
			"[resource mem://x, 2 bytes]", false, []string{`"blob":"AQI="`}},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}},
			`{"n":1}`, false, []string{`"structuredContent":{"n":1}`}},
		{"structured with text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "n is 1"}}, StructuredContent: map[string]any{"n": 1}},
			"n is 1", false, []string{`"content":[{"type":"text","text":"n is 1"}]`, `"structuredContent":{"n":1}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := convertResult(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != c.content || got.IsError != c.isError {
				t.Errorf("got content=%q isError=%v, want %q %v", got.Content, got.IsError, c.content, c.isError)
			}
			if c.dataHas == nil {
				if got.Data != nil {
					t.Errorf("unexpected data %s", got.Data)
				}
				return
			}
			if !json.Valid(got.Data) {
				t.Fatalf("data is not JSON: %s", got.Data)
			}
			for _, frag := range c.dataHas {
				if !strings.Contains(string(got.Data), frag) {
					t.Errorf("data %s lacks %s", got.Data, frag)
				}
			}
		})
	}
}

func TestCallArgs(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"", "{}", true},
		{"null", "{}", true},
		{" {\"a\":1} ", `{"a":1}`, true},
		{"[1]", "", false},
		{`"text"`, "", false},
		{`{"a":`, "", false},
	}
	for _, c := range cases {
		got, err := callArgs(json.RawMessage(c.in))
		if (err == nil) != c.ok || string(got) != c.want {
			t.Errorf("callArgs(%q) = %s, %v", c.in, got, err)
		}
	}
}
