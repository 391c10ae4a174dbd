package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/agentstack/agentstack/agent"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// rawProvider is a loopback chat provider that keeps the exact bytes of
// every request and answers with a short stream.
type rawProvider struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newRawProvider(t *testing.T) *rawProvider {
	p := &rawProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.bodies = append(p.bodies, b)
		p.mu.Unlock()
		chatOK(w, r, 0)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *rawProvider) received() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.bodies...)
}

// planRuntime starts a runtime on the classic template with its provider at
// url, its configuration rewritten by edit (nil: as is).
func planRuntime(t *testing.T, url string, edit func(string) string) *Runtime {
	t.Helper()
	return planRuntimeWith(t, url, Options{}, edit)
}

// planRuntimeWith is planRuntime with opts (its Project and Environ are set
// here).
func planRuntimeWith(t *testing.T, url string, opts Options, edit func(string) string) *Runtime {
	t.Helper()
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
	cfg := strings.ReplaceAll(string(data), "http://127.0.0.1:4000/v1", url)
	if edit != nil {
		cfg = edit(cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(ctx, project.Options{Root: dir, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	opts.Project, opts.Environ = p, os.Environ
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// TestAdmittedPlanBytesReachTheProvider: through the gateway and the
// provider transport, the provider receives exactly the admitted plan's
// bytes, and the evidence names that plan's hash. A plan whose bytes were
// altered after admission fails its integrity check: nothing reaches the
// provider, the IntegrityError comes back as is, and no evidence is
// written for it.
func TestAdmittedPlanBytesReachTheProvider(t *testing.T) {
	prov := newRawProvider(t)
	rt := planRuntime(t, prov.URL+"/v1", nil)
	route, _ := rt.models.Route("default")
	sess := rt.cardSession("project", "planner")
	iv := &invoker{rt: rt, route: route, sess: sess}
	ctx := context.Background()
	msgs := []llm.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello there"}}

	adm, _, err := iv.admit(ctx, iv.rt.avail.operation(), msgs, nil)
	if err != nil || len(adm.admitted) != 2 {
		t.Fatalf("admission = %+v, %v", adm, err)
	}
	if _, _, err := iv.sendPlans(ctx, "primary", route.Public, adm.admitted, nil); err != nil {
		t.Fatal(err)
	}
	got := prov.received()
	if len(got) != 1 || !bytes.Equal(got[0], adm.admitted[0].plan.Body) {
		t.Fatalf("the provider received %d requests, not the admitted plan's bytes", len(got))
	}
	evidence, err := os.ReadFile(filepath.Join(sess.dir, ExchangesFile))
	if err != nil || !strings.Contains(string(evidence), `"request_sha256":"`+adm.admitted[0].plan.Hash()+`"`) {
		t.Fatalf("evidence does not name the plan's hash: %v", err)
	}

	// Alter the admitted bytes in place, as an aliasing defect would.
	tampered, _, err := iv.admit(ctx, iv.rt.avail.operation(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := tampered.admitted[0].plan.Body
	i := bytes.Index(body, []byte("hello there"))
	copy(body[i:], "HELLO THERE")
	_, attempts, err := iv.sendPlans(ctx, "primary", route.Public, tampered.admitted, nil)
	var ie *gateway.IntegrityError
	if !errors.As(err, &ie) || attempts != nil {
		t.Fatalf("err = %v, attempts %v: want the integrity error alone", err, attempts)
	}
	if n := len(prov.received()); n != 1 {
		t.Errorf("the provider received %d requests, want none after the first", n)
	}
	after, _ := os.ReadFile(filepath.Join(sess.dir, ExchangesFile))
	if !bytes.Equal(after, evidence) {
		t.Error("evidence was written for the plan that failed its integrity check")
	}
}

// TestAdmissionExcludesIncapableCandidates: a request with an image is
// planned only for the candidates that take images, in route order; when
// none can take it, admission says why for each and nothing is built.
func TestAdmissionExcludesIncapableCandidates(t *testing.T) {
	m, err := bind(t, t.TempDir(), `providers:
  p:
    baseUrl: http://127.0.0.1:9/v1
    models: [text, vision, tools-free]
    modelCapabilities:
      text: {imageInput: false}
      tools-free: {toolsMode: none}
models:
  routes:
    default: {candidates: [p/text, p/vision, p/tools-free]}
    blind: {candidates: [p/text]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img := []llm.Message{{Role: "user", Content: "look", Images: []llm.Image{{MIME: "image/png", Data: []byte("x")}}}}
	tools := []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: "read", Parameters: []byte(`{"type":"object"}`)}}}
	for _, tc := range []struct {
		name  string
		route string
		msgs  []llm.Message
		tools []llm.Tool
		want  string // admitted upstream models, or the error's words
	}{
		{"image", "default", img, nil, "vision tools-free"},
		{"image and tools", "default", img, tools, "vision"},
		{"text", "default", []llm.Message{{Role: "user", Content: "hi"}}, tools, "text vision"},
		{"no capable candidate", "blind", img, nil, "takes no image input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb, _ := m.Route(tc.route)
			iv := &invoker{rt: &Runtime{models: m}, route: rb, sess: &session{id: "s"}}
			adm, _, err := iv.admit(context.Background(), newAvailability(nil).operation(), tc.msgs, tc.tools)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p/text") {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			var got []string
			for _, p := range adm.admitted {
				got = append(got, p.req.Model)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("admitted %v, want %s", got, tc.want)
			}
		})
	}
}

// TestSummaryFoldIsAPlanOfTheSummarizer: with compaction.summarizer_candidate
// set, a summary fold is planned for that candidate alone, with the
// summary's output limit capped to the model's own, and the provider
// receives exactly the bytes its evidence row names.
func TestSummaryFoldIsAPlanOfTheSummarizer(t *testing.T) {
	prov := newRawProvider(t)
	rt := planRuntime(t, prov.URL+"/v1", func(cfg string) string {
		cfg = strings.Replace(cfg, "      transportProtocol: chat_completions\n",
			"      transportProtocol: chat_completions\n    modelCapabilities:\n      tier-3: {contextWindowTokens: 50000, maxOutputTokens: 1000, toolsMode: native, transportProtocol: chat_completions}\n", 1)
		return strings.Replace(cfg, "compaction:\n  enabled: true\n", "compaction:\n  enabled: true\n  summarizer_candidate: {provider: gateway, model: tier-3}\n", 1)
	})
	route, _ := rt.models.Route("default")
	sess := rt.cardSession("project", "planner")
	iv := &invoker{rt: rt, route: route, sess: sess}
	if _, err := iv.foldSend(context.Background(), iv.rt.avail.operation(), iv.summaryRequest("", []agent.SourcePart{{Text: "USER: build it"}}, false)); err != nil {
		t.Fatal(err)
	}
	got := prov.received()
	if len(got) != 1 {
		t.Fatalf("the provider received %d requests", len(got))
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
	}
	if err := json.Unmarshal(got[0], &body); err != nil || body.Model != "tier-3" || body.MaxTokens != 1000 {
		t.Errorf("summary request = %s (%v)", got[0], err)
	}
	evidence, err := os.ReadFile(filepath.Join(sess.dir, ExchangesFile))
	sum := sha256.Sum256(got[0])
	if err != nil || !strings.Contains(string(evidence), `"kind":"summary"`) || !strings.Contains(string(evidence), hex.EncodeToString(sum[:])) {
		t.Errorf("the summary's evidence does not name the bytes sent: %s %v", evidence, err)
	}
}

// TestCodexCacheKeyIsPartOfThePlan: a Codex member's plan carries the
// invocation owner's prompt_cache_key in its body, so the key is admitted
// and hashed with it (the transport's session_id header derives from it);
// a Chat member's plan carries none.
func TestCodexCacheKeyIsPartOfThePlan(t *testing.T) {
	root := t.TempDir()
	m, err := bind(t, root, `providers:
  p:
    baseUrl: http://127.0.0.1:9/v1
    models: [chat, cx]
    modelCapabilities:
      cx: {transportProtocol: codex}
models:
  routes:
    default: {candidates: [p/chat, p/cx]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := m.Route("default")
	iv := &invoker{rt: &Runtime{models: m}, route: rb, sess: &session{id: "agent:planner:project"}}
	adm, _, err := iv.admit(context.Background(), newAvailability(nil).operation(), []llm.Message{{Role: "user", Content: "hi"}}, nil)
	if err != nil || len(adm.admitted) != 2 {
		t.Fatalf("admission %+v %v", adm, err)
	}
	want := llm.OwnerCacheKey(root, "agent:planner:project\x00primary")
	chat, cx := adm.admitted[0], adm.admitted[1]
	if bytes.Contains(chat.plan.Body, []byte("prompt_cache_key")) {
		t.Errorf("the chat plan carries a cache key: %s", chat.plan.Body)
	}
	var body struct {
		Key string `json:"prompt_cache_key"`
	}
	if err := json.Unmarshal(cx.plan.Body, &body); err != nil || body.Key != want || cx.plan.Hash() != hex.EncodeToString(sha256Sum(cx.plan.Body)) {
		t.Errorf("codex plan key %q, want %q (%v)", body.Key, want, err)
	}
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
