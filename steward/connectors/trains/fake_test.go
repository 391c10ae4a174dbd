package trains

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fixtures is the shared real-world ViaggiaTreno data (see fixtures/README.md).
const fixtures = "../../../../shared/fixtures/viaggiatreno"

func fixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, rel))
	if os.IsNotExist(err) {
		t.Skipf("fixture %s is absent (the shared fixtures folder is not checked out)", rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// liveLike answers ViaggiaTreno endpoints like the live service: station
// autocomplete from the real station dumps (case-insensitive prefix on the
// full name, nothing else), departure boards and train runs from what a test
// installs. It counts the requests it served.
type liveLike struct {
	t        testing.TB
	srv      *httptest.Server
	stations []struct {
		NomeLungo string  `json:"nomeLungo"`
		NomeBreve *string `json:"nomeBreve"`
		Label     *string `json:"label"`
		ID        string  `json:"id"`
	}
	autocomplete []string // NAME|ID lines

	mu       sync.Mutex
	boards   map[string][]byte // station id → partenze JSON
	runs     map[string][]byte // "origin/number/day" or "origin/number" → andamentoTreno JSON
	fail     map[string]int    // path prefix → status to answer
	requests []string
}

func newLiveLike(t testing.TB) *liveLike {
	l := &liveLike{t: t, boards: map[string][]byte{}, runs: map[string][]byte{}, fail: map[string]int{}}
	if err := json.Unmarshal(fixture(t, "viaggiatreno-api-dumps/cercaStazione_all.json"), &l.stations); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(fixture(t, "viaggiatreno-api-dumps/autocompletaStazione_all.txt")), "\n") {
		if strings.TrimSpace(line) != "" {
			l.autocomplete = append(l.autocomplete, line)
		}
	}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *liveLike) client() *Client {
	return NewClient(ClientOptions{BaseURL: l.srv.URL, RetryDelay: 1})
}

func (l *liveLike) served(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func (l *liveLike) setRun(key string, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[key] = body
}

func (l *liveLike) setFail(prefix string, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[prefix] = status
}

func (l *liveLike) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path // decoded
	l.mu.Lock()
	l.requests = append(l.requests, path)
	for prefix, status := range l.fail {
		if strings.HasPrefix(path, prefix) {
			l.mu.Unlock()
			w.WriteHeader(status)
			return
		}
	}
	l.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch parts[0] {
	case "cercaStazione":
		q := strings.ToUpper(strings.Join(parts[1:], "/"))
		out := []any{}
		for _, s := range l.stations {
			if strings.HasPrefix(strings.ToUpper(s.NomeLungo), q) {
				out = append(out, s)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	case "autocompletaStazione":
		q := strings.ToUpper(strings.Join(parts[1:], "/"))
		w.Header().Set("Content-Type", "text/plain")
		for _, line := range l.autocomplete {
			if strings.HasPrefix(line, q) {
				fmt.Fprintln(w, line)
			}
		}
	case "partenze":
		l.mu.Lock()
		b, ok := l.boards[parts[1]]
		l.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write(b)
	case "andamentoTreno":
		l.mu.Lock()
		b, ok := l.runs[strings.Join(parts[1:], "/")]
		l.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}
