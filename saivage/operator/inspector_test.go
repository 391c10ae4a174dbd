package operator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/operator"
)

// envInspector names a directory where CI has run
// `npm install --prefix DIR @modelcontextprotocol/inspector@2.12.0`.
const envInspector = "SAIVAGE_TEST_MCP_INSPECTOR"

// TestExternalAnalystWithInspectorCLI: the MCP Inspector's CLI, a
// third-party client, lists the external Analyst's tools, creates a card
// with them and is refused with a wrong token.
func TestExternalAnalystWithInspectorCLI(t *testing.T) {
	dir := os.Getenv(envInspector)
	if dir == "" {
		t.Skipf("%s is not set (CI installs the pinned MCP Inspector there)", envInspector)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s but the inspector is not installed there: %v", envInspector, dir, err)
	}
	s := start(t, map[string]string{"SAIVAGE_ANALYST_MODE": "both", operator.EnvAnalystMCPToken: mcpToken})
	home := t.TempDir()
	inspect := func(tok string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--cli", s.app.AnalystMCPURL, "--transport", "http", "--header", "Authorization: Bearer " + tok}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := inspect(mcpToken, "--method", "tools/list")
	if err != nil || !strings.Contains(out, `"reopen_card"`) || !strings.Contains(out, `"start_project"`) {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	out, err = inspect(mcpToken, "--method", "tools/call", "--tool-name", "create_card", "--tool-arg", "parent_id=project", "--tool-arg", "type=goal", "--tool-arg", "title=From the inspector")
	if err != nil || !strings.Contains(out, "project.a") {
		t.Fatalf("create_card: %v\n%s", err, out)
	}
	if c, err := s.app.Runtime.Project().Cards.Get(t.Context(), "project.a"); err != nil || c.Title != "From the inspector" {
		t.Fatalf("card = %+v %v", c, err)
	}
	if out, err := inspect("wrong-token", "--method", "tools/list"); err == nil || strings.Contains(out, "reopen_card") {
		t.Errorf("wrong token accepted: %s", out)
	}
}
