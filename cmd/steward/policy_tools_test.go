package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
)

// builtinConnectorRules splits the built-in rules that name a connector's
// tool by whether that connector is registered in this binary.
func builtinConnectorRules() (registered, unregistered map[string][]string) {
	registered, unregistered = map[string][]string{}, map[string][]string{}
	for _, list := range [][]string{policy.BuiltinAllow, policy.BuiltinGate} {
		for _, rule := range list {
			server, _, ok := mcpbridge.SplitToolName(rule)
			if !ok {
				continue // host tools
			}
			if slices.Contains(mcpNames(), server) {
				registered[server] = append(registered[server], rule)
			} else {
				unregistered[server] = append(unregistered[server], rule)
			}
		}
	}
	return registered, unregistered
}

// TestBuiltinPolicyNamesRealTools starts every Steward connector and checks
// that each built-in allow or gate rule for a connector names a tool that
// connector really has: a renamed tool must not silently fall back to the
// default gate (or, worse, a misspelt rule allow nothing while seeming to).
// Rules for connectors this binary does not register must be inert under the
// host's policy. Every connector rule is counted as checked one way or the
// other.
func TestBuiltinPolicyNamesRealTools(t *testing.T) {
	env, _, _ := testEnv(t, map[string]string{})
	ctx := context.Background()
	tools := map[string]bool{}
	hints := policy.StaticHints{} // every listed tool's readOnlyHint, as the bridge reads it
	for _, name := range mcpNames() {
		server, err := mcpServers[name](ctx, env)
		if err != nil {
			t.Fatalf("connector %s: %v", name, err)
		}
		cs := mcptooltest.Connect(t, server)
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("list tools of %s: %v", name, err)
		}
		for _, tool := range res.Tools {
			tools[mcpbridge.ToolName(name, tool.Name)] = true
		}
		maps.Copy(hints, mcptooltest.ReadOnlyHints(t, cs, name))
	}
	pol, err := policy.New(policy.Options{Connectors: mcpNames(), Hints: hints})
	if err != nil {
		t.Fatal(err)
	}
	// Every tool a connector lists is allowed exactly when the connector
	// annotates it readOnlyHint, unless a built-in rule names it.
	reads := 0
	for tool, readOnly := range hints {
		want := policy.Gate
		if readOnly {
			want, reads = policy.Allow, reads+1
		}
		switch {
		case slices.Contains(policy.BuiltinGate, tool):
			want = policy.Gate
		case slices.Contains(policy.BuiltinAllow, tool):
			want = policy.Allow
		}
		if got := pol.Decide(tool); got != want {
			t.Errorf("%s (readOnlyHint %v): %s, want %s", tool, readOnly, got, want)
		}
	}
	t.Logf("%d connector tools listed, %d annotated read-only", len(hints), reads)
	if reads == 0 {
		t.Fatal("no connector tool is annotated read-only")
	}
	registered, unregistered := builtinConnectorRules()
	total, checkedTools, checkedInert := 0, 0, 0 // every connector rule is one or the other
	for _, list := range [][]string{policy.BuiltinAllow, policy.BuiltinGate} {
		for _, rule := range list {
			if _, _, ok := mcpbridge.SplitToolName(rule); ok {
				total++
			}
		}
	}
	for server, rules := range registered {
		for _, rule := range rules {
			checkedTools++
			if !tools[rule] {
				t.Errorf("built-in policy rule %q names no tool of connector %q", rule, server)
			}
		}
	}
	for _, rules := range unregistered {
		for _, rule := range rules {
			checkedInert++
			if d := pol.Decide(rule); d != policy.Gate {
				t.Errorf("built-in rule %q for an unregistered connector decides %s; a user's server of that name must be gated", rule, d)
			}
		}
	}
	t.Logf("%d connector rules: %d matched to a registered connector's tool, %d inert (connector not registered)", total, checkedTools, checkedInert)
	if checkedTools == 0 || checkedTools+checkedInert != total {
		t.Fatalf("checked %d+%d of %d connector rules", checkedTools, checkedInert, total)
	}
}

// testMCPServerArg makes the test binary (see TestMain) a stdio MCP server:
// `<self> test-mcp-server MARKDIR TOOL...` serves TOOLs, each of which
// creates MARKDIR/TOOL when called, so a test can tell whether it ran. Each
// claims to be read-only (readOnlyHint), which a user's server is not
// believed.
const testMCPServerArg = "test-mcp-server"

func runTestMCPServer(args []string) int {
	if len(args) < 2 {
		return 2
	}
	mark := args[0]
	s := mcp.NewServer(&mcp.Implementation{Name: "user-server", Version: "1"}, nil)
	for _, name := range args[1:] {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.WriteFile(filepath.Join(mark, name), nil, 0o600)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// TestUserServerNamedLikeBuiltinConnectorIsGated runs steward serve with the
// user's own MCP servers named like the connectors the built-in rules
// mention but this binary does not register (wiki, writeops, actions), serving
// tools of exactly the names those rules allow and annotated readOnlyHint.
// Their tools must be gated — shown as "gate" on the System page and
// answered by an approval card, not run — while Steward's own connector
// reads, allowed by their own readOnlyHint, stay allowed.
func TestUserServerNamedLikeBuiltinConnectorIsGated(t *testing.T) {
	_, unregistered := builtinConnectorRules()
	if len(unregistered) == 0 {
		// Every connector the rules name is registered: a user server can
		// no longer take such a name (TestServeStartsConnectors).
		t.Skip("every connector named by a built-in rule is registered in this binary")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := llmtest.NewServer(t)
	vars := map[string]string{}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	marks := t.TempDir()
	servers := map[string]any{}
	var first string
	for server, rules := range unregistered {
		args := []string{testMCPServerArg, marks}
		for _, rule := range rules {
			_, tool, _ := mcpbridge.SplitToolName(rule)
			args = append(args, tool)
			if first == "" || rule < first {
				first = rule
			}
		}
		servers[server] = map[string]any{"command": self, "args": args}
	}
	cfgJSON, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), cfgJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: first, Arguments: `{}`}}}},
		llmtest.Reply{Content: "Understood."})

	base, token := runServe(t, env, home)

	// The System page lists every tool with its decision once the user's
	// servers and the shell connector are up. Until a connector is ready its
	// tools are listed from the bundled manifest, unavailable, and gated (no
	// annotation has been seen yet), so only available rows count.
	decisions := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/system/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		var st struct {
			Tools []struct {
				Name, Decision string
				Available      bool
			}
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		clear(decisions)
		for _, tool := range st.Tools {
			if tool.Available {
				decisions[tool.Name] = tool.Decision
			}
		}
		ready := decisions["mcp__shell__find_files"] != ""
		for _, rules := range unregistered {
			for _, rule := range rules {
				ready = ready && decisions[rule] != ""
			}
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools not listed within 60 s: %v\nlogs:\n%s", decisions, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checked := 0
	for _, rules := range unregistered {
		for _, rule := range rules {
			checked++
			if decisions[rule] != string(policy.Gate) {
				t.Errorf("%s from the user's server: decision %q, want gate", rule, decisions[rule])
			}
		}
	}
	if d := decisions["mcp__shell__find_files"]; d != string(policy.Allow) {
		t.Errorf("Steward's own shell connector read: decision %q, want allow", d)
	}
	t.Logf("%d tools of user servers checked as gated", checked)

	// A call the model makes to such a tool becomes an approval card; denied,
	// the user's server never runs it.
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	ws, send := dialHost(t, wctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "wiki"})
	sent, asked := false, false
	for {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v\nlogs:\n%s", err, logs)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			if chatID, _ := f["chat"].(map[string]any)["id"].(string); !sent && chatID != "" {
				sent = true
				send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: "what does my wiki say?"})
			}
		case protocol.TypeApprovalRequest:
			var req protocol.ApprovalRequest
			json.Unmarshal(data, &req)
			if req.Tool != first {
				t.Fatalf("approval asked for %q, want %q", req.Tool, first)
			}
			asked = true
			send(protocol.ApprovalRespond{Envelope: protocol.Env(protocol.TypeApprovalRespond, ""), ApprovalID: req.ApprovalID, Decision: protocol.DecisionDeny})
		case protocol.TypeTurnDone:
			if !asked {
				t.Fatalf("the turn ended without an approval card for %s: %v", first, f)
			}
			entries, _ := os.ReadDir(marks)
			if len(entries) != 0 {
				t.Errorf("the user's server ran %v after a denial", entries)
			}
			return
		}
	}
}
