package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// tokenServer is a loopback OAuth token endpoint.
type tokenServer struct {
	*httptest.Server
	mu     sync.Mutex
	forms  []string
	status int
}

func newTokenServer(t *testing.T, status int) *tokenServer {
	s := &tokenServer{status: status}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		s.mu.Lock()
		s.forms = append(s.forms, r.PostForm.Encode())
		s.mu.Unlock()
		if s.status != http.StatusOK {
			w.Header().Set("Retry-After", "7")
			// A refused refresh may echo what it got; it must not leak.
			http.Error(w, `{"error":"invalid_grant","refresh_token":"`+r.PostForm.Get("refresh_token")+`"}`, s.status)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at-new-0002", "refresh_token": "rt-rotated-0002", "expires_in": 3600, "token_type": "Bearer"})
	}))
	t.Cleanup(s.Close)
	return s
}

func writeProfile(t *testing.T, f llm.AuthProfileFile) string {
	path := filepath.Join(t.TempDir(), "work.json")
	b, _ := json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// authProvider accepts only "Bearer at-new-0002".
func authProvider(t *testing.T) *wireServer {
	srv := newWireServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.mu.Lock()
		srv.reqs = append(srv.reqs, wireRequest{path: r.URL.Path, header: r.Header.Clone()})
		srv.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer at-new-0002" {
			http.Error(w, `{"error":{"message":"invalid token","code":"invalid_api_key"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	})
	return srv
}

func TestAuthProfileRefreshesOnceAfter401(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		tokenStatus int
		expiresAt   time.Time
		wantOK      bool
		wantCalls   int // provider requests
		wantGrants  int // token endpoint requests
	}{
		{"401 then refresh then success", http.StatusOK, time.Time{}, true, 2, 1},
		{"refused refresh keeps the 401", http.StatusBadRequest, time.Time{}, false, 1, 1},
		{"transient refresh failure keeps the 401", http.StatusServiceUnavailable, time.Time{}, false, 1, 3},
		{"expired token is refreshed before the call", http.StatusOK, now.Add(-time.Minute), true, 1, 1},
		{"expired token and transient refresh failure: no call with the stale token", http.StatusServiceUnavailable, now.Add(-time.Minute), false, 0, 3},
		// The old token meets a real 401, which gets its own one refresh.
		{"expired token and refused refresh: the old token is tried", http.StatusBadRequest, now.Add(-time.Minute), false, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenServer(t, tc.tokenStatus)
			path := writeProfile(t, llm.AuthProfileFile{Type: "oauth", AccessToken: "at-old-0001", RefreshToken: "rt-first-0001",
				ExpiresAt: tc.expiresAt, TokenURL: ts.URL + "/oauth/token", ClientID: "saivage"})
			srv := authProvider(t)
			prof := &llm.AuthProfile{Name: "work", Path: path, Now: func() time.Time { return now }, Sleep: noSleep}
			c := providerClient(srv, llm.ProviderTransportOptions{Credentials: prof})
			_, err := c.Chat(context.Background(), userRequest("hi"))
			if (err == nil) != tc.wantOK {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				for _, secret := range []string{"at-old-0001", "rt-first-0001", "at-new-0002", ts.URL} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q leaks %q", err, secret)
					}
				}
			}
			reqs := srv.requests()
			if len(reqs) != tc.wantCalls {
				t.Fatalf("%d provider calls, want %d", len(reqs), tc.wantCalls)
			}
			for _, r := range reqs {
				if strings.Contains(r.path, "at-") || r.header.Get("Authorization") == "" {
					t.Errorf("token not (only) in the header: %s %v", r.path, r.header)
				}
			}
			ts.mu.Lock()
			forms := ts.forms
			ts.mu.Unlock()
			if len(forms) != tc.wantGrants || !strings.Contains(forms[0], "grant_type=refresh_token") || !strings.Contains(forms[0], "refresh_token=rt-first-0001") {
				t.Errorf("token endpoint got %v", forms)
			}
			f, err := llm.LoadAuthProfile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.tokenStatus == http.StatusOK {
				if f.AccessToken != "at-new-0002" || f.RefreshToken != "rt-rotated-0002" || !f.ExpiresAt.Equal(now.Add(time.Hour)) {
					t.Errorf("saved profile = %+v", f)
				}
				if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
					t.Errorf("profile mode = %v", st.Mode())
				}
			} else if f.AccessToken != "at-old-0001" {
				t.Errorf("a failed refresh changed the profile: %+v", f)
			}
		})
	}
}

func TestRefreshErrorIsStatusOnly(t *testing.T) {
	ts := newTokenServer(t, http.StatusTooManyRequests)
	path := writeProfile(t, llm.AuthProfileFile{Type: "oauth", RefreshToken: "rt-first-0001", TokenURL: ts.URL})
	var waits []time.Duration
	_, err := (&llm.AuthProfile{Name: "work", Path: path, Sleep: recordSleep(&waits)}).Refresh(context.Background(), "x")
	var re *llm.RefreshError
	if !errors.As(err, &re) || !re.Transient || re.Status != 429 || re.RetryAfter != 7*time.Second {
		t.Fatalf("err = %#v", err)
	}
	if len(waits) != 2 || waits[0] != 7*time.Second || waits[1] != 7*time.Second {
		t.Errorf("waits = %v, want the Retry-After (7s) before each of two retries", waits)
	}
	if strings.Contains(err.Error(), "rt-first") || strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("error %q carries the answer body", err)
	}
}

func TestLoadAuthProfileRejects(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown field", `{"type":"token","token":"t","scope":"x"}`, "unknown field"},
		{"unknown type", `{"type":"basic","token":"t"}`, "type must be token or oauth"},
		{"token without token", `{"type":"token"}`, "needs token"},
		{"plain http token url", `{"type":"oauth","refresh_token":"r","token_url":"http://auth.example.com/token"}`, "https"},
		{"oauth without tokens", `{"type":"oauth","token_url":"https://a/t"}`, "needs access_token or refresh_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.json")
			os.WriteFile(path, []byte(tc.doc), 0o600)
			if _, err := llm.LoadAuthProfile(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTokenProfileFollowsTheFile(t *testing.T) {
	path := writeProfile(t, llm.AuthProfileFile{Type: "token", Token: "tok-one"})
	p := &llm.AuthProfile{Name: "ci", Path: path}
	if tok, err := p.Token(context.Background()); err != nil || tok != "tok-one" {
		t.Fatalf("token = %q %v", tok, err)
	}
	os.WriteFile(path, []byte(`{"type":"token","token":"tok-two"}`), 0o600)
	if tok, _ := p.Token(context.Background()); tok != "tok-two" {
		t.Errorf("after replacing the file, token = %q", tok)
	}
}

func noSleep(context.Context, time.Duration) error { return nil }

func recordSleep(waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(_ context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return nil
	}
}

// TestRefreshRetriesTransientFailures scripts the token endpoint's answers
// to an expired token's refresh and checks the waits, the number of token
// requests and what the provider then saw.
func TestRefreshRetriesTransientFailures(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	type answer struct {
		status     int
		retryAfter string
	}
	tests := []struct {
		name      string
		answers   []answer // the last one repeats
		wantWaits []time.Duration
		wantToken string // the bearer the provider got ("" = no provider call)
	}{
		{"429 waits its Retry-After then succeeds", []answer{{429, "2"}, {200, ""}}, []time.Duration{2 * time.Second}, "at-new-0002"},
		{"429 with an HTTP-date Retry-After", []answer{{429, now.Add(5 * time.Second).Format(http.TimeFormat)}, {200, ""}}, []time.Duration{5 * time.Second}, "at-new-0002"},
		{"5xx backs off 1 s then succeeds", []answer{{502, ""}, {200, ""}}, []time.Duration{time.Second}, "at-new-0002"},
		{"5xx is finite: three tries, no stale call", []answer{{503, ""}}, []time.Duration{time.Second, 2 * time.Second}, ""},
		{"429 asking for longer than the bound fails at once", []answer{{429, "3600"}}, nil, ""},
		// Another 4xx is not retried; the old token meets the provider's own
		// 401, which gets its one refresh (the same refusal).
		{"400 keeps the old token", []answer{{400, ""}}, nil, "at-old-0001"},
		{"malformed success keeps the old token", []answer{{200, "malformed"}}, nil, "at-old-0001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				a := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				if a.retryAfter != "" && a.status != 200 {
					w.Header().Set("Retry-After", a.retryAfter)
				}
				switch {
				case a.status != 200:
					http.Error(w, `{"error":"slow down"}`, a.status)
				case a.retryAfter == "malformed":
					w.Write([]byte(`{"token_type":"Bearer"}`))
				default:
					json.NewEncoder(w).Encode(map[string]any{"access_token": "at-new-0002", "expires_in": 3600})
				}
			}))
			t.Cleanup(ts.Close)
			path := writeProfile(t, llm.AuthProfileFile{Type: "oauth", AccessToken: "at-old-0001", RefreshToken: "rt-first-0001",
				ExpiresAt: now.Add(-time.Minute), TokenURL: ts.URL})
			srv := authProvider(t)
			var waits []time.Duration
			prof := &llm.AuthProfile{Name: "work", Path: path, Now: func() time.Time { return now }, Sleep: recordSleep(&waits)}
			c := providerClient(srv, llm.ProviderTransportOptions{Credentials: prof})
			_, err := c.Chat(context.Background(), userRequest("hi"))
			if (err == nil) != (tc.wantToken == "at-new-0002") {
				t.Fatalf("err = %v", err)
			}
			if len(waits) != len(tc.wantWaits) {
				t.Fatalf("waits %v, want %v", waits, tc.wantWaits)
			}
			for i := range waits {
				if waits[i] != tc.wantWaits[i] {
					t.Errorf("wait %d = %v, want %v", i, waits[i], tc.wantWaits[i])
				}
			}
			reqs := srv.requests()
			if tc.wantToken == "" {
				if len(reqs) != 0 {
					t.Fatalf("a failed refresh sent %d provider calls", len(reqs))
				}
				return
			}
			if len(reqs) == 0 || reqs[0].header.Get("Authorization") != "Bearer "+tc.wantToken {
				t.Fatalf("provider calls %v, want the first with %s", reqs, tc.wantToken)
			}
		})
	}
}
