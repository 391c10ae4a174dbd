package push

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var b64 = base64.RawURLEncoding

// device is a browser's side of a subscription: its key pair and auth secret.
type device struct {
	priv *ecdh.PrivateKey
	auth []byte
}

func newDevice(t *testing.T) *device {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return &device{priv: priv, auth: auth}
}

func (d *device) keys() Keys {
	return Keys{P256dh: b64.EncodeToString(d.priv.PublicKey().Bytes()), Auth: b64.EncodeToString(d.auth)}
}

// decrypt undoes RFC 8291 / RFC 8188 aes128gcm with the standard library
// only, independently of the sending library.
func (d *device) decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("short body")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if rs > 4096 || rs < 18 {
		return nil, fmt.Errorf("record size %d", rs)
	}
	if len(body) < 21+idlen {
		return nil, errors.New("short header")
	}
	asPublic := body[21 : 21+idlen]
	ct := body[21+idlen:]
	if len(ct) > int(rs) {
		return nil, fmt.Errorf("ciphertext %d bytes exceeds one %d-byte record", len(ct), rs)
	}
	asKey, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, err
	}
	secret, err := d.priv.ECDH(asKey)
	if err != nil {
		return nil, err
	}
	prkKey, _ := hkdf.Extract(sha256.New, secret, d.auth)
	info := append(append([]byte("WebPush: info\x00"), d.priv.PublicKey().Bytes()...), asPublic...)
	ikm, _ := hkdf.Expand(sha256.New, prkKey, string(info), 32)
	prk, _ := hkdf.Extract(sha256.New, ikm, salt)
	cek, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, err
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 0x02 {
		return nil, errors.New("missing last-record delimiter")
	}
	return plain[:len(plain)-1], nil
}

// pushService is a push service on loopback TLS: it verifies the VAPID
// authorisation, decrypts what it receives, and answers per path.
type pushService struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	devices map[string]*device // path → device
	status  map[string]int     // path → status to answer
	got     map[string][]Notification
	vapid   string // the k= key seen
}

func newPushService(t *testing.T) *pushService {
	p := &pushService{t: t, devices: map[string]*device{}, status: map[string]int{}, got: map[string][]Notification{}}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pushService) subscription(t *testing.T, path string) Subscription {
	d := newDevice(t)
	p.mu.Lock()
	p.devices[path] = d
	p.mu.Unlock()
	return Subscription{Endpoint: p.srv.URL + path, Keys: d.keys()}
}

func (p *pushService) setStatus(path string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status[path] = status
}

func (p *pushService) received(path string) []Notification {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Notification(nil), p.got[path]...)
}

func (p *pushService) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	d, status := p.devices[r.URL.Path], p.status[r.URL.Path]
	p.mu.Unlock()
	if err := p.checkVAPID(r); err != nil {
		p.t.Errorf("VAPID: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" || r.Header.Get("TTL") == "" {
		p.t.Errorf("headers %v", r.Header)
	}
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	body := make([]byte, 8192)
	n, _ := r.Body.Read(body)
	for n < len(body) {
		m, err := r.Body.Read(body[n:])
		n += m
		if err != nil {
			break
		}
	}
	plain, err := d.decrypt(body[:n])
	if err != nil {
		p.t.Errorf("decrypt: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var notif Notification
	if err := json.Unmarshal(plain, &notif); err != nil {
		p.t.Errorf("payload %q: %v", plain, err)
	}
	p.mu.Lock()
	p.got[r.URL.Path] = append(p.got[r.URL.Path], notif)
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID verifies the ES256 JWT of "vapid t=…, k=…" against k and the
// endpoint's origin.
func (p *pushService) checkVAPID(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "vapid t=")
	if !ok {
		return fmt.Errorf("authorization %q", auth)
	}
	tok, k, ok := strings.Cut(rest, ", k=")
	if !ok {
		return errors.New("no k=")
	}
	pubBytes, err := b64.DecodeString(k)
	if err != nil {
		return err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pubBytes)
	if err != nil {
		return err
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return errors.New("bad signature encoding")
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("signature does not verify")
	}
	claims, _ := b64.DecodeString(parts[1])
	var c struct {
		Aud string `json:"aud"`
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	json.Unmarshal(claims, &c)
	if c.Aud != "https://"+r.Host || c.Sub != "mailto:me@example.com" || c.Exp < time.Now().Unix() {
		return fmt.Errorf("claims %+v", c)
	}
	p.mu.Lock()
	p.vapid = k
	p.mu.Unlock()
	return nil
}

func openService(t *testing.T, home string, p *pushService) *Service {
	t.Helper()
	s, err := Open(Options{Home: home, Contact: "me@example.com", HTTPClient: p.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendDecryptsAtEndpoint(t *testing.T) {
	p := newPushService(t)
	home := t.TempDir()
	s := openService(t, home, p)
	if err := s.Subscribe(p.subscription(t, "/phone")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("è", 300)
	rep := s.Send(context.Background(), Notification{Title: "Treno", Body: long, Tag: "watch:w1:e1", URL: "/?chat=chat_1", ChatID: "chat_1",
		Data: map[string]string{"watchId": "w1", "eventId": "e1"}})
	if rep.Attempted != 1 || rep.Delivered != 1 || rep.Failed != 0 || !rep.Complete() {
		t.Fatalf("report %+v", rep)
	}
	got := p.received("/phone")
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	n := got[0]
	if n.Title != "Treno" || n.ChatID != "chat_1" || n.URL != "/?chat=chat_1" || n.Data["eventId"] != "e1" {
		t.Errorf("payload %+v", n)
	}
	if r := []rune(n.Body); len(r) != MaxBodyChars || r[len(r)-1] != '…' {
		t.Errorf("body is %d characters, want the %d cap with an ellipsis", len(r), MaxBodyChars)
	}
	if p.vapid != s.PublicKey() {
		t.Errorf("VAPID key %q, want %q", p.vapid, s.PublicKey())
	}

	// The keys persist: a restart signs with the same key the browser has.
	info, err := os.Stat(filepath.Join(home, "vapid.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("vapid.json: %v %v", info, err)
	}
	again := openService(t, home, p)
	if again.PublicKey() != s.PublicKey() || len(again.Subscriptions()) != 1 {
		t.Errorf("restart: key changed or subscriptions lost")
	}
}

func TestPruningAndAllFailed(t *testing.T) {
	p := newPushService(t)
	home := t.TempDir()
	s := openService(t, home, p)
	for _, path := range []string{"/ok", "/gone", "/missing", "/down"} {
		if err := s.Subscribe(p.subscription(t, path)); err != nil {
			t.Fatal(err)
		}
	}
	p.setStatus("/gone", http.StatusGone)
	p.setStatus("/missing", http.StatusNotFound)
	p.setStatus("/down", http.StatusInternalServerError)
	rep := s.Send(context.Background(), Notification{Title: "t", Body: "b"})
	if rep.Attempted != 4 || rep.Delivered != 1 || rep.Failed != 3 || rep.Pruned != 2 || !rep.Complete() {
		t.Fatalf("report %+v", rep)
	}
	for _, e := range rep.Errors {
		if strings.Contains(e, "/gone") || strings.Contains(e, "/down") {
			t.Errorf("an error reveals an endpoint path: %q", e)
		}
	}
	var left []string
	for _, sub := range openService(t, home, p).Subscriptions() { // from disk
		left = append(left, strings.TrimPrefix(sub.Endpoint, p.srv.URL))
	}
	if strings.Join(left, ",") != "/ok,/down" {
		t.Errorf("subscriptions after pruning: %v", left)
	}

	// Every remaining endpoint fails: the send is not complete, nothing is
	// pruned, and a later retry delivers.
	p.setStatus("/ok", http.StatusServiceUnavailable)
	rep = s.Send(context.Background(), Notification{Title: "t", Body: "retry me"})
	if rep.Complete() || rep.Failed != 2 || rep.Pruned != 0 || len(s.Subscriptions()) != 2 {
		t.Fatalf("all failed: %+v", rep)
	}
	p.setStatus("/ok", 0)
	p.setStatus("/down", 0)
	if rep = s.Send(context.Background(), Notification{Title: "t", Body: "retry me"}); rep.Delivered != 2 {
		t.Fatalf("retry: %+v", rep)
	}

	// No endpoint at all counts as complete: the chat copy is the delivery.
	empty := openService(t, t.TempDir(), p)
	if rep := empty.Send(context.Background(), Notification{Body: "x"}); !rep.Complete() || rep.Attempted != 0 {
		t.Errorf("no endpoints: %+v", rep)
	}
}

func TestSubscribeValidation(t *testing.T) {
	p := newPushService(t)
	s := openService(t, t.TempDir(), p)
	good := p.subscription(t, "/x")
	bad := []Subscription{
		{Endpoint: "http://push.example.com/x", Keys: good.Keys},
		{Endpoint: "file:///etc/passwd", Keys: good.Keys},
		{Endpoint: "https://user:pw@push.example.com/x", Keys: good.Keys},
		{Endpoint: good.Endpoint, Keys: Keys{P256dh: "AAAA", Auth: good.Keys.Auth}},
		{Endpoint: good.Endpoint, Keys: Keys{P256dh: good.Keys.P256dh, Auth: "c2hvcnQ"}},
	}
	for _, sub := range bad {
		if err := s.Subscribe(sub); err == nil {
			t.Errorf("accepted %+v", sub)
		}
	}
	if len(s.Subscriptions()) != 0 {
		t.Fatal("a bad subscription was stored")
	}
	// Re-subscribing the same endpoint replaces it.
	s.Subscribe(good)
	s.Subscribe(good)
	if len(s.Subscriptions()) != 1 {
		t.Errorf("%d subscriptions after subscribing twice", len(s.Subscriptions()))
	}
	for i := range MaxSubscriptions {
		s.Subscribe(p.subscription(t, fmt.Sprintf("/d%d", i)))
	}
	if n := len(s.Subscriptions()); n != MaxSubscriptions {
		t.Errorf("%d subscriptions, cap %d", n, MaxSubscriptions)
	}
}

func TestDamagedFiles(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "vapid.json"), []byte("{not json"), 0o600)
	if _, err := Open(Options{Home: home}); err == nil || !strings.Contains(err.Error(), "vapid.json is damaged") {
		t.Errorf("damaged keys: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "vapid.json")); string(b) != "{not json" {
		t.Error("damaged keys were overwritten")
	}
	home = t.TempDir()
	os.WriteFile(filepath.Join(home, "push-subscriptions.json"), []byte("[{"), 0o600)
	if _, err := Open(Options{Home: home}); err == nil || !strings.Contains(err.Error(), "push-subscriptions.json") {
		t.Errorf("damaged subscriptions: %v", err)
	}
}

func TestRoutes(t *testing.T) {
	p := newPushService(t)
	s := openService(t, t.TempDir(), p)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, out := do("GET", "/push/public-key", ""); code != 200 || out["publicKey"] != s.PublicKey() {
		t.Errorf("public key: %d %v", code, out)
	}
	sub := p.subscription(t, "/route")
	b, _ := json.Marshal(sub)
	if code, out := do("POST", "/push/subscribe", string(b)); code != 201 || out["subscriptions"] != 1.0 {
		t.Errorf("subscribe: %d %v", code, out)
	}
	if code, _ := do("POST", "/push/subscribe", `{"endpoint":"http://x"}`); code != 400 {
		t.Errorf("bad subscribe: %d", code)
	}
	if code, _ := do("POST", "/push/subscribe", strings.Repeat("x", 20<<10)); code != 413 {
		t.Errorf("oversized: %d", code)
	}
	if code, out := do("POST", "/push/test", ""); code != 200 || out["delivered"] != 1.0 {
		t.Errorf("test: %d %v", code, out)
	}
	if got := p.received("/route"); len(got) != 1 || !strings.Contains(got[0].Body, "Test notification") {
		t.Errorf("test push %+v", got)
	}
	if code, out := do("POST", "/push/unsubscribe", fmt.Sprintf(`{"endpoint":%q}`, sub.Endpoint)); code != 200 || out["removed"] != true {
		t.Errorf("unsubscribe: %d %v", code, out)
	}
	if code, out := do("POST", "/push/test", `{"body":"hi"}`); code != 200 || out["attempted"] != 0.0 {
		t.Errorf("test with no devices: %d %v", code, out)
	}
}
