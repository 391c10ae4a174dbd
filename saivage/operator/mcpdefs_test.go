package operator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

func TestMCPDefinitionRoutes(t *testing.T) {
	s := startWith(t, nil, "")
	url := mcpServer(t)
	body := fmt.Sprintf(`{"name":"dyn","transport":"http","url":%q}`, url)
	if code, m := s.do("POST", "/api/mcp/servers", token, body); code != 200 || m["server"].(map[string]any)["source"] != "dynamic" {
		t.Fatalf("register = %d %v", code, m)
	}
	if code, m := s.do("POST", "/api/mcp/servers", token, body); code != 409 || !strings.Contains(fmt.Sprint(m), "already registered") {
		t.Errorf("second register = %d %v", code, m)
	}
	if code, m := s.do("POST", "/api/mcp/servers", token, `{"name":"dyn2","transport":"http","url":"x","autostart":true}`); code != 400 {
		t.Errorf("unknown field = %d %v", code, m)
	}
	if code, m := s.do("POST", "/api/mcp/servers/dyn/start", token, ""); code != 200 {
		t.Fatalf("start = %d %v", code, m)
	}
	var first, second struct {
		Server struct {
			CatalogUUID string `json:"catalog_uuid"`
			Tools       int
		}
	}
	code, _, raw := s.raw("POST", "/api/mcp/servers/dyn/refresh", token, "")
	if code != 200 || jsonInto(raw, &first) != nil || first.Server.Tools != 1 || first.Server.CatalogUUID == "" {
		t.Fatalf("refresh = %d %s", code, raw)
	}
	_, _, raw = s.raw("POST", "/api/mcp/servers/dyn/refresh", token, "")
	if jsonInto(raw, &second) != nil || second.Server.CatalogUUID == first.Server.CatalogUUID {
		t.Errorf("second refresh kept the catalog: %s", raw)
	}
	var list struct{ Servers []map[string]any }
	s.get("/api/mcp/servers", &list)
	if len(list.Servers) != 2 || list.Servers[0]["source"] != "config" || list.Servers[1]["name"] != "dyn" || list.Servers[1]["state"] != "ready" {
		t.Errorf("servers = %+v", list.Servers)
	}
	if code, m := s.do("POST", "/api/mcp/servers/dyn/replace", token, fmt.Sprintf(`{"transport":"http","url":%q,"headers":{"X-Mark":"2"}}`, url)); code != 200 || m["server"].(map[string]any)["state"] != "not_started" {
		t.Errorf("replace = %d %v", code, m)
	}
	defs, _ := os.ReadFile(filepath.Join(s.app.Runtime.Project().StateDir, "mcp-servers.json"))
	if !strings.Contains(string(defs), "X-Mark") {
		t.Errorf("definitions = %s", defs)
	}
	if code, m := s.do("POST", "/api/mcp/servers/dyn/unregister", token, ""); code != 200 {
		t.Errorf("unregister = %d %v", code, m)
	}
	if code, _ := s.do("POST", "/api/mcp/servers/dyn/unregister", token, ""); code != 409 {
		t.Errorf("second unregister = %d", code)
	}
	var actions struct{ Actions []map[string]any }
	s.get("/api/control-actions", &actions)
	var seen []string
	for _, a := range actions.Actions {
		if d, ok := a["data"].(map[string]any); ok && a["type"] == "mcp_definition" {
			seen = append(seen, fmt.Sprint(d["action"]))
		}
	}
	if got := strings.Join(seen, ","); !strings.Contains(got, "register") || !strings.Contains(got, "replace") || !strings.Contains(got, "unregister") {
		t.Errorf("control actions = %v", seen)
	}
}

func jsonInto(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }

// TestConversationImageReadsPublishedImage: a view_image result row keeps a
// descriptor of images/<UUID>.png; the image route serves those bytes and
// refuses them once the file changed.
func TestConversationImageReadsPublishedImage(t *testing.T) {
	s := start(t, nil)
	src, err := os.ReadFile(filepath.Join("..", "images", "testdata", "quad.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "quad.png"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	s.script.Add("analyst", rtt.Call("view_image", map[string]any{"path": "quad.png"}), rtt.Text("Four colours."))
	if code, m := s.do("POST", "/api/chat", token, `{"message":"look","wait":true}`); code != 200 {
		t.Fatalf("chat = %d %v", code, m)
	}
	rows, err := s.app.Runtime.Project().Sessions.Segment(filepath.Join(s.dir, ".saivage", "agents", "analyst"), "agent:analyst:global", 1)
	if err != nil {
		t.Fatal(err)
	}
	var rowID, path string
	for _, r := range rows {
		if r.Kind == "tool_result" && r.Name == "view_image" {
			var c struct {
				Images []struct{ Path string } `json:"images"`
			}
			_ = json.Unmarshal(r.Content, &c)
			if len(c.Images) == 1 {
				rowID, path = r.ID, c.Images[0].Path
			}
		}
	}
	if rowID == "" {
		t.Fatal("no view_image row with an image descriptor")
	}
	url := "/api/agents/agent:analyst:global/conversation/images?segment=1&index=0&row=" + rowID
	code, hdr, body := s.raw("GET", url, token, "")
	published, _ := os.ReadFile(filepath.Join(s.dir, ".saivage", path))
	if code != 200 || hdr.Get("Content-Type") != "image/png" || body != string(published) {
		t.Fatalf("image = %d %s (%d bytes, published %d)", code, hdr.Get("Content-Type"), len(body), len(published))
	}
	if err := os.WriteFile(filepath.Join(s.dir, ".saivage", path), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := s.raw("GET", url, token, ""); code != 404 {
		t.Errorf("changed image = %d", code)
	}
}

// TestMCPFrozenRoutesUnderGitWorkflow: with the Git workflow on, the
// register, replace and unregister routes answer 409 naming the workflow,
// and the server list and mcp-servers.json are unchanged.
func TestMCPFrozenRoutesUnderGitWorkflow(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	s := startTemplate(t, "classic-git", gitCheckout(t), nil, func(_, cfg string) string { return cfg })
	var before struct{ Servers []map[string]any }
	s.get("/api/mcp/servers", &before)
	if len(before.Servers) != 1 || before.Servers[0]["name"] != "docs" {
		t.Fatalf("servers = %+v", before.Servers)
	}
	url := mcpServer(t)
	for _, c := range []struct{ path, body string }{
		{"/api/mcp/servers", fmt.Sprintf(`{"name":"dyn","transport":"http","url":%q}`, url)},
		{"/api/mcp/servers/docs/replace", fmt.Sprintf(`{"transport":"http","url":%q}`, url)},
		{"/api/mcp/servers/docs/unregister", ""},
	} {
		if code, m := s.do("POST", c.path, token, c.body); code != 409 || !strings.Contains(fmt.Sprint(m), "Git workflow is on") {
			t.Errorf("POST %s = %d %v", c.path, code, m)
		}
	}
	var after struct{ Servers []map[string]any }
	s.get("/api/mcp/servers", &after)
	if fmt.Sprint(after.Servers) != fmt.Sprint(before.Servers) {
		t.Errorf("servers changed: %+v -> %+v", before.Servers, after.Servers)
	}
	if _, err := os.Stat(filepath.Join(s.app.Runtime.Project().StateDir, "mcp-servers.json")); !os.IsNotExist(err) {
		t.Errorf("mcp-servers.json was written: %v", err)
	}
}

// gitCheckout makes dir a clean checkout of main with one commit.
func gitCheckout(t *testing.T) func(dir string) {
	return func(dir string) {
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "Test"}, {"config", "user.email", "test@example.com"}} {
			runGit(t, dir, args...)
		}
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		runGit(t, dir, "add", "-A")
		runGit(t, dir, "commit", "-q", "-m", "initial")
	}
}

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
