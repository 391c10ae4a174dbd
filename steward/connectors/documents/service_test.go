package documents

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/pathguard"
)

// TestMain lets the test binary act as the extraction worker process.
func TestMain(m *testing.M) {
	switch os.Getenv("DOCUMENTS_TEST_WORKER") {
	case "serve":
		if err := ServeWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "hang":
		select {} // a parser stuck forever
	}
	os.Exit(m.Run())
}

func newTestService(t *testing.T, mod func(*Options)) (*Service, string) {
	t.Helper()
	home := t.TempDir()
	opts := Options{Guard: pathguard.New(pathguard.Options{Home: home, DataDir: filepath.Join(home, "steward")})}
	if mod != nil {
		mod(&opts)
	}
	return New(opts), home
}

func pagesText(n, size int) []string {
	var pages []string
	for i := range n {
		var b strings.Builder
		for b.Len() < size {
			fmt.Fprintf(&b, "Page %d sentence %d talks about topic%d and more words. ", i+1, b.Len(), i+1)
		}
		pages = append(pages, b.String())
	}
	return pages
}

func TestReadDefaultsCapsAndContinuation(t *testing.T) {
	svc, home := newTestService(t, nil)
	text := strings.Repeat("0123456789 abcdefghi\n", 2000) // 42,000 chars
	p := filepath.Join(home, "long.txt")
	os.WriteFile(p, []byte(text), 0o600)
	ctx := context.Background()

	r, err := svc.Read(ctx, ReadRequest{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stats.Characters != DefaultReadChars || r.Stats.Pages != 1 || !r.Navigation.HasMore {
		t.Fatalf("default read: %+v", r.Stats)
	}
	r, err = svc.Read(ctx, ReadRequest{Path: p, MaxChars: 50_000, MaxPages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stats.Characters != MaxReadChars {
		t.Fatalf("cap not applied: %d", r.Stats.Characters)
	}
	// Following cursors reproduces the document exactly.
	var got strings.Builder
	cursor := ""
	for i := 0; ; i++ {
		r, err := svc.Read(ctx, ReadRequest{Path: p, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Segments {
			got.WriteString(s.Text)
		}
		if !r.Navigation.HasMore {
			break
		}
		cursor = r.Navigation.NextCursor
		if i > 20 {
			t.Fatal("cursor loop does not end")
		}
	}
	if got.String() != strings.TrimRight(text, "\n") {
		t.Fatalf("continuation lost text: %d vs %d bytes", got.Len(), len(text))
	}
}

func TestReadPagesAndErrors(t *testing.T) {
	svc, home := newTestService(t, nil)
	p := filepath.Join(home, "deck.pptx")
	os.WriteFile(p, generatePPTX([]string{"One\na", "Two\nb", "Three\nc", "Four\nd", "Five\ne"}), 0o600)
	ctx := context.Background()
	r, err := svc.Read(ctx, ReadRequest{Path: p, Page: 2, MaxPages: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Segments) != 3 || r.Segments[0].Page != 2 || r.Segments[2].Page != 4 || !r.Navigation.HasMore {
		t.Fatalf("pages: %+v nav %+v", r.Segments, r.Navigation)
	}
	r, err = svc.Read(ctx, ReadRequest{Path: p, Cursor: r.Navigation.NextCursor, MaxPages: 9})
	if err != nil || len(r.Segments) != 1 || r.Segments[0].Page != 5 || r.Navigation.HasMore {
		t.Fatalf("last page: %+v %v", r, err)
	}
	if !strings.Contains(r.Segments[0].Text, "Five") {
		t.Fatalf("slide 5 text: %q", r.Segments[0].Text)
	}

	unversioned := base64.RawURLEncoding.EncodeToString([]byte(`{"p":1,"o":0}`))
	cases := []struct {
		name string
		req  ReadRequest
		code string
	}{
		{"page and cursor", ReadRequest{Path: p, Page: 1, Cursor: "x"}, CodeInvalidArgument},
		{"page out of range", ReadRequest{Path: p, Page: 6}, CodeInvalidArgument},
		{"garbage cursor", ReadRequest{Path: p, Cursor: "!!"}, CodeInvalidArgument},
		{"unversioned cursor", ReadRequest{Path: p, Cursor: unversioned}, CodeStaleCursor},
		{"relative path", ReadRequest{Path: "deck.pptx"}, CodeInvalidArgument},
		{"missing", ReadRequest{Path: filepath.Join(home, "nope.pdf")}, CodeNotFound},
		{"directory", ReadRequest{Path: home}, CodeNotRegular},
	}
	os.WriteFile(filepath.Join(home, "x.exe"), []byte("MZ"), 0o600)
	cases = append(cases, struct {
		name string
		req  ReadRequest
		code string
	}{"unsupported", ReadRequest{Path: filepath.Join(home, "x.exe")}, CodeUnsupported})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Read(ctx, tc.req)
			if ErrorCode(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}

func TestStaleCursorAfterEdit(t *testing.T) {
	svc, home := newTestService(t, nil)
	p := filepath.Join(home, "a.txt")
	os.WriteFile(p, []byte(strings.Repeat("word ", 3000)), 0o600)
	ctx := context.Background()
	r, err := svc.Read(ctx, ReadRequest{Path: p, MaxChars: 100})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte(strings.Repeat("other ", 3000)), 0o600)
	_, err = svc.Read(ctx, ReadRequest{Path: p, Cursor: r.Navigation.NextCursor})
	if ErrorCode(err) != CodeStaleCursor {
		t.Fatalf("edited file: got %v, want stale cursor", err)
	}
}

func TestSensitivePathsAndSize(t *testing.T) {
	svc, home := newTestService(t, func(o *Options) { o.MaxBytes = 1000 })
	ssh := filepath.Join(home, ".ssh")
	os.MkdirAll(ssh, 0o700)
	os.WriteFile(filepath.Join(ssh, "notes.txt"), []byte("TOPSECRETVALUE"), 0o600)
	link := filepath.Join(home, "innocent.txt")
	os.Symlink(filepath.Join(ssh, "notes.txt"), link)
	big := filepath.Join(home, "big.txt")
	os.WriteFile(big, make([]byte, 2000), 0o600)
	env := filepath.Join(home, ".env.txt")
	os.WriteFile(env, []byte("KEY=1"), 0o600)
	for _, tc := range []struct {
		path, code, msg string
	}{
		{link, CodeBlocked, ".ssh"},
		{filepath.Join(ssh, "notes.txt"), CodeBlocked, ".ssh"},
		{env, CodeBlocked, ".env"},
		{filepath.Join(home, "steward", "token.txt"), CodeBlocked, "data directory"},
		{big, CodeTooLarge, "DOCUMENT_MAX_BYTES"},
	} {
		_, err := svc.Info(context.Background(), tc.path)
		if ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %s mentioning %q", tc.path, err, tc.code, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "TOPSECRETVALUE") {
			t.Errorf("error leaks content: %v", err)
		}
	}
}

func TestFileChangedDuringExtraction(t *testing.T) {
	svc, home := newTestService(t, nil)
	p := filepath.Join(home, "a.md")
	os.WriteFile(p, []byte("# Title\nbody"), 0o600)
	svc.afterExtract = func() {
		os.WriteFile(p, []byte("# Title\nbody changed meanwhile"), 0o600)
	}
	_, err := svc.Info(context.Background(), p)
	if ErrorCode(err) != CodeChanged {
		t.Fatalf("got %v, want %s", err, CodeChanged)
	}
	if svc.cache.len() != 0 {
		t.Fatal("a changed extraction was cached")
	}
}

func TestInfoHeadingsAndCache(t *testing.T) {
	svc, home := newTestService(t, nil)
	p := filepath.Join(home, "report.docx")
	os.WriteFile(p, generateDOCX([]string{"# Summary", "Short intro.", "# Details", "Deep content."}), 0o600)
	ctx := context.Background()
	info, err := svc.Info(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != FormatDOCX || info.Pages != 1 || len(info.Headings) != 2 || info.Headings[1].Text != "Details" {
		t.Fatalf("info: %+v", info)
	}
	r, err := svc.Read(ctx, ReadRequest{Path: p, Cursor: info.Headings[1].Cursor})
	if err != nil || !strings.HasPrefix(r.Segments[0].Text, "Details") {
		t.Fatalf("heading cursor read: %+v %v", r, err)
	}
	d1, _ := svc.open(ctx, p)
	d2, _ := svc.open(ctx, p)
	if d1 != d2 {
		t.Fatal("second open did not hit the cache")
	}
	// Eight entries at most: a ninth file evicts the least recently used.
	for i := range 9 {
		q := filepath.Join(home, fmt.Sprintf("f%d.txt", i))
		os.WriteFile(q, []byte("text"), 0o600)
		if _, err := svc.Info(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if n := svc.cache.len(); n != CacheEntries {
		t.Fatalf("cache holds %d entries, want %d", n, CacheEntries)
	}
	if d3, _ := svc.open(ctx, p); d3 == d1 {
		t.Fatal("least recently used entry was not evicted")
	}
}

func TestCacheByteBudget(t *testing.T) {
	svc, home := newTestService(t, func(o *Options) { o.CacheMaxBytes = 15_000 })
	ctx := context.Background()
	for i := range 3 {
		q := filepath.Join(home, fmt.Sprintf("f%d.txt", i))
		os.WriteFile(q, []byte(strings.Repeat("x", 6000)), 0o600)
		if _, err := svc.Info(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if n := svc.cache.len(); n != 2 {
		t.Fatalf("byte budget kept %d entries, want 2", n)
	}
}

func TestWorkerProcess(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	svc, home := newTestService(t, func(o *Options) {
		o.WorkerCommand = []string{self}
		o.Timeout = 500 * time.Millisecond
	})
	p := filepath.Join(home, "a.pdf")
	os.WriteFile(p, generatePDF([]string{"alpha page", "beta page"}, pdfOptions{Compress: true}), 0o600)
	t.Setenv("DOCUMENTS_TEST_WORKER", "serve")
	svc.opts.Timeout = time.Minute // generous: only a hang guard for the success case
	info, err := svc.Info(context.Background(), p)
	if err != nil || info.Pages != 2 || info.Characters != len("alpha page")+len("beta page") {
		t.Fatalf("worker extraction: %+v %v", info, err)
	}
	enc := filepath.Join(home, "enc.pdf")
	os.WriteFile(enc, generatePDF([]string{"x"}, pdfOptions{Encrypted: true, UserPassword: "hunter2"}), 0o600)
	if _, err := svc.Info(context.Background(), enc); ErrorCode(err) != CodePasswordRequired {
		t.Fatalf("worker error code: %v", err)
	}

	t.Setenv("DOCUMENTS_TEST_WORKER", "hang")
	svc.opts.Timeout = 300 * time.Millisecond
	os.WriteFile(filepath.Join(home, "b.txt"), []byte("stuck"), 0o600)
	start := time.Now()
	_, err = svc.Info(context.Background(), filepath.Join(home, "b.txt"))
	if ErrorCode(err) != CodeTimeout || !strings.Contains(err.Error(), "DOCUMENT_EXTRACT_TIMEOUT_MS") {
		t.Fatalf("hung worker: got %v, want %s", err, CodeTimeout)
	}
	if time.Since(start) > 30*time.Second { // hang guard only
		t.Fatal("timeout did not stop the worker")
	}
}

func TestOptionsFromConfigDefaultsAndOff(t *testing.T) {
	cfg := loadConfig(t, map[string]string{"DOCUMENT_EXTRACT_TIMEOUT_MS": "500", "DOCUMENT_MAX_BYTES": "999999999999", "DOCUMENT_EMBED_ENDPOINT": "off"})
	opts, err := OptionsFromConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Timeout != time.Second || opts.MaxBytes != MaxMaxBytes || opts.Embedder != nil || opts.Limits.MaxChars != DefaultMaxChars {
		t.Fatalf("clamping/defaults: %+v", opts)
	}
	if opts.Limits.WorkerHeapBytes != DefaultWorkerHeapBytes {
		t.Errorf("default worker heap = %d", opts.Limits.WorkerHeapBytes)
	}
	if o, _ := OptionsFromConfig(loadConfig(t, map[string]string{"DOCUMENT_WORKER_HEAP_MB": "512"}), nil); o.Limits.WorkerHeapBytes != 512<<20 {
		t.Errorf("DOCUMENT_WORKER_HEAP_MB=512 gave %d bytes", o.Limits.WorkerHeapBytes)
	}
	cfg = loadConfig(t, map[string]string{"GATEWAY_BASE_URL": "http://127.0.0.1:9/v1"})
	opts, err = OptionsFromConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := opts.Embedder.(*llm.Embedder)
	if !ok || e.Client.BaseURL() != "http://127.0.0.1:9/v1" || e.Model != "local-embed" || opts.EmbedderID == "" {
		t.Fatalf("gateway embedder: %+v", opts.Embedder)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	env["STEWARD_HOME"] = t.TempDir()
	cfg, err := config.Load(config.LoadOptions{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
