package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mail/threads/threadstest"
)

// TestMCPMailOpensOnceConfigured runs `steward mcp mail` as a real stdio
// process started before mail.yaml exists: its tools explain what to
// configure, and once mail.yaml and a mirror exist the same connection
// answers from them, without a restart.
func TestMCPMailOpensOnceConfigured(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "mcp", "mail")
	cmd.Env = append(childEnv(home), "MAIL_EMBED_ENDPOINT=off")
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	search := func() *mcp.CallToolResult {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "search_mail", Arguments: map[string]any{"query": "invoices"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(res *mcp.CallToolResult) string { return res.Content[0].(*mcp.TextContent).Text }

	if res := search(); !res.IsError || !strings.Contains(text(res), "no mail accounts configured") {
		t.Fatalf("before mail.yaml: %+v", res)
	}

	m := threadstest.New(t, threadstest.Options{Home: home})
	m.Add(t, "INBOX", threadstest.Message{ID: "atlas@x", From: "Anna <anna@people.example>", To: []string{"me@example.com"},
		Subject: "Atlas invoices", Body: "The invoices move to Postgres."}, "S")
	m.Sync(t)
	yaml := fmt.Sprintf("accounts:\n  - name: personal\n    kind: maildir\n    root: %q\n    addresses: [me@example.com]\n", m.Root)
	if err := os.WriteFile(filepath.Join(home, "mail.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	res := search()
	if res.IsError {
		t.Fatalf("after mail.yaml: %s", text(res))
	}
	var got struct {
		Messages []struct {
			Subject string `json:"subject"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(text(res)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || got.Messages[0].Subject != "Atlas invoices" {
		t.Errorf("after mail.yaml, search_mail = %s", text(res))
	}
}
