package llm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
)

func TestFailedRequestDiagnostics(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	d, err := llm.OpenFailedRequestDiagnostics(llm.DiagnosticsOptions{Dir: dir, Secrets: []string{"sk-project-secret-42"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	replies := make([]wireReply, 20)
	for i := range replies {
		replies[i] = wireReply{status: http.StatusBadRequest, ctype: "application/json",
			body: `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`}
	}
	srv := newWireServer(t, replies...)
	c := providerClient(srv, llm.ProviderTransportOptions{Name: "openai:main", Credentials: llm.StaticKey("sk-header-only-77"), Failures: d, Now: clock})
	req := userRequest("my key is sk-project-secret-42, keep it")
	req.Messages[0].Images = []llm.Image{{MIME: "image/png", Data: []byte("PNG-PIXELS")}}
	if _, err := c.Chat(context.Background(), req); err == nil {
		t.Fatal("the 400 was not returned")
	}
	act := filepath.Join(dir, d.Activation())
	b, err := os.ReadFile(filepath.Join(act, "01.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(act, "01.json")); st.Mode().Perm() != 0o600 {
		t.Errorf("document mode %v", st.Mode())
	}
	for _, leak := range []string{"sk-project-secret-42", "sk-header-only-77", "UE5HLVBJWEVMUw", srv.URL} {
		if strings.Contains(string(b), leak) {
			t.Errorf("document contains %q", leak)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"format": 3.0, "privacy": 2.0, "status": 400.0, "cause": "context_length",
		"code": "context_length_exceeded", "provider": "openai:main", "model": "m", "endpoint": "/chat/completions",
		"fidelity": "reencoded", "redactions": 1.0, "images_omitted": 1.0, "activation": d.Activation()} {
		if doc[k] != want {
			t.Errorf("%s = %v, want %v", k, doc[k], want)
		}
	}
	if !strings.Contains(string(b), "my key is [REDACTED], keep it") || len(doc["request_sha256"].(string)) != 64 {
		t.Errorf("request projection = %s", doc["request"])
	}

	// 16 slots: the 17th failure and later are not stored.
	for range 19 {
		c.Chat(context.Background(), userRequest("again"))
	}
	entries, _ := os.ReadDir(act)
	if len(entries) != llm.DiagnosticSlots {
		t.Errorf("%d documents, want %d", len(entries), llm.DiagnosticSlots)
	}
}

func TestFailedRequestDiagnosticsWindow(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	d, err := llm.OpenFailedRequestDiagnostics(llm.DiagnosticsOptions{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	d.RecordFailure(llm.FailedRequest{Provider: "p", Status: 500, Cause: "server", Body: []byte(`{"model":"m"}`)})
	now = now.Add(llm.DiagnosticWindow + time.Second)
	d.RecordFailure(llm.FailedRequest{Provider: "p", Status: 500, Cause: "server", Body: []byte(`{"model":"m"}`)})
	entries, _ := os.ReadDir(filepath.Join(dir, d.Activation()))
	if len(entries) != 1 {
		t.Errorf("%d documents after the window closed, want 1", len(entries))
	}
	b, _ := os.ReadFile(filepath.Join(dir, d.Activation(), "01.json"))
	var doc map[string]any
	json.Unmarshal(b, &doc)
	if doc["fidelity"] != "exact" || string(mustJSON(doc["request"])) != `{"model":"m"}` {
		t.Errorf("untouched request: fidelity %v request %s", doc["fidelity"], mustJSON(doc["request"]))
	}
	// A second activation gets its own directory.
	d2, err := llm.OpenFailedRequestDiagnostics(llm.DiagnosticsOptions{Dir: dir})
	if err != nil || d2.Activation() == d.Activation() {
		t.Errorf("second activation %v %v", d2, err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
