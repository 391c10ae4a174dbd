package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWatchBenchSmoke runs the scale benchmark at smoke size: the report is
// complete and the start-up pass polled every watch.
func TestWatchBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cmd := exec.Command(buildSteward(t), "bench", "watch", "--smoke", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var rep watchBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Watches != 20 || rep.Polls < 20 || rep.Passes < 1 || rep.RSSMiB <= 0 || rep.CPUSeconds <= 0 || len(rep.Checks) != 3 {
		t.Fatalf("report %+v", rep)
	}
}

// TestMCPTrains starts `steward mcp trains` as the host does (stdio) against
// a local ViaggiaTreno stand-in and calls both tools.
func TestMCPTrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	vt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path := strings.ToUpper(r.URL.Path); {
		case strings.HasPrefix(path, "/CERCASTAZIONE/MILANO"):
			fmt.Fprint(w, `[{"id":"S01700","nomeLungo":"MILANO CENTRALE","nomeBreve":"Milano Centrale","label":"Milano"}]`)
		case strings.HasPrefix(path, "/CERCASTAZIONE/"):
			fmt.Fprint(w, `[{"id":"S00219","nomeLungo":"TORINO PORTA NUOVA","nomeBreve":"TORINO P.NUOVA","label":"Torino"}]`)
		default:
			w.WriteHeader(http.StatusNoContent) // no live board
		}
	}))
	defer vt.Close()
	cmd := exec.Command(buildSteward(t), "mcp", "trains")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir(), "VIAGGIATRENO_BASE_URL="+vt.URL)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools %v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_next_train", Arguments: map[string]any{"from": "Milano Centrale", "to": "Torino Porta Nuova"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "no live departure board for MILANO CENTRALE") {
		t.Errorf("no board: %v %q", res.IsError, text)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "train_status", Arguments: map[string]any{"trainRef": "vt1_bad"}})
	if !res.IsError {
		t.Error("a damaged trainRef was accepted")
	}
}

// TestServeTrainsConnectorInProcess: steward serve runs one trains service:
// its trains connector is served in process (the System page says so, and
// no `steward mcp trains` child exists, while the shell connector is a
// child as before), and a chat's train tool reaches the ViaggiaTreno
// endpoint configured for serve.
func TestServeTrainsConnectorInProcess(t *testing.T) {
	var stationLookups atomic.Int64
	vt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path := strings.ToUpper(r.URL.Path); {
		case strings.HasPrefix(path, "/CERCASTAZIONE/MILANO"):
			stationLookups.Add(1)
			fmt.Fprint(w, `[{"id":"S01700","nomeLungo":"MILANO CENTRALE","nomeBreve":"Milano Centrale","label":"Milano"}]`)
		case strings.HasPrefix(path, "/CERCASTAZIONE/"):
			stationLookups.Add(1)
			fmt.Fprint(w, `[{"id":"S00219","nomeLungo":"TORINO PORTA NUOVA","nomeBreve":"TORINO P.NUOVA","label":"Torino"}]`)
		default:
			w.WriteHeader(http.StatusNoContent) // no live board
		}
	}))
	defer vt.Close()
	up := llmtest.NewServer(t)
	vars := map[string]string{"VIAGGIATRENO_BASE_URL": vt.URL}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "mcp__trains__find_next_train",
			Arguments: `{"from":"Milano Centrale","to":"Torino Porta Nuova"}`}}}},
		llmtest.Reply{Content: "No live board right now."})
	base, token := runServe(t, env, home)

	detail := map[string]string{}
	waitFor(t, func() bool {
		for _, s := range systemServices(base, token) {
			if s.State == "ok" {
				detail[s.Name] = s.Detail
			}
		}
		return detail["mcp:trains"] != "" && detail["mcp:shell"] != ""
	})
	if !strings.HasSuffix(detail["mcp:trains"], ", in process") || strings.Contains(detail["mcp:shell"], "in process") {
		t.Errorf("System page: trains %q, shell %q", detail["mcp:trains"], detail["mcp:shell"])
	}
	kids := childCommands(t)
	if !slices.Contains(kids, "mcp shell") || slices.Contains(kids, "mcp trains") {
		t.Errorf("connector children %q: want the shell connector and no trains process", kids)
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	ws, send := dialHost(t, wctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "trains"})
	var result protocol.ToolEvent
	for {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v\nlogs:\n%s", err, logs)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: f["chat"].(map[string]any)["id"].(string), Text: "next train to Torino?"})
		case protocol.TypeToolResult, protocol.TypeToolError:
			json.Unmarshal(data, &result)
		case protocol.TypeTurnDone:
			if !strings.Contains(result.Content, "no live departure board for MILANO CENTRALE") || stationLookups.Load() < 2 {
				t.Fatalf("find_next_train in process = %+v after %d station lookups", result.ToolCard, stationLookups.Load())
			}
			return
		}
	}
}

// childCommands lists this process's child processes as "ARG1 ARG2" (the
// connectors steward serve runs as `<binary> mcp NAME`).
func childCommands(t *testing.T) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(args) >= 3 {
			out = append(out, args[1]+" "+args[2])
		}
	}
	return out
}
