package audit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
)

func serve(t *testing.T, l *audit.Ledger) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/audit", l.Handler())
	mux.Handle("/audit/{id}", l.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, out any) int {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: content type %q", path, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: decode: %v", path, err)
	}
	return resp.StatusCode
}

func TestHandlerFilters(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	base := seed(t, l)
	srv := serve(t, l)
	rfc := func(h int) string {
		return url.QueryEscape(base.Add(time.Duration(h) * time.Hour).Format(time.RFC3339))
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"}},
		{"?actor=user", []string{"e4", "e0"}},
		{"?type=approval.request", []string{"e3"}},
		{"?risk=medium", []string{"e7", "e2"}},
		{"?chat=c2", []string{"e7", "e6"}},
		{"?tool=mcp__calendar__sync", []string{"e6"}},
		{"?correlation=req-7&actor=host", []string{"e3"}},
		{"?from=" + rfc(5) + "&to=" + rfc(7), []string{"e6", "e5"}},
		{"?q=milano", []string{"e0"}},
		{"?q=frecciarossa+10%3A05", []string{"e1"}},
		{"?limit=2", []string{"e7", "e6"}},
	} {
		var page audit.Page
		if code := get(t, srv, "/audit"+tc.query, &page); code != http.StatusOK {
			t.Errorf("%s: status %d", tc.query, code)
			continue
		}
		if got := names(page.Events); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestHandlerPaginationAndGet(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	seed(t, l)
	srv := serve(t, l)
	var got []string
	path := "/audit?limit=3"
	for range 5 {
		var page audit.Page
		if code := get(t, srv, path, &page); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		got = append(got, names(page.Events)...)
		if page.Next == "" {
			break
		}
		path = "/audit?limit=3&before=" + url.QueryEscape(page.Next)
	}
	if want := []string{"e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"}; !slices.Equal(got, want) {
		t.Fatalf("pages gave %v", got)
	}

	var list audit.Page
	get(t, srv, "/audit?type=approval.response", &list)
	var one struct {
		ID      int64           `json:"id"`
		Summary string          `json:"summary"`
		Payload json.RawMessage `json:"payload"`
		Time    time.Time       `json:"time"`
	}
	if code := get(t, srv, "/audit/"+jsonID(list.Events[0].ID), &one); code != http.StatusOK ||
		one.Summary != "e4 approved" || string(one.Payload) != `{"decision":"approve","note":"50% off, ok"}` {
		t.Errorf("get: %d %+v", code, one)
	}
	var e struct{ Error string }
	if code := get(t, srv, "/audit/424242", &e); code != http.StatusNotFound || e.Error != "no audit event 424242" {
		t.Errorf("missing event: %d %q", code, e.Error)
	}
	if code := get(t, srv, "/audit/abc", &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "not a positive integer") {
		t.Errorf("bad id: %d %q", code, e.Error)
	}
}

func jsonID(id int64) string { b, _ := json.Marshal(id); return string(b) }

func TestHandlerRejectsBadParameters(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	srv := serve(t, l)
	for _, tc := range []struct{ query, want string }{
		{"?actr=user", `unknown parameter "actr"; use actor, type, risk`},
		{"?actor=user&actor=host", `parameter "actor" given 2 times`},
		{"?risk=critical", `risk: "critical" is not one of low, medium, high`},
		{"?actor=" + url.QueryEscape("<script>"), `actor: "<script>" is not a valid actor`},
		{"?type=" + strings.Repeat("t", 70), "is not a valid type"},
		{"?chat=" + strings.Repeat("c", 201), "chat: longer than 200 bytes"},
		{"?from=yesterday", `from: "yesterday" is not an RFC 3339 time`},
		{"?to=2026-11-30", `to: "2026-11-30" is not an RFC 3339 time`},
		{"?from=2026-11-30T10:00:00Z&to=2026-11-30T09:00:00Z", "from must be earlier than to"},
		{"?limit=0", `limit: "0" is not a whole number from 1 to 500`},
		{"?limit=501", `limit: "501" is not a whole number from 1 to 500`},
		{"?limit=ten", `limit: "ten" is not a whole number`},
		{"?before=yesterday", "before: not a cursor from a previous page's next"},
		{"?q=" + strings.Repeat("a", 201), "q: 201 characters; at most 200"},
		{"?q=" + strings.Repeat("a+", 11), "q: 11 words; at most 10"},
	} {
		var e struct{ Error string }
		code := get(t, srv, "/audit"+tc.query, &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s: %d %q, want 400 containing %q", tc.query, code, e.Error, tc.want)
		}
	}
	resp, err := http.Post(srv.URL+"/audit", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
