package layers_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/layers"
)

func TestCheck(t *testing.T) {
	m := layers.Module + "/"
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{m + "agent", m + "llm", true},
		{m + "agent", "net/http", true},
		{m + "gateway", m + "steward/usage", false},
		{m + "redact", m + "saivage/state", false},
		{m + "steward/host", m + "agent", true},
		{m + "steward/host", m + "steward/chats", true},
		{m + "steward/connectors/mail", m + "steward/pathguard", true},
		{m + "steward/connectors/mail", m + "steward/host", false},
		{m + "steward/connectors/mail/server", m + "steward/host", false},
		{m + "steward/host", m + "saivage/cards", false},
		{m + "saivage/runtime", m + "steward/policy", false},
		{m + "saivage/runtime", m + "gateway", true},
		{m + "cmd/steward", m + "steward/host", true},
		{m + "steward/web", m + "cmd/steward", false},
		{m + "cmd/saivage", m + "cmd/steward", false},
	} {
		if err := layers.Check(tc.from, tc.to); (err == nil) != tc.ok {
			t.Errorf("Check(%s, %s) = %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}

// TestModuleFollowsTheDirection lists every package of the module with its
// transitive dependencies and its tests' imports and checks each edge.
func TestModuleFollowsTheDirection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkgs++
		from := fields[0]
		for _, to := range fields[1:] {
			if to == from || strings.TrimSuffix(to, "_test") == from {
				continue
			}
			if err := layers.Check(from, to); err != nil {
				t.Error(err)
			}
		}
	}
	if pkgs < 50 {
		t.Fatalf("go list reported %d packages; the module has more", pkgs)
	}
}
