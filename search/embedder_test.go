package search_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/search"
)

// TestNewEmbedder: the one embedder constructor calls the endpoint's
// /embeddings with the model, the key and the usage attribution, returns
// one vector per text, and gives up on an endpoint that does not answer
// within Timeout.
func TestNewEmbedder(t *testing.T) {
	up := llmtest.NewServer(t)
	emb := search.NewEmbedder(search.EmbedderOptions{BaseURL: up.URL, APIKey: "sk-test", Model: "local-embed",
		Attribution: llm.Attribution{Service: "wiki", Action: "embed"}, Timeout: time.Minute})
	vecs, err := emb.Embed(context.Background(), []string{"treno", "binario"})
	if err != nil || len(vecs) != 2 || len(vecs[0]) != up.EmbeddingDim {
		t.Fatalf("Embed = %d vectors, %v", len(vecs), err)
	}
	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "local-embed" || r.Header.Get("Authorization") != "Bearer sk-test" ||
		r.Header.Get(llm.HeaderUsageService) != "wiki" || r.Header.Get(llm.HeaderUsageAction) != "embed" {
		t.Errorf("request model %q, headers %v", r.Model, r.Header)
	}

	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers only when the client has given up (or the test ends)
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); stuck.Close() })
	slow := search.NewEmbedder(search.EmbedderOptions{BaseURL: stuck.URL, Model: "local-embed", Timeout: 100 * time.Millisecond})
	done := make(chan error, 1)
	go func() { _, err := slow.Embed(context.Background(), []string{"x"}); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an endpoint that never answers gave vectors")
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Timeout did not bound the request")
	}
}
