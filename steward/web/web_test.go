package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentstack/agentstack/steward/web"
)

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShellAndCaching(t *testing.T) {
	h := web.Handler()
	res := get(t, h, "/", nil)
	shell := body(t, res)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("shell Cache-Control = %q, want no-cache (revalidate each load)", cc)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "object-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows inline or eval: %q", csp)
	}
	if strings.Contains(shell, "{{") {
		t.Errorf("unreplaced placeholder in the shell")
	}
	// Every asset the shell names is served, versioned and immutable.
	refs := regexp.MustCompile(`(?:href|src)="(/assets/[^"]+)"`).FindAllStringSubmatch(shell, -1)
	if len(refs) < 5 {
		t.Fatalf("the shell references only %d assets", len(refs))
	}
	for _, m := range refs {
		r := get(t, h, m[1], nil)
		if r.StatusCode != 200 {
			t.Errorf("GET %s = %d", m[1], r.StatusCode)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s Cache-Control = %q", m[1], cc)
		}
	}
	// The same ETag revalidates to 304 without a body.
	r304 := get(t, h, "/", map[string]string{"If-None-Match": res.Header.Get("ETag")})
	if r304.StatusCode != http.StatusNotModified || body(t, r304) != "" {
		t.Errorf("revalidation = %d, want 304 with no body", r304.StatusCode)
	}
}

func TestVersionedAssetsAndNotFound(t *testing.T) {
	a, err := web.New(fstest.MapFS{
		"static/index.html":           {Data: []byte(`<script src="{{ASSETS}}/js/app.js"></script>`)},
		"static/sw.js":                {Data: []byte(`const SHELL = {{SHELL_FILES}}; const A = '{{ASSETS}}/';`)},
		"static/manifest.webmanifest": {Data: []byte(`{"icons":[{"src":"{{ASSETS}}/icon.png"}]}`)},
		"static/js/app.js":            {Data: []byte(strings.Repeat("console.log('steward');\n", 200))},
		"static/icon.png":             {Data: []byte("\x89PNG")},
	})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "/assets/" + a.Version() + "/"
	if shell := body(t, get(t, a, "/", nil)); shell != `<script src="`+prefix+`js/app.js"></script>` {
		t.Errorf("shell = %s", shell)
	}
	sw := body(t, get(t, a, "/sw.js", nil))
	if want := `const SHELL = ["icon.png","js/app.js"]; const A = '` + prefix + `';`; sw != want {
		t.Errorf("sw.js = %s\nwant    %s", sw, want)
	}
	mf := get(t, a, "/manifest.webmanifest", nil)
	if ct := mf.Header.Get("Content-Type"); ct != "application/manifest+json" {
		t.Errorf("manifest Content-Type = %q", ct)
	}
	js := get(t, a, prefix+"js/app.js", map[string]string{"Accept-Encoding": "gzip, br"})
	if js.Header.Get("Content-Encoding") != "gzip" || js.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("js headers = %v", js.Header)
	}
	zr, err := gzip.NewReader(js.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.HasPrefix(plain, []byte("console.log")) {
		t.Errorf("gzip body decodes to %.40q", plain)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/assets/000000000000/js/app.js", 404}, // another version
		{prefix + "index.html", 404},            // templates are only served at their routes
		{prefix + "../web.go", 404},
		{"/js/app.js", 404},
		{"/etc/passwd", 404},
	} {
		if r := get(t, a, tc.path, nil); r.StatusCode != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.path, r.StatusCode, tc.want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d", rec.Code)
	}
	if _, err := web.New(fstest.MapFS{"static/index.html": {Data: []byte("x")}}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("an app without sw.js and manifest: err = %v", err)
	}
}

// TestShellBudget keeps the whole app shell (everything the service worker
// caches) under 300 KB uncompressed.
func TestShellBudget(t *testing.T) {
	a, err := web.New(web.Files())
	if err != nil {
		t.Fatal(err)
	}
	files := a.ShellFiles()
	total := 0
	var names []string
	for name, n := range files {
		total += n
		names = append(names, name)
	}
	sort.Strings(names)
	t.Logf("app shell: %d files, %d bytes", len(files), total)
	if total >= 300*1024 {
		t.Errorf("the app shell is %d bytes, over the 300 KB budget", total)
	}
	// The service worker caches exactly the shell.
	sw := body(t, get(t, a, "/sw.js", nil))
	m := regexp.MustCompile(`\.\.\.(\[[^\]]*\])\.map`).FindStringSubmatch(sw)
	if m == nil {
		t.Fatalf("no shell list in sw.js")
	}
	var listed []string
	if err := json.Unmarshal([]byte(m[1]), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed)+3 != len(files) { // + the shell, the manifest and sw.js itself
		t.Errorf("sw.js caches %d assets; the shell has %d files (%v)", len(listed), len(files), names)
	}
}
