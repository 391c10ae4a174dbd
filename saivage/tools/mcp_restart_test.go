package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

// TestMCPRestartJoinsStopThenStartsFresh: restarting a stdio server against
// server-everything has ended the old process (reaped) by the time the
// restart returns, runs a new process, issues a new catalog UUID over the
// same fingerprint, and the new connection answers calls.
func TestMCPRestartJoinsStopThenStartsFresh(t *testing.T) {
	node, entry := everything(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// sh records its pid, then becomes the server (exec keeps the pid).
	m := tools.NewMCPServers(map[string]config.MCPServer{"everything": {Command: "sh",
		Args: []string{"-c", `echo $$ >> "$0"; exec "$1" "$2" stdio`, pids, node, entry}}}, dir, nil)
	defer m.Close()
	ctx := context.Background()
	started := func() []int {
		t.Helper()
		b, _ := os.ReadFile(pids)
		var out []int
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	if st, err := m.Control(ctx, "everything", "start"); err != nil || st.State != "ready" {
		t.Fatalf("start = %+v, %v", st, err)
	}
	first, _ := m.Info("everything")
	if p := started(); len(p) != 1 || syscall.Kill(p[0], 0) != nil {
		t.Fatalf("first process = %v", p)
	}

	st, err := m.Control(ctx, "everything", "restart")
	if err != nil || st.State != "ready" {
		t.Fatalf("restart = %+v, %v", st, err)
	}
	p := started()
	if len(p) != 2 || p[0] == p[1] {
		t.Fatalf("processes = %v, want a second, different one", p)
	}
	if err := syscall.Kill(p[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the old process %d still exists after the restart returned (%v)", p[0], err)
	}
	if err := syscall.Kill(p[1], 0); err != nil {
		t.Errorf("the new process %d: %v", p[1], err)
	}
	second, _ := m.Info("everything")
	if second.CatalogUUID == "" || second.CatalogUUID == first.CatalogUUID || second.Fingerprint != first.Fingerprint {
		t.Errorf("catalog before %s/%s, after %s/%s", first.CatalogUUID, first.Fingerprint, second.CatalogUUID, second.Fingerprint)
	}
	res, err := m.Call(ctx, "everything", "echo", json.RawMessage(`{"message":"after restart"}`))
	if err != nil || res.IsError || !strings.Contains(res.Content, "after restart") {
		t.Fatalf("echo = %+v, %v", res, err)
	}
}
