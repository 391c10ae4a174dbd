package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// deadURL is a loopback base URL where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// TestUnreachableProviders: when no provider of a model accepts a
// connection (a local model server not started) the gateway says so with
// its own code, which llm.IsUnreachable recognises; a provider that
// answers, even with an error, keeps the generic upstream_failed.
func TestUnreachableProviders(t *testing.T) {
	dead := deadURL(t)
	tests := []struct {
		name     string
		chain    string // local-embed's and tier-1's candidates
		upstream int    // status the scripted upstream answers
		path     string
		body     map[string]any
		wantCode string
	}{
		{"embeddings, nothing listens", "[ { provider: dead, model: bge-m3 } ]", 0, "/v1/embeddings",
			map[string]any{"model": "local-embed", "input": []string{"x"}}, llm.UnreachableCode},
		{"streamed chat, nothing listens", "[ { provider: dead, model: llama } ]", 0, "/v1/chat/completions",
			chat("tier-1", true), llm.UnreachableCode},
		{"one unreachable, one answering 500", "[ { provider: dead, model: bge-m3 }, { provider: up, model: bge-m3 } ]", 500, "/v1/embeddings",
			map[string]any{"model": "local-embed", "input": []string{"x"}}, "upstream_failed"},
		{"answering 500", "[ { provider: up, model: bge-m3 } ]", 500, "/v1/embeddings",
			map[string]any{"model": "local-embed", "input": []string{"x"}}, "upstream_failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "providers:\n  dead: { base_url: " + dead + " }\n  up: { base_url: UPSTREAM }\nmodels:\n  local-embed: " + tc.chain +
				"\n  tier-1: " + tc.chain + "\n"
			f := newFixture(t, yaml, gateway.Options{})
			f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: tc.upstream} })
			resp, body := f.post(t, tc.path, tc.body, nil)
			var e llm.ErrorResponse
			json.Unmarshal(body, &e)
			if resp.StatusCode != http.StatusBadGateway || e.Error.Code != tc.wantCode {
				t.Fatalf("status %d, error %+v; want 502 %s", resp.StatusCode, e.Error, tc.wantCode)
			}
			if tc.path != "/v1/embeddings" {
				return
			}
			_, err := llm.NewClient(llm.ClientOptions{BaseURL: f.url + "/v1"}).Embed(context.Background(), "local-embed", []string{"x"})
			if got, want := llm.IsUnreachable(err), tc.wantCode == llm.UnreachableCode; got != want {
				t.Errorf("IsUnreachable(%v) = %v", err, got)
			}
		})
	}

	// Without a gateway, the endpoint itself refusing the connection is
	// unreachable too; an endpoint answering an error is not.
	_, err := llm.NewClient(llm.ClientOptions{BaseURL: dead}).Embed(context.Background(), "local-embed", []string{"x"})
	if !llm.IsUnreachable(err) {
		t.Errorf("IsUnreachable(%v) = false for a closed port", err)
	}
	up := llmtest.NewServer(t)
	up.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 404} })
	_, err = llm.NewClient(llm.ClientOptions{BaseURL: up.URL + "/v1"}).Embed(context.Background(), "local-embed", []string{"x"})
	var ae *llm.APIError
	if !errors.As(err, &ae) || llm.IsUnreachable(err) || !strings.Contains(err.Error(), "404") {
		t.Errorf("an endpoint answering 404: %v, IsUnreachable %v", err, llm.IsUnreachable(err))
	}
}
