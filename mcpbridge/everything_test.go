package mcpbridge

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The reference third-party server from the npm registry, pinned.
const (
	everythingPackage = "@modelcontextprotocol/server-everything"
	everythingVersion = "2026.8.31"
	// envEverything names a directory where CI has run
	// `npm install --prefix DIR @modelcontextprotocol/server-everything@VERSION`.
	envEverything = "STEWARD_TEST_MCP_EVERYTHING"
)

// everythingEntry returns the server's stdio entry point, installing the
// package into the user cache on first use. It skips the test when node or
// npm or the registry is unavailable, unless envEverything is set, in which
// case a missing install is a failure.
func everythingEntry(t *testing.T) (node, entry string) {
	t.Helper()
	rel := filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, err := exec.LookPath("node")
	if dir := os.Getenv(envEverything); dir != "" {
		if err != nil {
			t.Fatalf("%s is set but node is not installed: %v", envEverything, err)
		}
		entry := filepath.Join(dir, rel)
		if _, err := os.Stat(entry); err != nil {
			t.Fatalf("%s=%s but the server is not installed there: %v", envEverything, dir, err)
		}
		return node, entry
	}
	if err != nil {
		t.Skip("node is not installed; skipping the server-everything test")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed; skipping the server-everything test")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory to install server-everything into: %v", err)
	}
	dir := filepath.Join(cache, "agentstack-tests", "server-everything-"+everythingVersion)
	entry = filepath.Join(dir, rel)
	if _, err := os.Stat(entry); err == nil {
		return node, entry
	}
	// Install beside the final place and rename, so an interrupted install
	// never looks complete.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Skipf("cannot create cache dir: %v", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Skipf("cannot create install dir: %v", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--loglevel=error", "--fetch-retries=1", "--fetch-retry-mintimeout=1000", "--fetch-retry-maxtimeout=2000", everythingPackage+"@"+everythingVersion).CombinedOutput()
	if err != nil {
		t.Skipf("npm install %s@%s failed (registry unreachable?); skipping: %v\n%s", everythingPackage, everythingVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !fileExists(entry) {
		t.Fatalf("move install into place: %v", err)
	}
	return node, entry
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestBridgeServerEverything(t *testing.T) {
	node, entry := everythingEntry(t)
	t.Setenv("STEWARD_AUTH_TOKEN", "host-token-must-not-leak")
	b := startBridge(t, Options{
		Servers:      []ServerConfig{{Name: "everything", Command: node, Args: []string{entry, "stdio"}}},
		StartTimeout: 30 * time.Second, // node start-up on a loaded 2-core machine
	}, nil)
	st := waitStatus(t, b, "everything", isReady)
	tools := b.Tools()
	names := toolNames(tools)
	for _, want := range []string{"mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything__get-env", "mcp__everything__get-tiny-image"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}
	if st.Tools < 4 {
		t.Errorf("status = %+v", st)
	}

	if got := call(t, findTool(t, tools, "mcp__everything__echo"), `{"message":"hello from Go"}`); got.Content != "Echo: hello from Go" || got.IsError {
		t.Errorf("echo = %+v", got)
	}
	if got := call(t, findTool(t, tools, "mcp__everything__get-sum"), `{"a":2,"b":3.5}`); got.Content != "The sum of 2 and 3.5 is 5.5." {
		t.Errorf("get-sum = %+v", got)
	}

	// Arguments that fail the server's own validation come back as an error
	// result the model can read.
	bad := call(t, findTool(t, tools, "mcp__everything__echo"), `{"message":42}`)
	if !bad.IsError || !strings.Contains(bad.Content, "message") {
		t.Errorf("echo with a number = %+v, want an error result naming the field", bad)
	}

	img := call(t, findTool(t, tools, "mcp__everything__get-tiny-image"), `{}`)
	if img.IsError || !strings.Contains(img.Content, "[image image/png, ") || !strings.Contains(string(img.Data), `"type":"image"`) {
		t.Errorf("get-tiny-image content=%q data=%.200s", img.Content, img.Data)
	}

	env := call(t, findTool(t, tools, "mcp__everything__get-env"), `{}`)
	var vars map[string]string
	if err := json.Unmarshal([]byte(env.Content), &vars); err != nil {
		t.Fatalf("get-env output %q: %v", env.Content, err)
	}
	if _, leaked := vars["STEWARD_AUTH_TOKEN"]; leaked {
		t.Error("the host's STEWARD_AUTH_TOKEN reached the third-party server")
	}
	if vars["PATH"] == "" {
		t.Errorf("PATH not passed: %v", vars)
	}
}
