package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/config"
)

// testEnv is a cliEnv over a private STEWARD_HOME and the given variables.
func testEnv(t *testing.T, vars map[string]string) (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	if _, ok := vars["STEWARD_HOME"]; !ok {
		vars["STEWARD_HOME"] = filepath.Join(t.TempDir(), "home")
	}
	var out, errb bytes.Buffer
	env := &cliEnv{Stdout: &out, Stderr: &errb, loadOpts: config.LoadOptions{
		Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}}
	env.Log = newLogger(&errb, "info")
	return env, &out, &errb
}

func writeGatewayConfig(t *testing.T, home, upstream string) {
	t.Helper()
	os.MkdirAll(home, 0o700)
	yaml := "providers:\n  up: { base_url: " + upstream + " }\nmodels:\n  tier-5: [ { provider: up, model: scripted } ]\n" +
		"rates:\n  up/scripted: { input: 1, output: 1 }\n"
	if err := os.WriteFile(filepath.Join(home, "gateway.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestServeRunsHostAndGatewayAndStopsCleanly(t *testing.T) {
	up := llmtest.NewServer(t)
	hold := make(chan struct{})
	up.Enqueue("scripted", llmtest.Reply{Content: "in flight answer", Chunks: 3, Hold: hold})
	vars := map[string]string{}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hostLn, gwLn := loopback(t), loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, env, sc, hostLn, gwLn) }()

	resp, err := http.Get("http://" + hostLn.Addr().String() + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("host /health: %v %v", resp, err)
	}
	resp.Body.Close()
	info, err := os.Stat(filepath.Join(home, "auth-token"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("auth-token: %v %v", info, err)
	}
	if hi, _ := os.Stat(home); hi.Mode().Perm() != 0o700 {
		t.Errorf("STEWARD_HOME mode %v, want 0700", hi.Mode().Perm())
	}

	// A streamed request is in flight when the stop signal arrives.
	client := llm.NewClient(llm.ClientOptions{BaseURL: "http://" + gwLn.Addr().String() + "/v1"})
	type result struct {
		text string
		err  error
	}
	got := make(chan result, 1)
	firstChunk := make(chan struct{})
	go func() {
		ctx := llm.WithAttribution(context.Background(), llm.Attribution{Service: "test", Action: "shutdown"})
		var once bool
		r, err := client.ChatStream(ctx, &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(llm.StreamChunk) error {
			if !once {
				once = true
				close(firstChunk)
			}
			return nil
		})
		text := ""
		if r != nil {
			text = r.Choices[0].Message.Content
		}
		got <- result{text, err}
	}()
	<-firstChunk
	cancel()
	// New connections are refused once shutdown began; the in-flight one finishes.
	waitFor(t, func() bool {
		c, err := net.Dial("tcp", hostLn.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(hold)
	r := <-got
	if r.err != nil || r.text != "in flight answer" {
		t.Fatalf("in-flight stream = %q, %v; want it to finish", r.text, r.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("no stop log line:\n%s", logs)
	}

	// The ledger was flushed and closed: the usage command sees the request.
	env2, out, _ := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"usage", "--json", "--since", "24h"}, env2); code != 0 {
		t.Fatalf("usage exit %d", code)
	}
	var rep struct {
		Total    struct{ Requests int }
		ByAction []struct{ Key string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, out)
	}
	// Besides the test's request, only the start-up preparation's loopback
	// embedding may be there (it races the shutdown).
	var shutdown, other int
	for _, a := range rep.ByAction {
		switch a.Key {
		case "test/shutdown":
			shutdown++
		case "host/startup-embedding":
		default:
			other++
		}
	}
	if shutdown != 1 || other != 0 || rep.Total.Requests != len(rep.ByAction) {
		t.Errorf("usage after shutdown = %+v", rep)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // generous: the machine may be loaded
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 60 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInvalidSettingsNameTheVariable(t *testing.T) {
	tests := []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"HOST_PORT": "abc"}, "HOST_PORT"},
		{map[string]string{"GATEWAY_PORT": "70000"}, "GATEWAY_PORT"},
		{map[string]string{"GATEWAY_BASE_URL": "localhost:4000"}, "GATEWAY_BASE_URL"},
		{map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "fast"}, "GATEWAY_REQUEST_TIMEOUT_MS"},
		{map[string]string{"MODEL_STREAM_INACTIVITY_MS": "500"}, "MODEL_STREAM_INACTIVITY_MS"},
		{map[string]string{"STEWARD_HOME": "relative/dir"}, "STEWARD_HOME"},
	}
	for _, tc := range tests {
		env, _, errb := testEnv(t, tc.vars)
		if code := run(context.Background(), []string{"serve"}, env); code != 1 {
			t.Errorf("%v: exit %d, want 1", tc.vars, code)
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: error does not name %s:\n%s", tc.vars, tc.want, errb)
		}
	}
}

func TestMalformedGatewayConfigStopsStart(t *testing.T) {
	vars := map[string]string{}
	env, _, _ := testEnv(t, vars)
	os.MkdirAll(vars["STEWARD_HOME"], 0o700)
	os.WriteFile(filepath.Join(vars["STEWARD_HOME"], "gateway.yaml"), []byte("providers:\n  x: { base_url: http://h, api_key: sk-inline }\n"), 0o600)
	cfg, _ := env.Config()
	sc, _ := readServeConfig(cfg)
	err := serve(context.Background(), env, sc, loopback(t), loopback(t))
	if err == nil || !strings.Contains(err.Error(), "api_key") || !strings.Contains(err.Error(), "gateway.yaml") {
		t.Fatalf("err = %v, want it to name the file and the unknown key", err)
	}
}

// TestServeBinaryStopsOnSIGTERM runs the real binary with embedded defaults
// and checks that SIGTERM ends it cleanly with exit status 0.
func TestServeBinaryStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildSteward(t)
	hostLn, gwLn := loopback(t), loopback(t)
	hostAddr, gwAddr := hostLn.Addr().(*net.TCPAddr), gwLn.Addr().(*net.TCPAddr)
	hostLn.Close()
	gwLn.Close()
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+home, "HOST_PORT="+strconv.Itoa(hostAddr.Port), "GATEWAY_PORT="+strconv.Itoa(gwAddr.Port))
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + hostAddr.String() + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	resp, err := http.Get("http://" + gwAddr.String() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"tier-1", "tier-5", "tier-6", "local-embed"} {
		if !strings.Contains(string(body), `"`+m+`"`) {
			t.Errorf("embedded default models lack %s: %s", m, body)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// buildSteward is the steward binary the CLI tests run: this test binary,
// which TestMain turns into main for a command line. Building cmd/steward
// again took most of a minute on a loaded 2-core machine and proved nothing
// the test binary does not.
func buildSteward(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// TestGatewayBenchSmoke runs the benchmark harness at smoke size: it checks
// that every path answers and the report is complete, not the figures.
func TestGatewayBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cmd := exec.Command(buildSteward(t), "bench", "gateway", "--smoke", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var rep gatewayBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if len(rep.Scenarios) != 2 || rep.Scenarios[0].Concurrency != 1 || rep.Scenarios[1].Concurrency != 64 {
		t.Fatalf("scenarios = %+v", rep.Scenarios)
	}
	for _, s := range rep.Scenarios {
		for _, name := range []string{"direct", "proxy", "gateway"} {
			st := s.Targets[name]
			if st.Errors != 0 || st.P50MS <= 0 || st.Throughput <= 0 {
				t.Errorf("concurrency %d %s: %+v", s.Concurrency, name, st)
			}
		}
	}
	if rep.GatewayPeakRSSMiB <= 0 {
		t.Errorf("gateway RSS not measured: %+v", rep)
	}
	// The verdicts are in the report (their figures are not asserted here).
	if len(rep.Checks) != 4 {
		t.Errorf("checks = %+v", rep.Checks)
	}
}

// TestServeStartsConnectors checks that the host starts Steward's own
// connectors as MCP child processes and that their tools reach the model.
func TestServeStartsConnectors(t *testing.T) {
	up := llmtest.NewServer(t)
	vars := map[string]string{}
	env, _, _ := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	os.WriteFile(filepath.Join(home, "mcp.json"), []byte(`{"mcpServers": {"shell": {"command": "true"}}}`), 0o600)
	cfg, _ := env.Config()
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A user server may not take a connector's name.
	if err := serve(context.Background(), env, sc, loopback(t), loopback(t)); err == nil || !strings.Contains(err.Error(), "rename it") {
		t.Fatalf("err = %v, want the name clash reported", err)
	}
	os.Remove(filepath.Join(home, "mcp.json"))

	servers, err := connectorServers(cfg, "http://127.0.0.1:1/v1", "")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range servers {
		names[s.Name] = true
		if s.Env["STEWARD_HOME"] != home {
			t.Errorf("connector %s gets STEWARD_HOME=%q", s.Name, s.Env["STEWARD_HOME"])
		}
		if _, leaked := s.Env["DEEPSEEK_API_KEY"]; leaked {
			t.Errorf("connector %s gets a provider key", s.Name)
		}
	}
	for _, want := range []string{"documents", "shell"} {
		if !names[want] {
			t.Errorf("connector %s is not started (have %v)", want, names)
		}
	}
}

func TestExternalGatewayIsNotStarted(t *testing.T) {
	free := func() int {
		ln := loopback(t)
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	for _, tc := range []struct {
		baseURL     string
		wantGateway bool
	}{{"", true}, {"http://10.0.0.5:4000/v1", false}} {
		vars := map[string]string{"HOST_PORT": strconv.Itoa(free()), "GATEWAY_PORT": strconv.Itoa(free())}
		if tc.baseURL != "" {
			vars["GATEWAY_BASE_URL"] = tc.baseURL
		}
		env, _, _ := testEnv(t, vars)
		cfg, _ := env.Config()
		sc, err := readServeConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hostLn, gwLn, err := serveListeners(sc)
		if err != nil {
			t.Fatal(err)
		}
		hostLn.Close()
		if (gwLn != nil) != tc.wantGateway {
			t.Errorf("GATEWAY_BASE_URL=%q: gateway listener = %v, want %v", tc.baseURL, gwLn != nil, tc.wantGateway)
		}
		if gwLn != nil {
			gwLn.Close()
		}
		// A port in use is reported with the variable to change.
		busy := loopback(t)
		sc.hostPort = busy.Addr().(*net.TCPAddr).Port
		if _, _, err := serveListeners(sc); err == nil || !strings.Contains(err.Error(), "HOST_PORT") {
			t.Errorf("busy port: err = %v", err)
		}
		busy.Close()
	}
}

// TestHostBenchSmoke runs the host streaming benchmark at smoke size: every
// turn on both paths must complete and the report must be whole.
func TestHostBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cmd := exec.Command(buildSteward(t), "bench", "host", "--smoke", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var rep hostBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	for _, p := range []string{"gateway", "host"} {
		l := rep.Paths[p]
		if l.Errors != 0 || l.TTFTP50MS <= 0 || l.TTLTP50MS < l.TTFTP50MS {
			t.Errorf("%s: %+v", p, l)
		}
	}
	// Chats and turns are counted, not echoed: --smoke is one round of 20 chats.
	if rep.Chats != 20 || rep.Turns["gateway"] != 20 || rep.Turns["host"] != 20 || rep.TTLTRatio <= 0 {
		t.Errorf("report = %+v", rep)
	}
	// Every host turn audits the user's and the assistant's message, as in steward serve.
	if rep.AuditWritten < int64(2*rep.Turns["host"]) || rep.AuditDropped != 0 {
		t.Errorf("audit events written %d, dropped %d; want at least %d written, none dropped", rep.AuditWritten, rep.AuditDropped, 2*rep.Turns["host"])
	}
	// The verdicts are in the report (their figures are not asserted here).
	if len(rep.Checks) != 4 {
		t.Errorf("checks = %+v", rep.Checks)
	}
	// Both paths ask the model the same thing: the chat's conversation and tools.
	if g, h := rep.RequestBytes["gateway"], rep.RequestBytes["host"]; g <= 0 || g != h {
		t.Errorf("mean upstream request bytes: gateway path %.1f, host path %.1f; want equal", g, h)
	}
}

// TestCompactBenchSmoke runs the compaction benchmark at smoke size: the
// chat is compacted twice, with one summary call each and none elsewhere.
func TestCompactBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cmd := exec.Command(buildSteward(t), "bench", "compact", "--smoke", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var rep compactBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Chats != 1 || rep.Compactions < 2 || rep.SummaryCalls != rep.Compactions || rep.MaxSummaryCalls != 1 ||
		rep.StraySummaryCalls != 0 || rep.Errors != 0 || rep.Turns <= rep.Compactions {
		t.Errorf("report = %+v", rep)
	}
	if rep.Plain.TTLTP50MS <= 0 || rep.Compacting.TTLTP50MS <= 0 || rep.PeakFill <= 0 || rep.PeakUsable > 1 {
		t.Errorf("latencies and fill = %+v %+v %.2f %.2f", rep.Plain, rep.Compacting, rep.PeakFill, rep.PeakUsable)
	}
	if len(rep.Checks) != 3 {
		t.Errorf("checks = %+v", rep.Checks)
	}
}

// TestSecondServeOnSameHomeIsRefused runs two real steward serve processes on
// one STEWARD_HOME: the second stops at once with a message that says why and
// which process holds the directory, and the first keeps serving.
func TestSecondServeOnSameHomeIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildSteward(t)
	home := filepath.Join(t.TempDir(), "home")
	start := func() (*exec.Cmd, *bytes.Buffer, string) {
		hostLn, gwLn := loopback(t), loopback(t)
		hostAddr, gwAddr := hostLn.Addr().(*net.TCPAddr), gwLn.Addr().(*net.TCPAddr)
		hostLn.Close()
		gwLn.Close()
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "STEWARD_HOME="+home, "HOST_PORT="+strconv.Itoa(hostAddr.Port), "GATEWAY_PORT="+strconv.Itoa(gwAddr.Port))
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &logs, hostAddr.String()
	}
	healthy := func(addr string) bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	first, _, firstAddr := start()
	waitFor(t, func() bool { return healthy(firstAddr) })

	second, logs, _ := start()
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("second serve exited 0:\n%s", logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("second serve on the same STEWARD_HOME is still running:\n%s", logs)
	}
	msg := logs.String()
	for _, want := range []string{"another steward serve is already running", home, fmt.Sprintf("pid %d", first.Process.Pid)} {
		if !strings.Contains(msg, want) {
			t.Errorf("second serve's message lacks %q:\n%s", want, msg)
		}
	}
	if !healthy(firstAddr) {
		t.Error("the first serve stopped answering")
	}
}
