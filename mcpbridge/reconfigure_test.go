package mcpbridge

import (
	"slices"
	"strings"
	"testing"
)

// TestBridgeReconfigure applies a reloaded configuration: the unchanged
// server keeps its process, the changed one restarts with its new settings,
// a new one starts and a removed one stops; an invalid configuration changes
// nothing.
func TestBridgeReconfigure(t *testing.T) {
	a := testServerConfig(t, "a", map[string]string{"MARK": "a1"})
	b := testServerConfig(t, "b", map[string]string{"MARK": "b1"})
	br := startBridge(t, Options{Servers: []ServerConfig{a, b}, Environ: []string{}}, nil)
	waitStatus(t, br, "a", isReady)
	waitStatus(t, br, "b", isReady)
	before := statusOf(t, br, "a")
	envOf := func(name string) string {
		t.Helper()
		return call(t, findTool(t, br.Tools(), "mcp__"+name+"__env"), `{}`).Content
	}

	b2 := testServerConfig(t, "b", map[string]string{"MARK": "b2"})
	c := testServerConfig(t, "c", map[string]string{"MARK": "c1"})
	if err := br.Reconfigure([]ServerConfig{a, b2, c}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, br, "b", func(st ServerStatus) bool { return isReady(st) && strings.Contains(envOf("b"), "MARK=b2") })
	waitStatus(t, br, "c", isReady)
	if after := statusOf(t, br, "a"); !after.Since.Equal(before.Since) || after.Restarts != 0 || !strings.Contains(envOf("a"), "MARK=a1") {
		t.Fatalf("the unchanged server was touched: %+v → %+v", before, after)
	}

	bad := []ServerConfig{a, {Name: "a", Command: "/bin/true"}}
	if err := br.Reconfigure(bad); err == nil || !strings.Contains(err.Error(), `duplicate server name "a"`) {
		t.Fatalf("duplicate names: %v", err)
	}
	if err := br.Reconfigure([]ServerConfig{{Name: "x"}}); err == nil {
		t.Fatal("a server without command or url was accepted")
	}
	if n := len(br.Status()); n != 3 {
		t.Fatalf("a refused configuration changed the servers: %d", n)
	}

	if err := br.Reconfigure([]ServerConfig{a, c}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range br.Status() {
		names = append(names, st.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) || slices.ContainsFunc(toolNames(br.Tools()), func(n string) bool { return strings.HasPrefix(n, "mcp__b__") }) {
		t.Fatalf("after removing b: servers %v, tools %v", names, toolNames(br.Tools()))
	}
}
