package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
)

// runGateway runs `steward gateway` (serve without a host) over a home of
// its own whose gateway.yaml is yaml, until the test ends or stop is
// called; it returns the gateway's base URL.
func runGateway(t *testing.T, vars map[string]string, yaml string) (baseURL, home string, stop func()) {
	t.Helper()
	env, sc := gatewayServeConfig(t, vars, yaml)
	home = vars["STEWARD_HOME"]
	sc.gatewayBaseURL = ""
	ln := loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, env, sc, nil, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String() + "/v1", home, stop
}

// TestExternalGatewayFailsOverAStalledCandidate: the host reaches a gateway
// in another serve over HTTP (GATEWAY_BASE_URL). The gateway's first
// candidate never answers; the host's inactivity limit (2 s) is shorter
// than the gateway's (4 s), so without the gateway's liveness events the
// host's own timer would end the call before the failover. The turn
// completes with the second candidate's answer, and the gateway's ledger
// shows the stalled attempt.
func TestExternalGatewayFailsOverAStalledCandidate(t *testing.T) {
	up := llmtest.NewServer(t)
	stall := llmtest.Reply{Content: "never sent", Delay: time.Hour}
	up.Enqueue("stalls", stall, stall, stall, stall, stall) // the host's retries too
	up.Enqueue("answers", llmtest.Reply{Content: "Answered by the second candidate."})
	gwURL, gwHome, stopGateway := runGateway(t, map[string]string{"MODEL_STREAM_INACTIVITY_MS": "4000"},
		fmt.Sprintf("providers:\n  up: { base_url: %s }\nmodels:\n  tier-5: [ { provider: up, model: stalls }, { provider: up, model: answers } ]\n", up.URL))

	vars := map[string]string{"GATEWAY_BASE_URL": gwURL, "MODEL_STREAM_INACTIVITY_MS": "2000", "STEWARD_SCHEDULER": "off",
		"MAIL_EMBED_ENDPOINT": "off", "MAIL_CLASSIFY_ENDPOINT": "off"}
	env, _, logs := testEnv(t, vars)
	base, token := runServe(t, env, vars["STEWARD_HOME"])

	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	ws, send := dialHost(t, wctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "failover"})
	sent := false
	for done := false; !done; {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v\nlogs:\n%s", err, logs)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			if !sent {
				sent = true
				send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: f["chat"].(map[string]any)["id"].(string), Text: "hello?"})
			}
		case protocol.TypeTurnDone:
			if f["ok"] != true || f["text"] != "Answered by the second candidate." {
				t.Fatalf("turn.done = %v\nlogs:\n%s", f, logs)
			}
			done = true
		}
	}
	var models []string
	for _, r := range up.Requests() {
		models = append(models, r.Model)
	}
	if got := strings.Join(models, " "); got != "stalls answers" {
		t.Errorf("the providers saw %s, want stalls then answers", got)
	}

	// The gateway's ledger, once it has stopped and flushed it.
	stopGateway()
	ledger, err := usage.Open(context.Background(), filepath.Join(gwHome, "usage.db"), usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	var outcome, service string
	var attempts int
	if err := ledger.DB().QueryRow(`SELECT outcome, service, attempts FROM requests WHERE endpoint = 'chat'`).Scan(&outcome, &service, &attempts); err != nil {
		t.Fatal(err)
	}
	if outcome != "ok" || service != "host" || attempts != 2 {
		t.Errorf("request row: outcome %s service %s attempts %d", outcome, service, attempts)
	}
	rows, err := ledger.DB().Query(`SELECT seq, upstream_model, outcome, error FROM attempts ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var seq int
		var model, outcome, msg string
		rows.Scan(&seq, &model, &outcome, &msg)
		got = append(got, fmt.Sprintf("%d %s %s %s", seq, model, outcome, msg))
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "1 stalls retryable model stream stalled") || got[1] != "2 answers ok " {
		t.Errorf("attempt rows = %q, want the stalled attempt on stalls, then answers ok", got)
	}
}

// TestExternalGatewayThatHangs: a gateway that takes the request and never
// answers still ends the host's model call at MODEL_STREAM_INACTIVITY_MS,
// with an error that names the gateway.
func TestExternalGatewayThatHangs(t *testing.T) {
	ln := loopback(t)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	gwURL := "http://" + ln.Addr().String() + "/v1"
	vars := map[string]string{"GATEWAY_BASE_URL": gwURL, "MODEL_STREAM_INACTIVITY_MS": "1000"}
	env, _, _ := testEnv(t, vars)
	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := llm.NewClient(hostModelOptions(sc, sc.gatewayBaseURL, "sk-local", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = client.ChatStream(ctx, &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
	if ctx.Err() != nil {
		t.Fatal("the call outlived its test deadline: a hung gateway was waited for")
	}
	if !errors.Is(err, llm.ErrStreamStalled) || !strings.Contains(err.Error(), "neither data nor a liveness event from the gateway at "+gwURL+" for 1s") {
		t.Fatalf("err = %v, want a stall naming the gateway", err)
	}
}
