package host_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/host"
)

func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), host.TokenFileName)
	tok, err := host.LoadOrCreateToken(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) < 32 {
		t.Errorf("token %q is too short", tok)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
	again, err := host.LoadOrCreateToken(path, "")
	if err != nil || again != tok {
		t.Errorf("second start token = %q, %v; want the stored %q", again, err, tok)
	}
	os.Chmod(path, 0o644)
	host.LoadOrCreateToken(path, "")
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("loose token file not restricted: %v", info.Mode().Perm())
	}
	over, err := host.LoadOrCreateToken(path, "override-token-0123456789")
	if err != nil || over != "override-token-0123456789" {
		t.Errorf("override = %q, %v", over, err)
	}
	if _, err := host.LoadOrCreateToken(path, "short"); err == nil {
		t.Error("accepted a 5-character STEWARD_AUTH_TOKEN")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	if _, err := host.LoadOrCreateToken(empty, ""); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("empty token file: err = %v", err)
	}
}

func TestRoutesAndAuth(t *testing.T) {
	h := host.New(host.Options{Token: "secret-token-0123456789", Version: "test"})
	h.Handle("GET /data", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("private")) }))
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()

	tests := []struct {
		path, auth string
		want       int
	}{
		{"/health", "", 200},
		{"/data", "", 401},
		{"/data", "Bearer wrong", 401},
		{"/data", "secret-token-0123456789", 401},
		{"/data?token=secret-token-0123456789", "", 401}, // never from the URL
		{"/data", "Bearer secret-token-0123456789", 200},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with %q = %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
	}
}
