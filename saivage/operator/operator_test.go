package operator_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/operator"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
	"github.com/agentstack/agentstack/saivage/state"
)

const token = "op-token-0123456789"

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type server struct {
	t      *testing.T
	dir    string
	app    *operator.App
	script *runtimetest.Script
}

// start initialises a project with a secret provider key and starts it.
func start(t *testing.T, env map[string]string) *server {
	t.Helper()
	return startWith(t, env, "")
}

// startWith is start with more mcpServers entries (YAML lines).
func startWith(t *testing.T, env map[string]string, moreMCP string) *server {
	t.Helper()
	return startEdited(t, env, func(_, cfg string) string { return cfg + moreMCP })
}

// startEdited is start with the project's config (ending in the mcpServers
// block) rewritten by edit, which may also write files under dir.
func startEdited(t *testing.T, env map[string]string, edit func(dir, cfg string) string) *server {
	t.Helper()
	return startTemplate(t, "", nil, env, edit)
}

// startTemplate is startEdited on a project made from template, after
// prepare (when not nil) has run on the empty project directory.
func startTemplate(t *testing.T, template string, prepare func(dir string), env map[string]string, edit func(dir, cfg string) string) *server {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	if prepare != nil {
		prepare(dir)
	}
	if _, _, err := project.Init(ctx, project.InitOptions{Options: project.Options{Root: dir}, Objective: "Test the API.", Template: template}); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t)
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	cfg := strings.Replace(string(b), "    baseUrl: http://127.0.0.1:4000/v1\n", "    baseUrl: "+srv.URL+"\n    apiKey: ${PROVIDER_KEY}\n", 1)
	cfg += "mcpServers:\n  docs:\n    transport: http\n    url: https://user:pw@mcp.example.com/v1?key=q\n    headers: {Authorization: Bearer mcp-header-secret}\n"
	cfg = edit(dir, cfg)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if env == nil {
		env = map[string]string{}
	}
	env["PROVIDER_KEY"] = "sk-provider-secret-value-1234567890"
	if _, ok := env[operator.EnvAuthToken]; !ok {
		env[operator.EnvAuthToken] = token
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	app, err := operator.Start(ctx, operator.StartOptions{
		Flags:     config.Flags{Root: dir, Port: freePort(t)},
		LookupEnv: lookup,
		Publisher: state.New(state.Options{Fatal: func(err error) { t.Errorf("fatal: %v", err) }}),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: dir, app: app, script: runtimetest.NewScript(t, srv)}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	return s
}

func (s *server) do(method, path, auth, body string) (int, map[string]any) {
	s.t.Helper()
	code, _, raw := s.raw(method, path, auth, body)
	var m map[string]any
	_ = json.Unmarshal([]byte(raw), &m)
	if m == nil {
		m = map[string]any{"_raw": raw}
	}
	return code, m
}

func TestStartPublishesEndpointAndStaysStopped(t *testing.T) {
	s := start(t, nil)
	obs := lock.Inspect(filepath.Join(s.dir, ".saivage"))
	if obs.Status != lock.Live || obs.Endpoint != s.app.URL {
		t.Fatalf("lock = %+v, url %s", obs, s.app.URL)
	}
	code, m := s.do("GET", "/health", "", "")
	if code != 200 || m["ok"] != true {
		t.Fatalf("health = %d %v", code, m)
	}
	code, m = s.do("GET", "/health/ready", "", "")
	if code != 200 || m["status"] != "stopped" {
		t.Fatalf("ready = %d %v", code, m)
	}
	code, m = s.do("GET", "/api/runtime/status", token, "")
	if code != 200 || m["status"] != "stopped" {
		t.Fatalf("status = %d %v", code, m)
	}
	// A second server on the same project is refused by the lock.
	_, err := operator.Start(context.Background(), operator.StartOptions{Flags: config.Flags{Root: s.dir, Port: freePort(t)},
		LookupEnv: func(k string) (string, bool) {
			return map[string]string{operator.EnvAuthToken: token}[k], k == operator.EnvAuthToken
		}})
	if err == nil || !strings.Contains(err.Error(), "live") {
		t.Fatalf("second start: %v", err)
	}
	if err := s.app.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if obs := lock.Inspect(filepath.Join(s.dir, ".saivage")); obs.Status != lock.Missing {
		t.Fatalf("lock after close = %+v", obs)
	}
}

func TestAuthBeforeValidation(t *testing.T) {
	s := start(t, nil)
	tests := []struct {
		name, method, path, auth, body string
		want                           int
	}{
		{"no token, malformed card id", "GET", "/api/cards/NOT..VALID", "", "", 401},
		{"wrong token, malformed card id", "GET", "/api/cards/NOT..VALID", "wrong", "", 401},
		{"no token, body on bodyless route", "POST", "/api/runtime/pause", "", `{"x":1}`, 401},
		{"no token, unknown route", "GET", "/api/nope", "", "", 401},
		{"no token, invalid chat body", "POST", "/api/chat", "", `{"bogus":true}`, 401},
		{"token, malformed card id", "GET", "/api/cards/NOT..VALID", token, "", 400},
		{"token, unknown card", "GET", "/api/cards/project.zz", token, "", 404},
		{"token, invalid chat body", "POST", "/api/chat", token, `{"bogus":true}`, 400},
		{"token, unknown route", "GET", "/api/nope", token, "", 404},
		{"token, bad version", "GET", "/api/cards/project/history/zero", token, "", 400},
		{"public health", "GET", "/health", "", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, m := s.do(tt.method, tt.path, tt.auth, tt.body)
			if code != tt.want {
				t.Fatalf("%s %s = %d %v, want %d", tt.method, tt.path, code, m, tt.want)
			}
			if code == 401 && m["error"] != "Unauthorized" {
				t.Errorf("401 body = %v", m)
			}
		})
	}
}

func TestControlRoutesAreBodyless(t *testing.T) {
	s := start(t, nil)
	for _, route := range []string{"/api/runtime/pause", "/api/runtime/resume", "/api/runtime/stop-project", "/api/runtime/run"} {
		code, m := s.do("POST", route, token, `{}`)
		if code != 400 || m["error"] != "BodyNotAllowed" {
			t.Errorf("%s with a body = %d %v", route, code, m)
		}
	}
	// Without a body they reach the Supervisor: stopping a stopped runtime is
	// fine, pausing one is not admitted.
	if code, m := s.do("POST", "/api/runtime/stop-project", token, ""); code != 200 || m["ok"] != true {
		t.Errorf("stop = %d %v", code, m)
	}
	if code, m := s.do("POST", "/api/runtime/pause", token, ""); code != 409 || m["error"] != "NotAdmitted" {
		t.Errorf("pause while stopped = %d %v", code, m)
	}
	// A chunked body (no Content-Length) is refused too.
	req, _ := http.NewRequest("POST", s.app.URL+"/api/runtime/resume", io.MultiReader(strings.NewReader("x")))
	req.Header.Set("Authorization", "Bearer "+token)
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("chunked body = %d", resp.StatusCode)
	}
}

func TestConfigIsRedacted(t *testing.T) {
	s := start(t, nil)
	req, _ := http.NewRequest("GET", s.app.URL+"/api/config", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	if resp.StatusCode != 200 {
		t.Fatalf("config = %d %s", resp.StatusCode, body)
	}
	for _, secret := range []string{"sk-provider-secret-value-1234567890", "mcp-header-secret", "user:pw", "key=q", "127.0.0.1:", "baseUrl"} {
		if strings.Contains(body, secret) {
			t.Errorf("/api/config leaks %q:\n%s", secret, body)
		}
	}
	var m struct {
		Config struct {
			Providers  map[string]map[string]any `json:"providers"`
			MCPServers map[string]map[string]any `json:"mcpServers"`
			Agents     map[string]any            `json:"agents"`
		} `json:"config"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.Providers["gateway"]["apiKey"] != config.Redacted || m.Config.MCPServers["docs"]["url"] != "https://mcp.example.com/v1?[redacted]" ||
		len(m.Config.Agents) != 5 {
		t.Errorf("redacted config = %+v", m.Config)
	}
}

func TestTokenFileIsGeneratedOnce(t *testing.T) {
	s := start(t, map[string]string{})
	// start() set the env token; restart without it to get a file token.
	if err := s.app.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"PROVIDER_KEY": "sk-provider-secret-value-1234567890"}[k]
		return v, ok
	}
	app, err := operator.Start(context.Background(), operator.StartOptions{Flags: config.Flags{Root: s.dir, Port: freePort(t)}, LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.dir, ".saivage", operator.TokenFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	tok, err := operator.ReadTokenFile(path)
	if err != nil || len(tok) < 32 || app.TokenSource != path {
		t.Fatalf("token %q %v source %s", tok, err, app.TokenSource)
	}
	app.Close(context.Background())
	app, err = operator.Start(context.Background(), operator.StartOptions{Flags: config.Flags{Root: s.dir, Port: freePort(t)}, LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	again, _ := operator.ReadTokenFile(path)
	if again != tok {
		t.Fatal("the token changed on restart")
	}
	req, _ := http.NewRequest("GET", app.URL+"/api/state", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("state with file token: %v %v", resp, err)
	}
	resp.Body.Close()
	// A token file readable by others is refused.
	os.Chmod(path, 0o644)
	if _, err := operator.ReadTokenFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable token: %v", err)
	}
}

func TestLiveSocketSendsHints(t *testing.T) {
	s := start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Without a ticket the socket is refused.
	if _, resp, err := websocket.Dial(ctx, strings.Replace(s.app.URL, "http", "ws", 1)+"/api/live", nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without ticket: %v %v", resp, err)
	}
	code, m := s.do("POST", "/api/auth/ws-ticket", token, "")
	if code != 200 {
		t.Fatalf("ticket = %d %v", code, m)
	}
	ticket := m["ticket"].(string)
	conn, _, err := websocket.Dial(ctx, strings.Replace(s.app.URL, "http", "ws", 1)+"/api/live?ticket="+ticket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, hello, err := conn.Read(ctx)
	if err != nil || !strings.Contains(string(hello), `"hello":"saivage"`) {
		t.Fatalf("hello = %s %v", hello, err)
	}
	// A ticket is single use.
	if _, resp, err := websocket.Dial(ctx, strings.Replace(s.app.URL, "http", "ws", 1)+"/api/live?ticket="+ticket, nil); err == nil || resp.StatusCode != 401 {
		t.Fatalf("reused ticket accepted")
	}
	// A control action hints the runtime (coalesced into one batch).
	s.do("POST", "/api/runtime/stop-project", token, "")
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var batch struct{ Hints []operator.Hint }
		if json.Unmarshal(msg, &batch) == nil && len(batch.Hints) > 0 {
			found := false
			for _, h := range batch.Hints {
				found = found || h.Topic == "events"
			}
			if found {
				break
			}
		}
	}
}

func TestSyncHubCoalesces(t *testing.T) {
	h := operator.NewSyncHub(20 * time.Millisecond)
	ch, cancel := h.Subscribe()
	defer cancel()
	for i := range 50 {
		h.Hint("card", "project."+strconv.Itoa(i%3))
	}
	select {
	case batch := <-ch:
		if len(batch) != 3 {
			t.Fatalf("batch = %v, want 3 distinct hints", batch)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no batch")
	}
}

func TestChatIsSerialWithoutQueue(t *testing.T) {
	s := start(t, nil)
	hold := make(chan struct{})
	s.script.Add("analyst", llmtest.Reply{Content: "Let me think about that.", Hold: hold})
	code, m := s.do("POST", "/api/chat", token, `{"message":"What is the status?"}`)
	if code != 202 || m["accepted"] != true {
		t.Fatalf("first submission = %d %v", code, m)
	}
	code, m = s.do("POST", "/api/chat", token, `{"message":"Are you there?"}`)
	if code != 409 || m["error"] != "Busy" {
		t.Fatalf("second submission = %d %v", code, m)
	}
	if code, m := s.do("GET", "/api/chat", token, ""); code != 200 || m["busy"] != true {
		t.Fatalf("chat info = %d %v", code, m)
	}
	close(hold)
	res, err := s.app.Runtime.Analyst().Wait(context.Background())
	if err != nil || res.Text != "Let me think about that." {
		t.Fatalf("turn = %+v %v", res, err)
	}
	// The refused submission left no trace; the accepted one is in the session.
	var conv struct {
		Rows []struct {
			Kind    string
			Content json.RawMessage
		}
	}
	req, _ := http.NewRequest("GET", s.app.URL+"/api/agents/agent:analyst:global/conversation", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&conv)
	resp.Body.Close()
	var users []string
	for _, r := range conv.Rows {
		if r.Kind == "user" {
			users = append(users, string(r.Content))
		}
	}
	if len(users) != 1 || !strings.Contains(users[0], "What is the status?") {
		t.Errorf("user rows = %v", users)
	}
	if code, m := s.do("POST", "/api/chat", token, `{"message":"   "}`); code != 400 {
		t.Errorf("empty message = %d %v", code, m)
	}
}
