package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/operator"
	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

// leakedKey is a credential an agent writes into a record; no response
// may show it.
const leakedKey = "sk-live-abcdefghijklmnop0123456789"

// raw performs a request and returns the status, headers and body.
func (s *server) raw(method, path, auth, body string) (int, http.Header, string) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.app.URL+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// get decodes a 200 answer into out.
func (s *server) get(path string, out any) {
	s.t.Helper()
	code, _, body := s.raw("GET", path, token, "")
	if code != 200 {
		s.t.Fatalf("GET %s = %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		s.t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mcpServer is a real MCP server (streamable HTTP) on loopback.
func mcpServer(t *testing.T) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "lookup", Version: "1"}, nil)
	type args struct {
		Term string `json:"term"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "define", Description: "define a term"},
		func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "definition of " + a.Term}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runProject runs a small Run: the Analyst creates a goal whose brief
// carries a credential, starts the Run and calls an MCP tool; the goal's
// Planner creates one task whose Executor writes a file and runs a
// command; the Reviewers accept.
func runProject(t *testing.T) *server {
	t.Helper()
	s := startWith(t, nil, "  lookup:\n    transport: http\n    url: "+mcpServer(t)+"\n")
	s.script.Add("analyst",
		rtt.Call("create_card", map[string]any{"parent_id": "project", "type": "goal", "title": "Greeting",
			"records": map[string]string{"brief": "Write hello.txt. The deploy key is " + leakedKey + "."}}),
		rtt.Call("mcp_server_control", map[string]any{"server": "lookup", "action": "start"}),
		rtt.Call("mcp_tool_call", map[string]any{"server": "lookup", "tool": "define", "arguments": map[string]any{"term": "card"}}),
		rtt.Call("start_project", map[string]any{}),
		rtt.Text("Started."),
	)
	s.script.Add("planner@project",
		rtt.Call("activate_card", map[string]any{"card_id": "project.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "project.a: greeting."}),
		rtt.Emit("done", "all goals done", nil),
		rtt.Call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		rtt.Emit("done", "objective met", map[string]any{"verdict": "complete"}),
	)
	s.script.Add("planner@project.a",
		rtt.Call("create_card", map[string]any{"title": "hello.txt", "records": map[string]string{"brief": "Write hello.txt."}}),
		rtt.Call("activate_card", map[string]any{"card_id": "project.a.a"}),
		rtt.Call("write", map[string]any{"path": "record:plan", "content": "1. hello.txt"}),
		rtt.Emit("done", "done", nil),
	)
	s.script.Add("reviewer@project.a", rtt.Emit("done", "accepted", map[string]any{"verdict": "approved"}))
	s.script.Add("executor@project.a.a",
		rtt.Call("write", map[string]any{"path": "hello.txt", "content": "hello\r\n"}),
		rtt.Call("run_command", map[string]any{"command": "echo greeting-output; echo " + leakedKey}),
		rtt.Call("write", map[string]any{"path": "record:summary", "content": "hello.txt written."}),
		rtt.Emit("done", "done", nil),
	)
	s.script.Add("reviewer@project.a.a",
		rtt.Call("write", map[string]any{"path": "record:review", "content": "Approved."}),
		rtt.Emit("done", "approved", map[string]any{"verdict": "approved"}),
	)
	code, m := s.do("POST", "/api/chat", token, `{"message":"Create the goal and start.","wait":true}`)
	if code != 200 {
		t.Fatalf("chat = %d %v", code, m)
	}
	poll(t, "the Run to end", func() bool {
		st := s.app.Runtime.Status()
		return st.Status == "stopped" && st.LastRun != nil
	})
	if st := s.app.Runtime.Status(); st.LastRun.Outcome != "done" {
		t.Fatalf("run = %+v (unconsumed %v)", st.LastRun, s.script.Remaining())
	}
	return s
}

func TestEveryOperationAuthenticatesFirst(t *testing.T) {
	s := start(t, nil)
	seen := map[string]bool{}
	for _, op := range operator.Operations {
		if seen[op.Name] {
			t.Errorf("duplicate operation %s", op.Name)
		}
		seen[op.Name] = true
		path := strings.NewReplacer(":id", "project", ":invocationId", "x.1.1", ":fileKey", "output", ":name", "docs",
			":version", "1", ":cardType", "task").Replace(op.Path)
		if op.Public {
			if code, _, body := s.raw(op.Method, path, "", ""); code != 200 {
				t.Errorf("public %s = %d %s", path, code, body)
			}
			continue
		}
		// No token and an invalid query and body: 401, nothing else.
		if code, _, body := s.raw(op.Method, path+"?bogus=1", "", `{"x":`); code != 401 || !strings.Contains(body, "Unauthorized") {
			t.Errorf("%s %s without a token = %d %s", op.Method, path, code, body)
		}
		// With the token, an undeclared query key is a 400.
		if code, _, body := s.raw(op.Method, path+"?bogus=1", token, ""); code != 400 || !strings.Contains(body, "InvalidQuery") {
			t.Errorf("%s %s?bogus=1 = %d %s", op.Method, path, code, body)
		}
		// A GET never takes a body.
		if op.Method == "GET" {
			if code, _, body := s.raw("GET", path, token, `{}`); code != 400 || !strings.Contains(body, "BodyNotAllowed") {
				t.Errorf("GET %s with a body = %d %s", path, code, body)
			}
		}
	}
	// The registry is the cockpit's too.
	code, hdr, js := s.raw("GET", "/contracts.js", "", "")
	if code != 200 || !strings.Contains(hdr.Get("Content-Type"), "javascript") {
		t.Fatalf("contracts.js = %d %v", code, hdr)
	}
	for name := range seen {
		if !strings.Contains(js, `"`+name+`"`) {
			t.Errorf("contracts.js lacks %s", name)
		}
	}
}

func TestExecutionsAndFiles(t *testing.T) {
	s := runProject(t)
	var list struct {
		Total      int
		HasEarlier bool `json:"has_earlier"`
		Executions []struct {
			ID, Tool, State, Agent string
			Arguments              string
			Result                 *string
			Files                  []struct{ Key, Path string }
		}
	}
	s.get("/api/cards/project.a.a/executions", &list)
	var run, write string
	tools := []string{}
	for _, e := range list.Executions {
		tools = append(tools, e.Agent+":"+e.Tool)
		if e.Tool == "run_command" {
			run = e.ID
			if e.State != "succeeded" || len(e.Files) != 1 || e.Files[0].Key != "output" {
				t.Errorf("run_command row = %+v", e)
			}
		}
		if e.Tool == "write" && strings.Contains(e.Arguments, `"path":"hello.txt"`) {
			write = e.ID
		}
	}
	if run == "" || write == "" || list.Total != len(list.Executions) {
		t.Fatalf("executions = %v (total %d)", tools, list.Total)
	}
	// Bounded: the newest rows, with a flag for earlier ones.
	var page struct {
		Total      int
		HasEarlier bool `json:"has_earlier"`
		Executions []struct{ ID string }
	}
	s.get("/api/cards/project.a.a/executions?limit=1", &page)
	if len(page.Executions) != 1 || !page.HasEarlier || page.Executions[0].ID != list.Executions[len(list.Executions)-1].ID {
		t.Errorf("limit=1 = %+v", page)
	}
	for _, q := range []string{"limit=0", "limit=501", "before=-1", "limit=x"} {
		if code, m := s.do("GET", "/api/cards/project.a.a/executions?"+q, token, ""); code != 400 {
			t.Errorf("executions?%s = %d %v", q, code, m)
		}
	}
	// Exact evidence; the output preview goes through the text owner and is
	// redacted, the download is the same text as an attachment.
	var one struct {
		Execution struct {
			Tool   string
			Result *string
		}
	}
	s.get("/api/cards/project.a.a/executions/"+run, &one)
	if one.Execution.Tool != "run_command" || one.Execution.Result == nil || !strings.Contains(*one.Execution.Result, "greeting-output") {
		t.Errorf("execution = %+v", one)
	}
	var prev struct{ File struct{ Text string } }
	s.get("/api/cards/project.a.a/executions/"+run+"/files/output", &prev)
	if !strings.Contains(prev.File.Text, "greeting-output") || strings.Contains(prev.File.Text, leakedKey) || !strings.Contains(prev.File.Text, "[redacted]") {
		t.Errorf("output preview = %q", prev.File.Text)
	}
	code, hdr, body := s.raw("GET", "/api/cards/project.a.a/executions/"+run+"/files/output/download", token, "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Disposition"), "attachment;") || body != prev.File.Text {
		t.Errorf("download = %d %v %q", code, hdr, body)
	}
	var target struct {
		File struct {
			Text string
			CRLF bool
		}
	}
	s.get("/api/cards/project.a.a/executions/"+write+"/files/target", &target)
	if target.File.Text != "hello\r\n" || !target.File.CRLF {
		t.Errorf("target preview = %+v", target)
	}
	for path, want := range map[string]int{
		"/api/cards/project.a.a/executions/nope":                       400,
		"/api/cards/project.a.a/executions/executor.9.9":               404,
		"/api/cards/project.a.a/executions/" + run + "/files/bin":      400,
		"/api/cards/project.a.a/executions/" + write + "/files/output": 404,
		"/api/cards/project.zz/executions":                             404,
	} {
		if code, m := s.do("GET", path, token, ""); code != want {
			t.Errorf("%s = %d %v, want %d", path, code, m, want)
		}
	}

	// Records: the credential never shows, neither in the record route nor
	// through the Files record alias.
	for _, path := range []string{"/api/cards/project.a/records/brief", "/api/files/content?path=record:project.a/brief",
		"/api/agents/agent:analyst:global/conversation", "/api/cards/project.a/records/brief/versions/1"} {
		code, _, body := s.raw("GET", path, token, "")
		if code != 200 || strings.Contains(body, leakedKey) || !strings.Contains(body, "[redacted]") {
			t.Errorf("%s = %d, leaks or lacks the redaction: %s", path, code, body)
		}
	}

	// Current instructions: the executor's node bindings, no conversation.
	var ins struct {
		Instructions []struct{ Binding, Node, Text string }
	}
	s.get("/api/agents/agent:executor:project.a.a/current-instructions", &ins)
	bindings := map[string]bool{}
	for _, i := range ins.Instructions {
		bindings[i.Binding] = true
		if strings.Contains(i.Text, "greeting-output") {
			t.Errorf("instructions carry conversation text: %q", i.Text)
		}
	}
	if !bindings["agent"] || !bindings["node"] {
		t.Errorf("instructions = %+v", ins)
	}
	if code, m := s.do("GET", "/api/agents/agent:nobody:global/current-instructions", token, ""); code != 404 {
		t.Errorf("unknown session instructions = %d %v", code, m)
	}

	// Receipts and control actions.
	var calls struct {
		Total int
		Calls []struct{ Data map[string]any }
	}
	s.get("/api/external-tool-calls", &calls)
	if calls.Total != 1 || calls.Calls[0].Data["server"] != "lookup" || calls.Calls[0].Data["tool"] != "define" || calls.Calls[0].Data["outcome"] != "ok" {
		t.Errorf("external calls = %+v", calls)
	}
	if _, _, body := s.raw("GET", "/api/external-tool-calls", token, ""); strings.Contains(body, "definition of") || strings.Contains(body, `"term"`) {
		t.Errorf("receipts carry bodies: %s", body)
	}
	var actions struct {
		Actions []struct{ Data map[string]any }
	}
	s.get("/api/control-actions", &actions)
	found := false
	for _, a := range actions.Actions {
		found = found || a.Data["action"] == "start_project"
	}
	if !found {
		t.Errorf("control actions = %+v", actions)
	}
	// MCP hierarchy: the started server lists its tool.
	var tools2 struct {
		Servers []struct {
			Name, State string
			Tools       []struct{ Name string }
		}
	}
	s.get("/api/mcp/tools", &tools2)
	ok := false
	for _, sv := range tools2.Servers {
		ok = ok || (sv.Name == "lookup" && sv.State == "ready" && len(sv.Tools) == 1 && sv.Tools[0].Name == "define")
	}
	if !ok {
		t.Errorf("mcp tools = %+v", tools2)
	}
}

func TestFilesPrivacyAndText(t *testing.T) {
	s := start(t, nil)
	write := func(name, content string) {
		p := filepath.Join(s.dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("notes/readme.md", "\uFEFFline one\r\nline two "+leakedKey+"\r\n")
	write(".env", "API_KEY=x")
	write("deploy/server.pem", "-----BEGIN")
	write("bin.dat", "abc\x00def")
	write("ctrl.txt", strings.Repeat("\x01\x02a", 100))
	write("big.txt", strings.Repeat("a", operator.MaxTextBytes+1))
	write("pic.svg", `<svg xmlns="http://www.w3.org/2000/svg"></svg>`)
	var buf bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	png.Encode(&buf, img)
	write("pic.png", buf.String())
	os.Symlink(filepath.Join(s.dir, ".saivage", "config.yaml"), filepath.Join(s.dir, "cfg-link"))
	os.Symlink("/etc/hostname", filepath.Join(s.dir, "outside"))

	var root struct {
		Entries []struct{ Name, Kind string }
		Hidden  int
	}
	s.get("/api/files", &root)
	names := []string{}
	for _, e := range root.Entries {
		names = append(names, e.Name)
	}
	got := strings.Join(names, ",")
	if strings.Contains(got, ".saivage") || strings.Contains(got, ".env") || !strings.Contains(got, "notes") || root.Hidden < 2 {
		t.Errorf("root listing = %s (hidden %d)", got, root.Hidden)
	}
	var text struct {
		Text      string
		BOM, CRLF bool
		Redacted  bool
	}
	s.get("/api/files/content?path=notes/readme.md", &text)
	if !text.BOM || !text.CRLF || !text.Redacted || !strings.HasPrefix(text.Text, "\uFEFFline one\r\n") || strings.Contains(text.Text, leakedKey) {
		t.Errorf("text = %+v", text)
	}
	tests := []struct {
		path string
		want int
		code string
	}{
		{"/api/files/content?path=.env", 403, "PrivatePath"},
		{"/api/files/content?path=deploy/server.pem", 403, "PrivatePath"},
		{"/api/files/content?path=.saivage/auth-token", 403, "PrivatePath"},
		{"/api/files?path=.saivage", 403, "PrivatePath"},
		{"/api/files/content?path=cfg-link", 403, "PrivatePath"},
		{"/api/files/content?path=outside", 403, "PrivatePath"},
		{"/api/files/content?path=../etc/passwd", 400, "InvalidPath"},
		{"/api/files/content?path=/etc/passwd", 400, "InvalidPath"},
		{"/api/files/content?path=notes//readme.md", 400, "InvalidPath"},
		{"/api/files/content?path=missing.txt", 404, "NotFound"},
		{"/api/files/content?path=bin.dat", 415, "NotText"},
		{"/api/files/content?path=ctrl.txt", 415, "NotText"},
		{"/api/files/content?path=big.txt", 413, "TooLarge"},
		{"/api/files/content?path=record:project.zz/brief", 404, "NotFound"},
		{"/api/files/content?path=record:project/nope", 404, "NotFound"},
		{"/api/files/image?path=pic.svg", 415, "NotImage"},
		{"/api/files/image?path=.env", 403, "PrivatePath"},
	}
	for _, tt := range tests {
		code, m := s.do("GET", tt.path, token, "")
		if code != tt.want || m["error"] != tt.code {
			t.Errorf("%s = %d %v, want %d %s", tt.path, code, m, tt.want, tt.code)
		}
	}
	code, hdr, body := s.raw("GET", "/api/files/image?path=pic.png", token, "")
	if code != 200 || hdr.Get("Content-Type") != "image/png" || body != buf.String() || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("image = %d %v", code, hdr)
	}
	// A card alias lists the card's records and never falls through.
	var alias struct{ Entries []struct{ Name, Path string } }
	s.get("/api/files?path=record:project", &alias)
	if len(alias.Entries) == 0 || !strings.HasPrefix(alias.Entries[0].Path, "record:project/") {
		t.Errorf("alias = %+v", alias)
	}
}

func TestSystemRoutes(t *testing.T) {
	s := start(t, nil)
	// A content-policy refusal is counted and located.
	s.script.Add("analyst", llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"}, rtt.Text("Fine."))
	if code, m := s.do("POST", "/api/chat", token, `{"message":"hello","wait":true}`); code != 200 {
		t.Fatalf("chat = %d %v", code, m)
	}
	var cp struct {
		Refusals int
		Latest   map[string]any
	}
	s.get("/api/runtime/content-policy", &cp)
	if cp.Refusals != 1 || cp.Latest["session"] != "agent:analyst:global" {
		t.Errorf("content policy = %+v", cp)
	}
	// Errors show the refusal, never the informational control action.
	s.do("POST", "/api/runtime/stop-project", token, "")
	var errs struct {
		Events []struct{ Type string }
	}
	s.get("/api/debug/errors", &errs)
	if len(errs.Events) != 1 || errs.Events[0].Type != "content_policy_refusal" {
		t.Errorf("errors = %+v", errs)
	}
	// Providers: routes and names, no endpoint or key.
	code, _, body := s.raw("GET", "/api/providers", token, "")
	if code != 200 || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "sk-provider") || !strings.Contains(body, `"routes"`) ||
		!strings.Contains(body, `"has_api_key": true`) {
		t.Errorf("providers = %d %s", code, body)
	}
	// Workflows: topology per type; graphs without prompt bodies.
	var pres struct {
		States []struct{ ID, Kind string }
		Edges  []struct{ From, To string }
	}
	s.get("/api/workflows/task/presentation", &pres)
	if len(pres.States) < 3 || len(pres.Edges) < 2 {
		t.Errorf("presentation = %+v", pres)
	}
	for path, want := range map[string]int{"/api/workflows/nope/presentation": 404, "/api/workflows/Bad..Type/presentation": 400} {
		if code, m := s.do("GET", path, token, ""); code != want {
			t.Errorf("%s = %d %v", path, code, m)
		}
	}
	code, _, body = s.raw("GET", "/api/debug/graphs", token, "")
	if code != 200 || !strings.Contains(body, `"card_type": "task"`) || strings.Contains(body, "You are") || strings.Contains(body, "baseUrl") {
		t.Errorf("graphs = %d %s", code, body[:min(len(body), 400)])
	}
	// Doctor: healthy, then a damaged card head is a diagnostic, not a 500.
	var doc struct {
		OK       bool
		Checked  int `json:"cards_checked"`
		Problems []struct{ Card, Error string }
	}
	s.get("/api/debug/doctor", &doc)
	if !doc.OK || doc.Checked != 1 {
		t.Errorf("doctor = %+v", doc)
	}
	// MCP control: validation and unknown servers.
	for path, want := range map[string]int{"/api/mcp/servers/nope/start": 404, "/api/mcp/servers/bad%20name/stop": 400} {
		if code, m := s.do("POST", path, token, ""); code != want {
			t.Errorf("%s = %d %v", path, code, m)
		}
	}
	// Conversation images: the descriptor is validated and exact.
	for path, want := range map[string]int{
		"/api/agents/agent:analyst:global/conversation/images":                    400,
		"/api/agents/agent:analyst:global/conversation/images?segment=1":          400,
		"/api/agents/agent:analyst:global/conversation/images?segment=1&row=nope": 404,
		"/api/agents/agent:analyst:global/conversation/images?segment=99&row=x":   404,
	} {
		if code, m := s.do("GET", path, token, ""); code != want {
			t.Errorf("%s = %d %v", path, code, m)
		}
	}
}

func TestDoctorReportsDamage(t *testing.T) {
	s := runProject(t)
	head := filepath.Join(s.dir, ".saivage", "cards", "project.a.a", "head.json")
	if _, err := os.Stat(head); err != nil {
		t.Skipf("card layout differs: %v", err)
	}
	os.WriteFile(head, []byte("{broken"), 0o644)
	var doc struct {
		OK       bool
		Checked  int `json:"cards_checked"`
		Problems []struct{ Card, Error string }
	}
	s.get("/api/debug/doctor", &doc)
	if doc.OK || len(doc.Problems) != 1 || doc.Problems[0].Card != "project.a.a" || doc.Checked != 3 {
		t.Errorf("doctor = %+v", doc)
	}
}

func TestWorkGC(t *testing.T) {
	s := start(t, nil)
	work := filepath.Join(s.dir, ".saivage", "work")
	old := time.Now().Add(-48 * time.Hour)
	for i, name := range []string{"a.out", "b.out", "c.out"} {
		p := filepath.Join(work, "scratch", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte("x"), 100), 0o644)
		os.Chtimes(p, old.Add(time.Duration(i)*time.Hour), old.Add(time.Duration(i)*time.Hour))
	}
	fresh := filepath.Join(work, "scratch", "fresh.out")
	os.WriteFile(fresh, []byte("new"), 0o644)
	for _, body := range []string{`{}`, `{"mode":"all"}`, `{"mode":"delete","extra":1}`, `{"mode":"delete","before":"2026-01-01T00:00:00"}`,
		`{"mode":"delete","target_bytes":-1}`} {
		if code, m := s.do("POST", "/api/runtime/gc-work", token, body); code != 400 {
			t.Errorf("gc %s = %d %v", body, code, m)
		}
	}
	type result struct {
		Mode, Disposition, Restoration string
		Result                         *struct {
			Would struct {
				Files int
				Bytes int64
			} `json:"would_delete"`
			Deleted   struct{ Files int } `json:"deleted"`
			Remaining int64               `json:"accounted_remaining_bytes"`
			Known     bool                `json:"whole_work_size_known"`
		}
	}
	before := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	var dry result
	code, _, body := s.raw("POST", "/api/runtime/gc-work", token, `{"mode":"dry_run","before":"`+before+`"}`)
	json.Unmarshal([]byte(body), &dry)
	if code != 200 || dry.Disposition != "completed" || dry.Result.Would.Files != 3 || dry.Result.Deleted.Files != 0 || dry.Result.Known {
		t.Fatalf("dry run = %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(work, "scratch", "a.out")); err != nil {
		t.Fatal("a dry run deleted a file")
	}
	// Delete down to 150 accounted bytes: the two oldest go.
	var del result
	code, _, body = s.raw("POST", "/api/runtime/gc-work", token, `{"mode":"delete","before":"`+before+`","target_bytes":150}`)
	json.Unmarshal([]byte(body), &del)
	if code != 200 || del.Result.Deleted.Files != 2 || del.Result.Remaining != 103 {
		t.Fatalf("delete = %d %s", code, body)
	}
	for name, exists := range map[string]bool{"a.out": false, "b.out": false, "c.out": true, "fresh.out": true} {
		if _, err := os.Stat(filepath.Join(work, "scratch", name)); (err == nil) != exists {
			t.Errorf("%s exists = %v", name, err == nil)
		}
	}
}

func TestRestartNeedsConfirmation(t *testing.T) {
	s := start(t, nil)
	if code, m := s.do("POST", "/api/runtime/restart-server", token, `{"confirm":"yes"}`); code != 400 {
		t.Errorf("unconfirmed = %d %v", code, m)
	}
	select {
	case <-s.app.RestartRequested():
		t.Fatal("restart requested without confirmation")
	default:
	}
	code, m := s.do("POST", "/api/runtime/restart-server", token, `{"confirm":"restart-server"}`)
	if code != 202 || m["scheduled"] != true {
		t.Fatalf("confirmed = %d %v", code, m)
	}
	select {
	case <-s.app.RestartRequested():
	case <-time.After(30 * time.Second):
		t.Fatal("no restart after the confirmed answer")
	}
}
