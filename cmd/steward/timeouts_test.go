package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// TestModelTimeSettings: MODEL_STREAM_INACTIVITY_MS decides when a model
// that sends nothing is given up: a short limit moves the host's call on to
// the next candidate, a long one waits for the slow (local) model.
// GATEWAY_REQUEST_TIMEOUT_MS bounds the whole call: a short one ends it.
// Unset, the inactivity limit leaves room for a failover within the deadline.
func TestModelTimeSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		wantBy string // "" = the call fails
	}{
		{"short inactivity limit fails over", map[string]string{"MODEL_STREAM_INACTIVITY_MS": "1000"}, "fast"},
		{"long inactivity limit waits", map[string]string{"MODEL_STREAM_INACTIVITY_MS": "60000"}, "slow"},
		{"short request timeout ends the call", map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "1000"}, ""},
		{"long request timeout waits", map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "60000"}, "slow"},
		// Unset, the inactivity limit is a third of the deadline (2 s here):
		// a stall leaves the next candidate time to answer.
		{"the default inactivity limit leaves room to fail over", map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "6000"}, "fast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := llmtest.NewServer(t)
			up.Enqueue("slow", llmtest.Reply{Content: "from slow", Delay: 2500 * time.Millisecond})
			up.Enqueue("fast", llmtest.Reply{Content: "from fast"})
			yaml := fmt.Sprintf("providers:\n  up: { base_url: %s }\nmodels:\n  tier-5: [ { provider: up, model: slow }, { provider: up, model: fast } ]\n", up.URL)
			env, sc := gatewayServeConfig(t, tc.vars, yaml)
			gw, err := newGateway(sc, sc.lookup, nil, env.Log)
			if err != nil {
				t.Fatal(err)
			}
			client := llm.NewClient(hostModelOptions(sc, "http://gateway.in-process/v1", "sk-local", gw.Handler()))
			resp, err := client.ChatStream(context.Background(), &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			var models []string
			for _, r := range up.Requests() {
				models = append(models, r.Model)
			}
			if tc.wantBy == "" {
				if err == nil || len(models) != 1 {
					t.Fatalf("err %v, upstream saw %v: the call outlived GATEWAY_REQUEST_TIMEOUT_MS", err, models)
				}
				return
			}
			if err != nil || resp.Choices[0].Message.Content != "from "+tc.wantBy {
				t.Fatalf("err %v, response %+v (upstream saw %v)", err, resp, models)
			}
			if !strings.HasPrefix(strings.Join(models, " "), "slow") {
				t.Errorf("upstream saw %v, want the slow candidate first", models)
			}
		})
	}
}

// TestDefaultStreamInactivity: the default inactivity limit is 40 s under
// the default 120 s deadline, a third of a shorter one, and out of the way of
// a deadline too short for any failover.
func TestDefaultStreamInactivity(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want time.Duration
	}{
		{map[string]string{}, 40 * time.Second},
		{map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "600000"}, 40 * time.Second},
		{map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "30000"}, 10 * time.Second},
		{map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "2000"}, llm.DefaultStreamInactivity},
		{map[string]string{"GATEWAY_REQUEST_TIMEOUT_MS": "30000", "MODEL_STREAM_INACTIVITY_MS": "90000"}, 90 * time.Second},
	} {
		_, sc := gatewayServeConfig(t, tc.vars, "")
		if sc.streamInactivity != tc.want {
			t.Errorf("%v: inactivity limit %v, want %v", tc.vars, sc.streamInactivity, tc.want)
		}
	}
}

// gatewayServeConfig is serve's validated configuration for vars, with yaml
// (when not empty) as the home's gateway.yaml.
func gatewayServeConfig(t *testing.T, vars map[string]string, yaml string) (*cliEnv, *serveConfig) {
	t.Helper()
	env, _, _ := testEnv(t, vars)
	if yaml != "" {
		home := vars["STEWARD_HOME"]
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "gateway.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env, sc
}
