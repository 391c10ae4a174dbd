package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

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
