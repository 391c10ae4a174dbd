package runtime

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// TestCodexCacheKeyFollowsTheInvocationOwner: on the Codex protocol each
// calling agent's session, and its summarizer apart from it, sends its own
// prompt_cache_key, stable across its calls, with a session_id header equal
// to the body's key.
func TestCodexCacheKeyFollowsTheInvocationOwner(t *testing.T) {
	stream, err := os.ReadFile(filepath.Join("..", "..", "llm", "testdata", "responses", "text_only.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var headers []string
	codex := newProvider(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		headers = append(headers, r.Header.Get("session_id"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(stream)
	})
	ctx := context.Background()
	dir := t.TempDir()
	if _, _, err := project.Init(ctx, project.InitOptions{Options: project.Options{Root: dir}, Objective: "Build a hello tool."}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(data), "http://127.0.0.1:4000/v1", codex.URL)
	cfg = strings.ReplaceAll(cfg, "transportProtocol: chat_completions", "transportProtocol: codex")
	if !strings.Contains(cfg, "transportProtocol: codex") {
		t.Fatal("the template's provider has no transportProtocol to switch")
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(ctx, project.Options{Root: dir, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := New(Options{Project: p, Environ: os.Environ})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	route, _ := rt.models.Route("default")
	call := func(sess *session, kind string) {
		t.Helper()
		iv := &invoker{rt: rt, route: route, sess: sess}
		req := &llm.ChatRequest{Model: route.Public, Messages: []llm.Message{{Role: "user", Content: "hi"}}}
		if _, _, err := iv.send(ctx, rt.avail.operation(), req, nil, kind); err != nil {
			t.Fatalf("%s %s: %v", sess.id, kind, err)
		}
	}
	planner, executor := rt.cardSession("project", "planner"), rt.cardSession("project", "executor")
	call(planner, "primary")
	call(executor, "primary")
	call(planner, "summary")
	call(planner, "primary")
	call(executor, "primary")

	s := codex.seen()
	mu.Lock()
	defer mu.Unlock()
	if len(s) != 5 {
		t.Fatalf("codex saw %d requests", len(s))
	}
	keys := make([]string, len(s))
	for i, r := range s {
		keys[i], _ = r.Body["prompt_cache_key"].(string)
		if len(keys[i]) != 32 || headers[i] != keys[i] {
			t.Errorf("request %d: prompt_cache_key %q, session_id %q", i, keys[i], headers[i])
		}
	}
	if keys[0] == keys[1] || keys[0] == keys[2] || keys[1] == keys[2] {
		t.Errorf("planner %s, executor %s and the planner's summarizer %s must differ", keys[0], keys[1], keys[2])
	}
	if keys[3] != keys[0] || keys[4] != keys[1] {
		t.Errorf("an agent's key changed between its calls: %v", keys)
	}
	if want := llm.CodexCacheKey(llm.WithCacheOwner(ctx, planner.id+"\x00primary"), dir, "smart"); keys[0] != want {
		t.Errorf("planner key %s, want SHA-256 of the project root and the owner (%s)", keys[0], want)
	}
}
