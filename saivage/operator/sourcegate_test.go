package operator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/operator"
)

// The external Analyst (MCP over HTTP, go-sdk client) on a real
// classic-git checkout writes through the Supervisor's source gate: admitted
// while idle at the exact delivery, then refused, naming the uncommitted
// path, with nothing written — a multi-file patch included.
func TestExternalAnalystWritesThroughSourceGate(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	s := startTemplate(t, "classic-git", gitCheckout(t), map[string]string{"SAIVAGE_ANALYST_MODE": "external", operator.EnvAnalystMCPToken: mcpToken},
		func(_, cfg string) string { return cfg })
	cs, err := connectMCP(t, s.app.AnalystMCPURL, mcpToken)
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, _ := os.ReadFile(filepath.Join(s.dir, rel))
		return string(b)
	}
	if text, isErr := callText(t, cs, "write", map[string]any{"path": "README.md", "content": "# demo, by the operator's agent\n"}); isErr {
		t.Fatalf("idle write at the exact delivery = %q", text)
	}
	if got := read("README.md"); got != "# demo, by the operator's agent\n" {
		t.Fatalf("README.md = %q", got)
	}
	text, isErr := callText(t, cs, "write", map[string]any{"path": "docs/notes.md", "content": "notes\n"})
	if !isErr || !strings.Contains(text, "nothing was written") || !strings.Contains(text, "docs/notes.md is source") || !strings.Contains(text, "README.md") {
		t.Fatalf("write over uncommitted source = %q %v", text, isErr)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "docs")); !os.IsNotExist(err) {
		t.Errorf("the refused write created docs/: %v", err)
	}
	patch := "*** Begin Patch\n*** Add File: .saivage/work/note.txt\n+note\n*** Add File: other.txt\n+other\n*** End Patch\n"
	if text, isErr := callText(t, cs, "apply_patch", map[string]any{"patch": patch}); !isErr || !strings.Contains(text, "other.txt is source") {
		t.Fatalf("patch = %q %v", text, isErr)
	}
	if read(".saivage/work/note.txt") != "" || read("other.txt") != "" {
		t.Error("the refused patch wrote a file")
	}
}
