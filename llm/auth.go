package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credentials supply the bearer token of a provider request. Refresh is
// called once after the provider rejected token with 401; it returns the
// token to retry with.
type Credentials interface {
	Token(ctx context.Context) (string, error)
	Refresh(ctx context.Context, rejected string) (string, error)
}

// StaticKey is an API key that cannot be refreshed.
type StaticKey string

// Token returns the key.
func (k StaticKey) Token(context.Context) (string, error) { return string(k), nil }

// Refresh fails: a rejected API key stays rejected.
func (k StaticKey) Refresh(context.Context, string) (string, error) {
	return "", errors.New("an API key cannot be refreshed")
}

// AuthProfileFile is the JSON document of an auth profile: a plain token,
// or OAuth credentials that are refreshed through TokenURL.
type AuthProfileFile struct {
	// Type is "token" or "oauth".
	Type string `json:"type"`
	// Token is the bearer token of a "token" profile.
	Token string `json:"token,omitempty"`
	// AccessToken, RefreshToken and ExpiresAt are the OAuth grant.
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	// TokenURL is the OAuth token endpoint (https, or http on loopback).
	TokenURL string `json:"token_url,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// AccountID is the provider-side account the token belongs to; the
	// Codex protocol sends it as the chatgpt-account-id header.
	AccountID string `json:"account_id,omitempty"`
}

// Refresh retry budget: a transient failure of the token endpoint (429,
// 5xx, network) is tried again, at most refreshAttempts times in all, after
// its Retry-After or refreshBackoff doubling.
const (
	refreshAttempts = 3
	refreshBackoff  = time.Second
	// DefaultMaxRefreshWait bounds the Retry-After a refresh waits out.
	DefaultMaxRefreshWait = 30 * time.Second
)

// expirySkew refreshes an OAuth token this long before it expires.
const expirySkew = time.Minute

// AuthProfile reads an auth profile file on every request, so a file
// replaced by another process (last completed write wins) takes effect at
// once, and writes refreshed OAuth tokens back to it.
type AuthProfile struct {
	// Name names the profile in errors.
	Name string
	Path string
	// HTTPClient calls the token endpoint (default: a client with a 60 s
	// timeout).
	HTTPClient *http.Client
	// Now defaults to time.Now.
	Now func() time.Time
	// Sleep waits between refresh attempts (default: a timer that ends
	// early with ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRefreshWait is the longest Retry-After a rate-limited refresh
	// waits out before trying again (default DefaultMaxRefreshWait); a
	// longer one fails the refresh at once.
	MaxRefreshWait time.Duration

	mu sync.Mutex // one refresh at a time within this process
}

// RefreshError is a failed OAuth refresh. Transient says whether the token
// endpoint asked to be tried later (429, 5xx, network): the old token is
// then not used either.
type RefreshError struct {
	Profile    string
	Status     int // 0 for a network failure or a malformed answer
	Transient  bool
	RetryAfter time.Duration
	Reason     string
}

func (e *RefreshError) Error() string {
	s := fmt.Sprintf("refresh auth profile %s: %s", e.Profile, e.Reason)
	if e.Status != 0 {
		s = fmt.Sprintf("refresh auth profile %s: token endpoint answered %d", e.Profile, e.Status)
	}
	return s
}

func (p *AuthProfile) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// LoadAuthProfile reads and checks an auth profile file.
func LoadAuthProfile(path string) (*AuthProfileFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read auth profile: %w", err)
	}
	var f AuthProfileFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth profile %s: not a valid profile document: %w", filepath.Base(path), err)
	}
	switch f.Type {
	case "token":
		if f.Token == "" {
			return nil, fmt.Errorf("auth profile %s: a token profile needs token", filepath.Base(path))
		}
	case "oauth":
		if f.AccessToken == "" && f.RefreshToken == "" {
			return nil, fmt.Errorf("auth profile %s: an oauth profile needs access_token or refresh_token", filepath.Base(path))
		}
		if f.RefreshToken != "" {
			if err := checkTokenURL(f.TokenURL); err != nil {
				return nil, fmt.Errorf("auth profile %s: %w", filepath.Base(path), err)
			}
		}
	default:
		return nil, fmt.Errorf("auth profile %s: type must be token or oauth, not %q", filepath.Base(path), f.Type)
	}
	return &f, nil
}

func checkTokenURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return errors.New("token_url must be an absolute URL")
	}
	if u.Scheme == "https" {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())) {
		return nil
	}
	return errors.New("token_url must use https (http only on loopback)")
}

// Token returns the profile's current token, refreshing an OAuth token that
// has expired. A failed refresh of an expired token is returned as an error
// (no request is sent with a stale token), except a non-transient failure of
// a token that is still present, which is tried and left to the provider's
// own 401.
func (p *AuthProfile) Token(ctx context.Context) (string, error) {
	f, err := LoadAuthProfile(p.Path)
	if err != nil {
		return "", err
	}
	if f.Type == "token" {
		return f.Token, nil
	}
	if f.AccessToken != "" && (f.ExpiresAt.IsZero() || p.now().Add(expirySkew).Before(f.ExpiresAt)) {
		return f.AccessToken, nil
	}
	tok, err := p.refresh(ctx, f.AccessToken)
	var re *RefreshError
	if err != nil && errors.As(err, &re) && !re.Transient && f.AccessToken != "" {
		return f.AccessToken, nil
	}
	return tok, err
}

// AccountID returns the profile's provider-side account id ("" if none).
func (p *AuthProfile) AccountID() (string, error) {
	f, err := LoadAuthProfile(p.Path)
	if err != nil {
		return "", err
	}
	return f.AccountID, nil
}

// Refresh refreshes an OAuth profile after the provider rejected rejected.
// When another refresh already replaced the rejected token, the file's
// newer token is returned without calling the endpoint.
func (p *AuthProfile) Refresh(ctx context.Context, rejected string) (string, error) {
	return p.refresh(ctx, rejected)
}

func (p *AuthProfile) refresh(ctx context.Context, stale string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := LoadAuthProfile(p.Path)
	if err != nil {
		return "", err
	}
	if f.Type != "oauth" || f.RefreshToken == "" {
		return "", &RefreshError{Profile: p.Name, Reason: "the profile has no refresh token"}
	}
	if f.AccessToken != "" && f.AccessToken != stale && (f.ExpiresAt.IsZero() || p.now().Add(expirySkew).Before(f.ExpiresAt)) {
		return f.AccessToken, nil
	}
	maxWait := p.MaxRefreshWait
	if maxWait <= 0 {
		maxWait = DefaultMaxRefreshWait
	}
	var grant *tokenGrant
	for attempt := 1; ; attempt++ {
		grant, err = p.requestGrant(ctx, f)
		var re *RefreshError
		if err == nil || !errors.As(err, &re) || !re.Transient || attempt == refreshAttempts {
			break
		}
		wait := refreshBackoff << (attempt - 1)
		if re.RetryAfter > 0 {
			wait = re.RetryAfter
		}
		if wait > maxWait {
			break // the endpoint asks for longer than a model call can wait
		}
		if err := p.sleep(ctx, wait); err != nil {
			return "", fmt.Errorf("refresh auth profile %s: %w", p.Name, err)
		}
	}
	if err != nil {
		return "", err
	}
	f.AccessToken = grant.AccessToken
	if grant.RefreshToken != "" {
		f.RefreshToken = grant.RefreshToken
	}
	f.ExpiresAt = time.Time{}
	if grant.ExpiresIn > 0 {
		f.ExpiresAt = p.now().Add(time.Duration(grant.ExpiresIn) * time.Second).UTC()
	}
	if err := writePrivateFile(p.Path, f); err != nil {
		return "", fmt.Errorf("save refreshed auth profile %s: %w", p.Name, err)
	}
	return f.AccessToken, nil
}

// writePrivateFile replaces path with v as JSON, mode 0600, by rename.
func writePrivateFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tokenGrant is a successful token endpoint answer.
type tokenGrant struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
}

// requestGrant makes one refresh-token request. Its failures are status
// only: the body of a refused refresh is never read into an error (it may
// echo the refresh token), nor is the URL.
func (p *AuthProfile) requestGrant(ctx context.Context, f *AuthProfileFile) (*tokenGrant, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {f.RefreshToken}}
	if f.ClientID != "" {
		form.Set("client_id", f.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &RefreshError{Profile: p.Name, Reason: "bad token_url"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	hc := p.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("refresh auth profile %s: %w", p.Name, ctx.Err())
		}
		return nil, &RefreshError{Profile: p.Name, Transient: true, Reason: "token endpoint unreachable"}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &RefreshError{Profile: p.Name, Status: resp.StatusCode}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			e.Transient = true
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), p.now())
		}
		return nil, e
	}
	var g tokenGrant
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&g); err != nil || g.AccessToken == "" {
		return nil, &RefreshError{Profile: p.Name, Reason: "malformed token endpoint answer"}
	}
	return &g, nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date (0 when
// absent, malformed or past).
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (p *AuthProfile) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
