package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hangGuard bounds every wait in these tests; it is never the thing asserted.
const hangGuard = 60 * time.Second

// fakeClock stands in for Bridge.after: it reports each requested restart
// delay and holds the restart until the test releases it.
type fakeClock struct {
	requested chan time.Duration
	release   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{requested: make(chan time.Duration, 16), release: make(chan time.Time)}
}

func (f *fakeClock) after(d time.Duration) <-chan time.Time {
	f.requested <- d
	return f.release
}

// nextDelay waits for the supervisor to ask for a restart delay.
func (f *fakeClock) nextDelay(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.requested:
		return d
	case <-time.After(hangGuard):
		t.Fatal("no restart was scheduled")
		return 0
	}
}

// logBuffer is a concurrency-safe sink for a text slog handler.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startBridge starts a bridge that is closed when the test ends.
func startBridge(t *testing.T, opts Options, clock *fakeClock) *Bridge {
	t.Helper()
	b := New(opts)
	if clock != nil {
		b.after = clock.after
	}
	b.Start(context.Background())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// waitStatus waits until the named server's status satisfies cond.
func waitStatus(t *testing.T, b *Bridge, name string, cond func(ServerStatus) bool) ServerStatus {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		ch := b.Updates()
		st := statusOf(t, b, name)
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("server %s never reached the expected status; last: %+v", name, st)
		}
	}
}

func statusOf(t *testing.T, b *Bridge, name string) ServerStatus {
	t.Helper()
	for _, st := range b.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for %s", name)
	return ServerStatus{}
}

func isReady(st ServerStatus) bool { return st.State == StateReady }

func toolNames(tools []agent.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Spec().Name)
	}
	return names
}

func findTool(t *testing.T, tools []agent.Tool, name string) agent.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Spec().Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s in %v", name, toolNames(tools))
	return nil
}

func call(t *testing.T, tool agent.Tool, args string) agent.ToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := tool.Call(ctx, json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s: %v", tool.Spec().Name, err)
	}
	return res
}

func TestBridgeListsAndCallsTools(t *testing.T) {
	b := startBridge(t, Options{Servers: []ServerConfig{testServerConfig(t, "t", nil)}}, nil)
	st := waitStatus(t, b, "t", isReady)
	tools := b.Tools()

	want := []string{
		"mcp__t__args", "mcp__t__book", "mcp__t__crash", ToolName("t", "dotted.name"), "mcp__t__echo", "mcp__t__empty",
		"mcp__t__env", "mcp__t__fail", "mcp__t__grow", "mcp__t__hang", "mcp__t__rich",
	}
	slices.Sort(want)
	if got := toolNames(tools); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	if st.Tools != len(want) || st.Transport != "stdio" || st.LastError != "" {
		t.Errorf("status = %+v", st)
	}

	echo := findTool(t, tools, "mcp__t__echo")
	spec := echo.Spec()
	if spec.Description != "Echoes text." {
		t.Errorf("description = %q", spec.Description)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("parameters = %s (%v)", spec.Parameters, err)
	}

	cases := []struct {
		tool, args string
		want       agent.ToolResult
	}{
		{"mcp__t__echo", `{"text":"hi"}`, agent.ToolResult{Content: "echo: hi"}},
		{"mcp__t__fail", `{}`, agent.ToolResult{Content: "deliberate failure", IsError: true}},
		// Empty successful content stays an empty, successful result.
		{"mcp__t__empty", `{}`, agent.ToolResult{Content: ""}},
		{"mcp__t__empty", ``, agent.ToolResult{Content: ""}},
		{ToolName("t", "dotted.name"), `null`, agent.ToolResult{Content: "dotted"}},
	}
	for _, c := range cases {
		got := call(t, findTool(t, tools, c.tool), c.args)
		if got.Content != c.want.Content || got.IsError != c.want.IsError || got.Data != nil {
			t.Errorf("%s(%s) = %+v, want %+v", c.tool, c.args, got, c.want)
		}
	}

	// Arguments are passed through as they are.
	args := `{"nested":{"list":[1,2.5,"x"],"flag":true},"unicode":"é✓"}`
	got := call(t, findTool(t, tools, "mcp__t__args"), args)
	var sent, received any
	_ = json.Unmarshal([]byte(args), &sent)
	if err := json.Unmarshal([]byte(got.Content), &received); err != nil || fmt.Sprint(sent) != fmt.Sprint(received) {
		t.Errorf("server received %s, sent %s", got.Content, args)
	}

	rich := call(t, findTool(t, tools, "mcp__t__rich"), `{}`)
	if !strings.HasPrefix(rich.Content, "here it is\n[image image/png, 4 bytes]\n[resource file:///notes.txt, text/plain]\nnote body") {
		t.Errorf("rich content = %q", rich.Content)
	}
	var data struct {
		Content []struct {
			Type string `json:"type"`
			Data string `json:"data"`
		} `json:"content"`
		StructuredContent map[string]int `json:"structuredContent"`
	}
	if err := json.Unmarshal(rich.Data, &data); err != nil {
		t.Fatalf("rich data %s: %v", rich.Data, err)
	}
	if len(data.Content) != 3 || data.Content[1].Type != "image" || data.Content[1].Data != "iVBORw==" || data.StructuredContent["count"] != 2 {
		t.Errorf("rich data = %s", rich.Data)
	}

	if _, err := findTool(t, tools, "mcp__t__echo").Call(context.Background(), json.RawMessage(`["not","an","object"]`)); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("array arguments: err = %v", err)
	}

	// The server's readOnlyHint annotations are kept, by tool and by name.
	for _, c := range []struct {
		tool             string
		readOnly, listed bool
	}{{"mcp__t__echo", true, true}, {"mcp__t__fail", false, true}, {"mcp__t__nope", false, false}, {"mcp__u__echo", false, false}} {
		if ro, listed := b.ReadOnlyHint(c.tool); ro != c.readOnly || listed != c.listed {
			t.Errorf("ReadOnlyHint(%s) = %v, %v; want %v, %v", c.tool, ro, listed, c.readOnly, c.listed)
		}
	}
	if h, ok := findTool(t, tools, "mcp__t__echo").(interface{ ReadOnlyHint() bool }); !ok || !h.ReadOnlyHint() {
		t.Errorf("the echo tool does not report its readOnlyHint")
	}
}

// A tool whose _meta names a preflight companion validates and normalises
// its arguments through it; the hidden companion is not offered to the agent.
func TestBridgePreflightCompanion(t *testing.T) {
	b := startBridge(t, Options{Servers: []ServerConfig{testServerConfig(t, "t", nil)}}, nil)
	waitStatus(t, b, "t", isReady)
	tools := b.Tools()
	if slices.Contains(toolNames(tools), "mcp__t__book_preflight") {
		t.Errorf("the hidden preflight companion is offered: %v", toolNames(tools))
	}
	type preflighter interface {
		Preflight(context.Context, json.RawMessage) (json.RawMessage, error)
	}
	book, ok := findTool(t, tools, "mcp__t__book").(preflighter)
	if !ok {
		t.Fatal("bridge tools do not implement Preflight")
	}
	norm, err := book.Preflight(context.Background(), json.RawMessage(`{"day":"monday"}`))
	if err != nil || string(norm) != `{"day":"MONDAY"}` {
		t.Errorf("preflight = %s, %v; want the companion's normalised arguments", norm, err)
	}
	if _, err := book.Preflight(context.Background(), json.RawMessage(`{}`)); err == nil || err.Error() != "day is required" {
		t.Errorf("invalid arguments: err = %v, want the companion's message", err)
	}
	// A tool without a companion passes its arguments through unchanged.
	echo := findTool(t, tools, "mcp__t__echo").(preflighter)
	if got, err := echo.Preflight(context.Background(), json.RawMessage(`{"text":"x"}`)); err != nil || string(got) != `{"text":"x"}` {
		t.Errorf("echo preflight = %s, %v", got, err)
	}
}

func TestBridgeCallHonoursContext(t *testing.T) {
	logs := &logBuffer{}
	b := startBridge(t, Options{
		Servers: []ServerConfig{testServerConfig(t, "t", nil)},
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	}, nil)
	waitStatus(t, b, "t", isReady)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := findTool(t, b.Tools(), "mcp__t__hang").Call(ctx, nil)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("cancelled call did not return")
	}
	// The session is still usable afterwards.
	if got := call(t, findTool(t, b.Tools(), "mcp__t__echo"), `{"text":"still here"}`); got.Content != "echo: still here" {
		t.Errorf("after cancel: %+v", got)
	}

	// Closing the bridge ends a call in flight even when its caller set no
	// deadline.
	hang := findTool(t, b.Tools(), "mcp__t__hang")
	go func() {
		_, err := hang.Call(context.Background(), json.RawMessage(`{"id":"at-close"}`))
		done <- err
	}()
	// Wait until the server reports the call in progress.
	for deadline := time.Now().Add(hangGuard); !strings.Contains(logs.String(), "at-close"); {
		if time.Now().After(deadline) {
			t.Fatal("the server never received the call")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = b.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "shutting down") {
			t.Errorf("call during close: err = %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("call in flight did not end at Close")
	}
}

func TestBridgeCrashedServerRestartsWithBackoff(t *testing.T) {
	clock := newFakeClock()
	logs := &logBuffer{}
	b := startBridge(t, Options{
		Servers:        []ServerConfig{testServerConfig(t, "t", nil)},
		RestartBackoff: Backoff{Min: time.Second, Max: 3 * time.Second},
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
	}, clock)
	waitStatus(t, b, "t", isReady)
	snapshot := b.Tools()
	echo := findTool(t, snapshot, "mcp__t__echo")

	wantDelays := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	for i, want := range wantDelays {
		_, err := findTool(t, b.Tools(), "mcp__t__crash").Call(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), `MCP server "t" went away`) {
			t.Fatalf("crash %d: err = %v", i, err)
		}
		if got := clock.nextDelay(t); got != want {
			t.Errorf("crash %d: restart delay = %s, want %s", i, got, want)
		}
		// Held in back-off: reported, and its tools are out of snapshots.
		st := statusOf(t, b, "t")
		if st.State != StateFailed || st.Tools != 0 || st.RetryAt.IsZero() {
			t.Errorf("crash %d: status = %+v", i, st)
		}
		for _, frag := range []string{"exit status 3", "crashing on request"} {
			if !strings.Contains(st.LastError, frag) {
				t.Errorf("crash %d: last error %q lacks %q", i, st.LastError, frag)
			}
		}
		if tools := b.Tools(); len(tools) != 0 {
			t.Errorf("crash %d: tools while down = %v", i, toolNames(tools))
		}
		_, err = echo.Call(context.Background(), json.RawMessage(`{"text":"x"}`))
		if err == nil || !strings.Contains(err.Error(), "not connected (failed)") || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("crash %d: call while down: err = %v", i, err)
		}

		clock.release <- time.Now()
		st = waitStatus(t, b, "t", isReady)
		if st.Restarts != i+1 || st.LastError != "" {
			t.Errorf("crash %d: after restart status = %+v", i, st)
		}
		if got := toolNames(b.Tools()); !slices.Equal(got, toolNames(snapshot)) {
			t.Errorf("crash %d: tools after restart = %v", i, got)
		}
		// A tool from the snapshot taken before the crash works again.
		if got := call(t, echo, `{"text":"back"}`); got.Content != "echo: back" {
			t.Errorf("crash %d: echo after restart = %+v", i, got)
		}
	}
	if !strings.Contains(logs.String(), "mcp server down; will restart") {
		t.Errorf("crash not logged:\n%s", logs)
	}
}

func TestBridgeStartFailureIsReportedAndRetried(t *testing.T) {
	clock := newFakeClock()
	b := startBridge(t, Options{
		Servers:        []ServerConfig{testServerConfig(t, "broken", map[string]string{envFailStart: "1"})},
		RestartBackoff: Backoff{Min: 5 * time.Second, Max: time.Minute},
	}, clock)
	if err := b.WaitStarted(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := clock.nextDelay(t); d != 5*time.Second {
		t.Errorf("first retry delay = %s", d)
	}
	st := statusOf(t, b, "broken")
	if st.State != StateFailed || st.Restarts != 0 || st.RetryAt.IsZero() {
		t.Errorf("status = %+v", st)
	}
	if !strings.Contains(st.LastError, "exit status 2") || !strings.Contains(st.LastError, "fatal: config file unreadable") {
		t.Errorf("last error = %q", st.LastError)
	}
	clock.release <- time.Now()
	if d := clock.nextDelay(t); d != 10*time.Second {
		t.Errorf("second retry delay = %s", d)
	}
	if st := statusOf(t, b, "broken"); st.Restarts != 1 || st.State != StateFailed {
		t.Errorf("after retry: status = %+v", st)
	}
}

func TestBridgeMissingProgram(t *testing.T) {
	b := startBridge(t, Options{
		Servers:        []ServerConfig{{Name: "missing", Command: "/nonexistent/mcp-server"}},
		RestartBackoff: Backoff{Min: time.Hour},
	}, nil)
	st := waitStatus(t, b, "missing", func(st ServerStatus) bool { return st.State == StateFailed })
	if !strings.Contains(st.LastError, "/nonexistent/mcp-server") || !strings.Contains(st.LastError, "no such file") {
		t.Errorf("last error = %q", st.LastError)
	}
}

func TestBridgeSlowServerDoesNotBlockOthers(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	b := startBridge(t, Options{
		Servers: []ServerConfig{
			testServerConfig(t, "slow", map[string]string{envWaitFile: gate}),
			testServerConfig(t, "fast", nil),
		},
		StartTimeout: time.Hour, // the slow one stays in "starting" until the test opens the gate
	}, nil)
	waitStatus(t, b, "fast", isReady)
	if st := statusOf(t, b, "slow"); st.State != StateStarting {
		t.Errorf("slow: status = %+v", st)
	}
	firstTurn := b.Tools()
	for _, name := range toolNames(firstTurn) {
		if !strings.HasPrefix(name, "mcp__fast__") {
			t.Errorf("unexpected tool %s", name)
		}
	}
	if got := call(t, findTool(t, b.Tools(), "mcp__fast__echo"), `{"text":"quick"}`); got.Content != "echo: quick" {
		t.Errorf("fast echo = %+v", got)
	}

	// Direct access waits only for the server asked for.
	if _, err := b.Session(context.Background(), "fast"); err != nil {
		t.Errorf("fast session: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Session(ctx, "slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow session: err = %v", err)
	}
	if _, err := b.Session(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `no MCP server named "nope"`) {
		t.Errorf("unknown session: err = %v", err)
	}

	// The slow server connects later: the next snapshot (next turn) has its
	// tools; the one already taken does not change.
	n := len(firstTurn)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, b, "slow", isReady)
	nextTurn := b.Tools()
	if len(nextTurn) != 2*n || len(firstTurn) != n {
		t.Errorf("next turn has %d tools, first turn %d; want %d and %d", len(nextTurn), len(firstTurn), 2*n, n)
	}
	if got := call(t, findTool(t, nextTurn, "mcp__slow__echo"), `{"text":"late"}`); got.Content != "echo: late" {
		t.Errorf("slow echo = %+v", got)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range b.Status() {
		if st.State != StateStopped {
			t.Errorf("after close: %+v", st)
		}
	}
	if len(b.Tools()) != 0 {
		t.Errorf("tools after close: %v", toolNames(b.Tools()))
	}
}

func TestBridgeStartDeadline(t *testing.T) {
	clock := newFakeClock()
	b := startBridge(t, Options{
		Servers:      []ServerConfig{testServerConfig(t, "slow", map[string]string{envStartDelay: "1h"})},
		StartTimeout: 200 * time.Millisecond,
	}, clock)
	clock.nextDelay(t)
	st := statusOf(t, b, "slow")
	if st.State != StateFailed || !strings.Contains(st.LastError, "did not start within 200ms") {
		t.Errorf("status = %+v", st)
	}
}

func TestBridgeChildEnvironmentIsAllowListed(t *testing.T) {
	t.Setenv("STEWARD_AUTH_TOKEN", "host-token-must-not-leak")
	t.Setenv("DEEPSEEK_API_KEY", "sk-host-key-must-not-leak")
	cfg := testServerConfig(t, "t", map[string]string{"MY_SETTING": "configured", "LANG": "C.UTF-8"})
	b := startBridge(t, Options{Servers: []ServerConfig{cfg}}, nil)
	waitStatus(t, b, "t", isReady)
	out := call(t, findTool(t, b.Tools(), "mcp__t__env"), `{}`).Content

	allowed := map[string]bool{}
	for _, k := range DefaultEnvAllowList() {
		allowed[k] = true
	}
	got := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
		if _, own := cfg.Env[k]; !own && !allowed[k] {
			t.Errorf("child sees %s, which is neither allow-listed nor its own", k)
		}
	}
	if strings.Contains(out, "must-not-leak") {
		t.Error("a host secret reached the server")
	}
	if got["MY_SETTING"] != "configured" || got["LANG"] != "C.UTF-8" {
		t.Errorf("own env missing or not overriding: %v", got)
	}
	if os.Getenv("PATH") != "" && got["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH = %q, want the host's", got["PATH"])
	}
}

func TestBridgeStderrIsLoggedWithSecretsMasked(t *testing.T) {
	logs := &logBuffer{}
	const secret = "tok-1234567890-abcdef"
	b := startBridge(t, Options{
		Servers: []ServerConfig{testServerConfig(t, "t", map[string]string{envSecret: secret})},
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	}, nil)
	waitStatus(t, b, "t", isReady)
	_ = b.Close() // the sink has flushed once the process is gone
	text := logs.String()
	if !strings.Contains(text, "testserver starting (secret [redacted])") || !strings.Contains(text, "mcp_server=t") {
		t.Errorf("stderr line not logged as expected:\n%s", text)
	}
	if strings.Contains(text, secret) {
		t.Errorf("secret reached the log:\n%s", text)
	}
}

// TestBridgeShowsServersLogRecordsOnce: three real server processes log
// the same start-up warning as slog records on stderr (as Steward's
// connectors do for a config.env problem); the host's log shows it once, as
// a warning of its own prefixed by the server's name, not as an escaped
// string inside another record, and not at all when the host logged the
// message itself.
func TestBridgeShowsServersLogRecordsOnce(t *testing.T) {
	logs := &logBuffer{}
	const warning = "/home/config.env:1: FOO_BAR is not a Steward setting"
	const hostSaid = "the host logged this already"
	b := startBridge(t, Options{
		Servers: []ServerConfig{
			testServerConfig(t, "mail", map[string]string{envLogWarn: warning}),
			testServerConfig(t, "calendar", map[string]string{envLogWarn: warning}),
			testServerConfig(t, "contacts", map[string]string{envLogWarn: hostSaid}),
		},
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
		AlreadyLogged: []string{hostSaid},
	}, nil)
	for _, name := range []string{"mail", "calendar", "contacts"} {
		waitStatus(t, b, name, isReady)
	}
	_ = b.Close() // the sinks have flushed once the processes are gone
	text := logs.String()
	var records []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, "FOO_BAR") {
			records = append(records, line)
		}
	}
	if len(records) != 1 {
		t.Fatalf("the warning is in %d log records, want 1:\n%s", len(records), text)
	}
	r := records[0]
	if !strings.Contains(r, "level=WARN") || !regexp.MustCompile(`msg="(mail|calendar): `+regexp.QuoteMeta(warning)+`"`).MatchString(r) ||
		!strings.Contains(r, `err="first line\nsecond \"quoted\" line"`) {
		t.Errorf("record = %q, want a WARN whose message is the server's name and the warning, with its err attribute", r)
	}
	if strings.Contains(r, `\"`+warning) || strings.Contains(r, "line=") || strings.Contains(r, "time=\"") {
		t.Errorf("record %q carries the child's record escaped inside it", r)
	}
	if strings.Contains(text, hostSaid) {
		t.Errorf("a message the host logged itself is repeated:\n%s", text)
	}
	if n := strings.Count(text, "testserver starting"); n != 1 {
		t.Errorf("the servers' identical plain line is logged %d times, want once:\n%s", n, text)
	}
}

func TestBridgePicksUpToolListChanges(t *testing.T) {
	b := startBridge(t, Options{Servers: []ServerConfig{testServerConfig(t, "t", nil)}}, nil)
	waitStatus(t, b, "t", isReady)
	before := b.Tools()
	if got := call(t, findTool(t, before, "mcp__t__grow"), `{}`); got.Content != "added" {
		t.Fatalf("grow = %+v", got)
	}
	waitStatus(t, b, "t", func(st ServerStatus) bool { return st.Tools == len(before)+1 })
	if got := call(t, findTool(t, b.Tools(), "mcp__t__grown"), `{}`); got.Content != "grown" {
		t.Errorf("grown = %+v", got)
	}
	// A snapshot already taken (a turn in progress) does not change.
	if len(before) != 11 || slices.Contains(toolNames(before), "mcp__t__grown") {
		t.Errorf("old snapshot changed: %v", toolNames(before))
	}
}

func TestBridgeInvalidServersAreReportedNotStarted(t *testing.T) {
	b := startBridge(t, Options{Servers: []ServerConfig{
		testServerConfig(t, "ok", nil),
		{Name: "bad name", Command: "x"},
		{Name: "ok", Command: "/bin/true"},
		{Name: "nothing"},
	}}, nil)
	waitStatus(t, b, "ok", isReady)
	st := b.Status()
	if len(st) != 4 {
		t.Fatalf("status = %+v", st)
	}
	wants := []string{"", "invalid server name", `duplicate server name "ok"`, `needs either "command"`}
	for i, want := range wants[1:] {
		s := st[i+1]
		if s.State != StateFailed || !strings.Contains(s.LastError, want) || !s.RetryAt.IsZero() {
			t.Errorf("server %d: %+v, want failed with %q", i+1, s, want)
		}
	}
	if _, err := b.Session(context.Background(), "nothing"); err == nil || !strings.Contains(err.Error(), "not usable") {
		t.Errorf("session of invalid server: err = %v", err)
	}
	// The duplicate does not shadow the valid server of the same name.
	if _, err := b.Session(context.Background(), "ok"); err != nil {
		t.Errorf("session ok: %v", err)
	}
}

func TestBridgeClosesProcessGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to inspect processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	// A wrapper that leaves a grandchild behind, as npx does with node.
	cfg := ServerConfig{
		Name:    "wrapped",
		Command: "/bin/sh",
		Args:    []string{"-c", `sleep 1000 & echo $! > "$1"; exec "$0"`, exe, pidFile},
		Env:     map[string]string{envServe: "1"},
	}
	b := New(Options{Servers: []ServerConfig{cfg}})
	b.Start(context.Background())
	waitStatus(t, b, "wrapped", isReady)
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !processAlive(pid) {
		t.Fatalf("grandchild %d not running before close", pid)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hangGuard)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still running after Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reports whether pid exists and is not a zombie awaiting reaping.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestBridgeStreamableHTTP(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "whoami", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("remote says hi"), nil
		})
	const token = "Bearer remote-secret-token"
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	clock := newFakeClock()
	b := startBridge(t, Options{Servers: []ServerConfig{
		{Name: "remote", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": token}},
		{Name: "wrongkey", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer wrong-secret-token"}},
	}}, clock)
	st := waitStatus(t, b, "remote", isReady)
	if st.Transport != "http" || st.Tools != 1 {
		t.Errorf("status = %+v", st)
	}
	if got := call(t, findTool(t, b.Tools(), "mcp__remote__whoami"), `{}`); got.Content != "remote says hi" {
		t.Errorf("whoami = %+v", got)
	}
	clock.nextDelay(t)
	bad := statusOf(t, b, "wrongkey")
	if bad.State != StateFailed || bad.LastError == "" || strings.Contains(bad.LastError, "wrong-secret-token") {
		t.Errorf("wrongkey status = %+v", bad)
	}
}

func TestBridgeBackoffResetsAfterStableUptime(t *testing.T) {
	clock := newFakeClock()
	b := startBridge(t, Options{
		Servers: []ServerConfig{testServerConfig(t, "t", nil)},
		// Max is the uptime that counts as stable: it must exceed a restart
		// and crash on a loaded machine under -race, or the backoff resets
		// before the second delay is asked for.
		RestartBackoff: Backoff{Min: 10 * time.Millisecond, Max: 2 * time.Second},
	}, clock)
	crash := func() {
		t.Helper()
		waitStatus(t, b, "t", isReady)
		if _, err := findTool(t, b.Tools(), "mcp__t__crash").Call(context.Background(), nil); err == nil {
			t.Fatal("crash call succeeded")
		}
	}
	crash()
	if d := clock.nextDelay(t); d != 10*time.Millisecond {
		t.Errorf("first delay = %s", d)
	}
	clock.release <- time.Now()
	crash()
	if d := clock.nextDelay(t); d != 20*time.Millisecond {
		t.Errorf("second delay = %s, want doubled", d)
	}
	clock.release <- time.Now()
	waitStatus(t, b, "t", isReady)
	time.Sleep(2*time.Second + 100*time.Millisecond) // stay up longer than Max
	crash()
	if d := clock.nextDelay(t); d != 10*time.Millisecond {
		t.Errorf("delay after a stable run = %s, want reset to the minimum", d)
	}
}

// BenchmarkBridgeCall measures one tool call round trip through the bridge
// to a stdio server (JSON-RPC over pipes, result conversion).
func BenchmarkBridgeCall(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	br := New(Options{Servers: []ServerConfig{{Name: "t", Command: exe, Env: map[string]string{envServe: "1"}}}})
	br.Start(context.Background())
	defer br.Close()
	sess, err := br.Session(context.Background(), "t")
	if err != nil || sess == nil {
		b.Fatal(err)
	}
	var echo agent.Tool
	for _, t := range br.Tools() {
		if t.Spec().Name == "mcp__t__echo" {
			echo = t
		}
	}
	args := json.RawMessage(`{"text":"benchmark"}`)
	ctx := context.Background()
	for b.Loop() {
		if res, err := echo.Call(ctx, args); err != nil || res.Content != "echo: benchmark" {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkBridgeStart measures starting a stdio server to ready (process
// start, handshake, tool listing) and stopping it.
func BenchmarkBridgeStart(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cfg := ServerConfig{Name: "t", Command: exe, Env: map[string]string{envServe: "1"}}
	for b.Loop() {
		br := New(Options{Servers: []ServerConfig{cfg}})
		br.Start(context.Background())
		if _, err := br.Session(context.Background(), "t"); err != nil {
			b.Fatal(err)
		}
		br.Close()
	}
}
