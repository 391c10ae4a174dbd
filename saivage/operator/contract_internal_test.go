package operator

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestContractAdmitsDeclaredStatusesOnly drives the contract wrapper with
// handlers that answer undeclared statuses or fail unexpectedly: the
// client gets the fixed safe 500, the log gets the details (never the
// query string).
func TestContractAdmitsDeclaredStatusesOnly(t *testing.T) {
	var logged bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil)), redact: func(s string) string { return s }}
	op := Operation{Name: "test.op", Method: "GET", Path: "/api/test", Query: []string{"ticket"}, Statuses: []int{200, 400, 401, 500}}
	tests := []struct {
		name     string
		h        func(w http.ResponseWriter, r *http.Request) error
		want     int
		wantBody string
	}{
		{"declared", func(w http.ResponseWriter, r *http.Request) error {
			writeJSON(w, 200, map[string]any{"ok": true})
			return nil
		}, 200, `"ok": true`},
		{"undeclared 404 error", func(w http.ResponseWriter, r *http.Request) error { return notFound("secret detail") }, 500, internalMessage},
		{"undeclared 202 write", func(w http.ResponseWriter, r *http.Request) error {
			writeJSON(w, 202, map[string]any{"x": 1})
			return nil
		}, 500, internalMessage},
		{"unexpected error", func(w http.ResponseWriter, r *http.Request) error { return errors.New("disk exploded at /secret/path") }, 500, internalMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.contract(op, tt.h)(rec, httptest.NewRequest("GET", "/api/test?ticket=tk-123", nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.want || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("= %d %s", rec.Code, body)
			}
			if tt.want == 500 && (strings.Contains(string(body), "secret") || strings.Contains(string(body), "exploded")) {
				t.Errorf("the 500 leaks details: %s", body)
			}
		})
	}
	if !strings.Contains(logged.String(), "disk exploded") || !strings.Contains(logged.String(), "undeclared status") {
		t.Errorf("log = %s", logged.String())
	}
	if strings.Contains(logged.String(), "tk-123") {
		t.Errorf("the log carries the query: %s", logged.String())
	}
}
