package wiki

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type apiClient struct {
	t     *testing.T
	base  string
	token string
}

func (c apiClient) do(method, path string, body any, out any) int {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, r)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestHTTPAPI(t *testing.T) {
	dir := writeVault(t, map[string]string{
		"wiki/Atlas.md":    "---\ntitle: Atlas\ntype: concept\nsources: [raw/sources/a.md]\n---\nThe Atlas migration. [[Budget]]\n",
		"wiki/Budget.md":   "---\ntitle: Budget\ntype: decision\nsources: [raw/sources/a.md]\n---\n40k approved.\n",
		"raw/sources/a.md": "source",
	})
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	srv := httptest.NewServer(RequireBearer("wiki-token-0123456789", APIHandler(s)))
	t.Cleanup(srv.Close)

	anon := apiClient{t, srv.URL, ""}
	for _, p := range []string{"/health", "/search?q=atlas", "/page?path=wiki/Atlas.md", "/queue"} {
		if code := anon.do("GET", p, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	if code := (apiClient{t, srv.URL, "wrong"}).do("GET", "/health", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	c := apiClient{t, srv.URL, "wiki-token-0123456789"}
	var health struct {
		OK    bool
		Pages int
	}
	if code := c.do("GET", "/health", nil, &health); code != 200 || !health.OK || health.Pages != 2 {
		t.Errorf("health: %d %+v", code, health)
	}
	var sr SearchResponse
	c.do("GET", "/search?q="+url.QueryEscape("atlas migration"), nil, &sr)
	if len(sr.Results) == 0 || sr.Results[0].Path != "wiki/Atlas.md" {
		t.Errorf("search: %+v", sr)
	}
	var page ReadResult
	c.do("GET", "/page?path="+url.QueryEscape("wiki/Atlas.md"), nil, &page)
	if page.Hash == "" || len(page.Links) != 1 || page.Links[0].To != "wiki/Budget.md" {
		t.Errorf("page: %+v", page)
	}
	// Write with the conflict check.
	var wr WriteResult
	if code := c.do("PUT", "/page", WriteRequest{Path: "wiki/Atlas.md", Content: "---\ntitle: Atlas\nsources: [raw/sources/a.md]\n---\nv2 [[Budget]]\n", BaseHash: page.Hash}, &wr); code != 200 || wr.Hash == "" {
		t.Fatalf("write: %d %+v", code, wr)
	}
	var errBody map[string]string
	if code := c.do("PUT", "/page", WriteRequest{Path: "wiki/Atlas.md", Content: "---\ntitle: Atlas\n---\nv3\n", BaseHash: page.Hash}, &errBody); code != http.StatusConflict || !strings.Contains(errBody["error"], "changed on disk") {
		t.Errorf("stale write: %d %v", code, errBody)
	}
	if code := c.do("PUT", "/page", map[string]any{"path": "../x.md", "content": "x"}, &errBody); code != http.StatusBadRequest {
		t.Errorf("traversal write: %d", code)
	}
	var g GraphResult
	c.do("GET", "/graph?path="+url.QueryEscape("wiki/Budget.md"), nil, &g)
	if len(g.Neighbors) == 0 || g.Neighbors[0].Path != "wiki/Atlas.md" {
		t.Errorf("graph: %+v", g)
	}
	var lint LintReport
	c.do("GET", "/lint", nil, &lint)
	if lint.Pages != 3 || lint.Count("orphan") != 1 { // Atlas; log.md is new
		t.Errorf("lint: %+v", lint)
	}
	// Queue: enqueue, cancel, retry.
	var ir IngestResult
	if code := c.do("POST", "/queue", IngestRequest{Path: "raw/sources/a.md"}, &ir); code != 200 || ir.Task == nil || ir.Task.Status != TaskQueued {
		t.Fatalf("enqueue: %d %+v", code, ir)
	}
	var task Task
	if code := c.do("POST", "/queue/"+itoa(ir.Task.ID)+"/cancel", nil, &task); code != 200 || task.Status != TaskCancelled {
		t.Errorf("cancel: %d %+v", code, task)
	}
	if code := c.do("POST", "/queue/"+itoa(ir.Task.ID)+"/retry", nil, &task); code != 200 || task.Status != TaskQueued {
		t.Errorf("retry: %d %+v", code, task)
	}
	if code := c.do("POST", "/queue", IngestRequest{Path: "raw/sources/missing.md"}, &errBody); code == 200 {
		t.Error("ingest of a missing source accepted")
	}
	var snap queueSnapshot
	c.do("GET", "/queue", nil, &snap)
	if snap.Counts.Queued != 1 || len(snap.Tasks) != 1 {
		t.Errorf("queue: %+v", snap)
	}
	// An edit outside Steward, then a rescan.
	os.WriteFile(filepath.Join(dir, "wiki", "New.md"), []byte("zeppelin"), 0o644)
	var st SyncStats
	c.do("POST", "/rescan", nil, &st)
	if st.Added != 1 {
		t.Errorf("rescan: %+v", st)
	}
	c.do("GET", "/search?q=zeppelin", nil, &sr)
	if len(sr.Results) != 1 {
		t.Errorf("search after rescan: %+v", sr)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
