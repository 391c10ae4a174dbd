package searchprep

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/gateway"
)

// gatedConnectors answers prepareSearch only when the test releases the
// server's gate, and reports a tool call in flight until idle is closed.
type gatedConnectors struct {
	mu      sync.Mutex
	gates   map[string]chan json.RawMessage
	idle    chan struct{}
	calls   []string
	missing map[string]bool
}

func (g *gatedConnectors) CallCustom(ctx context.Context, server, method string) (json.RawMessage, error) {
	g.mu.Lock()
	g.calls = append(g.calls, server+" "+method)
	gate := g.gates[server]
	g.mu.Unlock()
	if g.missing[server] {
		return nil, fmt.Errorf("%w: not configured", ErrNoPreparation)
	}
	select {
	case raw := <-gate:
		if raw == nil {
			return nil, fmt.Errorf("%s: the index is corrupt", server)
		}
		return raw, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gatedConnectors) Ready(context.Context, string) error { return nil }

func (g *gatedConnectors) WaitIdle(ctx context.Context) error {
	select {
	case <-g.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestQueueRunsInOrderOneAtATime(t *testing.T) {
	var embedReqs []string
	var mu sync.Mutex
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		embedReqs = append(embedReqs, fmt.Sprintf("%s %s %v %s/%s", r.URL.Path, body.Model, body.Input, r.Header.Get("X-Usage-Service"), r.Header.Get("X-Usage-Action")))
		mu.Unlock()
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"local-embed"}`)
	}))
	defer local.Close()
	g := &gatedConnectors{gates: map[string]chan json.RawMessage{"mail": make(chan json.RawMessage), "contacts": make(chan json.RawMessage)},
		idle: make(chan struct{}), missing: map[string]bool{"calendar": true}}
	q := New(Options{Connectors: g, Endpoints: []Endpoint{
		{Setting: "MAIL_EMBED_ENDPOINT", BaseURL: local.URL + "/v1", Model: "local-embed"},
		{Setting: "DOCUMENT_EMBED_ENDPOINT", BaseURL: local.URL + "/v1/", Model: "local-embed"}, // the same: visited once
		{Setting: "REMOTE", BaseURL: "https://api.example.com/v1", Model: "local-embed"},
	}})
	states := func() string {
		var s []string
		for _, tk := range q.State().Tasks {
			s = append(s, tk.Name+"="+tk.State)
		}
		return q.State().State + ": " + strings.Join(s, ", ")
	}
	waitState := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for states() != want {
			if time.Now().After(deadline) {
				t.Fatalf("state %q, want %q", states(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got := states(); got != "queued: mail=queued, local embeddings=queued, calendar=queued, contacts=queued" {
		t.Fatalf("before Run: %s", got)
	}
	done := make(chan struct{})
	go func() { q.Run(context.Background()); close(done) }()
	// A tool call in flight holds the queue.
	waitState("running: mail=queued, local embeddings=queued, calendar=queued, contacts=queued")
	time.Sleep(50 * time.Millisecond)
	g.mu.Lock()
	early := len(g.calls)
	g.mu.Unlock()
	if early != 0 {
		t.Fatalf("preparation began during a tool call: %d requests", early)
	}
	close(g.idle)
	waitState("running: mail=running, local embeddings=queued, calendar=queued, contacts=queued")
	g.gates["mail"] <- json.RawMessage(`{"vectors": 1024, "messages": 3}`)
	waitState("running: mail=done, local embeddings=done, calendar=skipped, contacts=running")
	g.gates["contacts"] <- nil // a failure is recorded; the queue still finishes
	<-done
	if got := states(); got != "done: mail=done, local embeddings=done, calendar=skipped, contacts=failed" {
		t.Fatalf("after Run: %s", got)
	}
	tasks := q.State().Tasks
	for i := 1; i < len(tasks); i++ {
		if tasks[i].Started.Before(*tasks[i-1].Ended) {
			t.Errorf("%s started before %s ended", tasks[i].Name, tasks[i-1].Name)
		}
	}
	if tasks[3].Error != "contacts: the index is corrupt" {
		t.Errorf("contacts error %q", tasks[3].Error)
	}
	if d := tasks[1].Detail; d != "warmed MAIL_EMBED_ENDPOINT; not contacted (remote): REMOTE" {
		t.Errorf("model detail %q", d)
	}
	if len(embedReqs) != 1 || embedReqs[0] != "/v1/embeddings local-embed ["+StartupText+"] host/startup-embedding" {
		t.Errorf("embedding requests %q", embedReqs)
	}
}

func TestIsLoopback(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:4000/v1": true, "http://localhost:11434/v1": true, "http://[::1]:4000/v1": true, "http://127.8.9.1/v1": true,
		"https://api.example.com/v1": false, "http://192.168.1.10:4000/v1": false, "http://localhost.example.com/v1": false, "::bad": false,
	} {
		if got := IsLoopback(url); got != want {
			t.Errorf("IsLoopback(%q) = %v", url, got)
		}
	}
}

// TestModelTaskStates: model preparation is skipped when no embedding
// endpoint is on ("not configured") or when nothing listens where it is
// served ("not reachable", directly or behind the gateway, as on a fresh
// machine without Ollama); an endpoint that answers with an error fails it.
func TestModelTaskStates(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"local-embed"}`)
	}))
	defer ok.Close()
	noModel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"model \"local-embed\" not found","type":"invalid_request_error","code":"model_not_found"}}`)
	}))
	defer noModel.Close()
	cfg, err := gateway.ParseConfig([]byte("providers:\n  ollama: { base_url: " + dead + " }\nmodels:\n  local-embed: [ { provider: ollama, model: bge-m3 } ]\n"))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{Config: cfg, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	gwSrv := httptest.NewServer(gw.Handler())
	defer gwSrv.Close()

	ep := func(setting, base string) Endpoint {
		return Endpoint{Setting: setting, BaseURL: base, Model: "local-embed"}
	}
	tests := []struct {
		name       string
		endpoints  []Endpoint
		state      string
		detail     string // prefix
		errContain string
	}{
		{"embeddings off", nil, Skipped, "not configured: embeddings are off", ""},
		{"nothing listens", []Endpoint{ep("MAIL_EMBED_ENDPOINT", dead)}, Skipped,
			"not reachable: MAIL_EMBED_ENDPOINT (" + dead + ", model local-embed): dial tcp ", ""},
		{"gateway without its local model server", []Endpoint{ep("MAIL_EMBED_ENDPOINT", gwSrv.URL+"/v1")}, Skipped,
			"not reachable: MAIL_EMBED_ENDPOINT (" + gwSrv.URL + "/v1, model local-embed): every provider for local-embed failed: ollama/bge-m3: ", ""},
		{"one warmed, one not reachable", []Endpoint{ep("MAIL_EMBED_ENDPOINT", ok.URL+"/v1"), ep("DOCUMENT_EMBED_ENDPOINT", dead)}, Done,
			"warmed MAIL_EMBED_ENDPOINT; not reachable: DOCUMENT_EMBED_ENDPOINT", ""},
		{"model missing", []Endpoint{ep("MAIL_EMBED_ENDPOINT", noModel.URL+"/v1")}, Failed, "", "model API error 404"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedConnectors{idle: make(chan struct{})}
			close(g.idle)
			q := New(Options{Connectors: g, Before: []string{}, After: []string{}, Endpoints: tc.endpoints})
			q.Run(context.Background())
			tasks := q.State().Tasks
			if len(tasks) != 1 || tasks[0].Name != ModelTask {
				t.Fatalf("tasks %+v", tasks)
			}
			tk := tasks[0]
			if tk.State != tc.state || !strings.HasPrefix(tk.Detail, tc.detail) || !strings.Contains(tk.Error, tc.errContain) {
				t.Errorf("task %+v, want %s, detail %q…, error with %q", tk, tc.state, tc.detail, tc.errContain)
			}
			if tc.state != Failed && tk.Error != "" {
				t.Errorf("error %q recorded on a %s task", tk.Error, tk.State)
			}
		})
	}
}
