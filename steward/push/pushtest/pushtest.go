// Package pushtest is a Web Push service for tests: RFC 8030 delivery,
// RFC 8292 VAPID checks and RFC 8291 decryption written against the RFCs
// with the standard library only, independently of the sending library.
package pushtest

import (
	"bytes"
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

func newDevice(t testing.TB) *device {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return &device{priv: priv, auth: auth}
}

func (d *device) keys() (p256dh, auth string) {
	return b64.EncodeToString(d.priv.PublicKey().Bytes()), b64.EncodeToString(d.auth)
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

// Receiver is a push service on loopback TLS: it verifies the VAPID
// authorisation (ES256 JWT, audience, subject Contact), decrypts what it
// receives as the subscribed browser would, and answers per path.
type Receiver struct {
	// Contact is the VAPID subject the sender must claim.
	Contact string
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	devices map[string]*device // path → device
	status  map[string]int     // path → status to answer
	got     map[string][][]byte
	fails   map[string]int // path → how many more requests to answer 500
	vapid   string         // the k= key seen
}

// New starts a receiver that expects contact as the VAPID subject.
func New(t testing.TB, contact string) *Receiver {
	p := &Receiver{Contact: contact, t: t, devices: map[string]*device{}, status: map[string]int{}, got: map[string][][]byte{}, fails: map[string]int{}}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the receiver's base URL.
func (p *Receiver) URL() string { return p.srv.URL }

// Client trusts the receiver's certificate.
func (p *Receiver) Client() *http.Client { return p.srv.Client() }

// Subscribe creates a browser subscription at path and returns what the
// browser would post: the endpoint and its base64url keys.
func (p *Receiver) Subscribe(t testing.TB, path string) (endpoint, p256dh, auth string) {
	d := newDevice(t)
	p.mu.Lock()
	p.devices[path] = d
	p.mu.Unlock()
	k, a := d.keys()
	return p.srv.URL + path, k, a
}

// SetStatus makes path answer status (0: accept).
func (p *Receiver) SetStatus(path string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status[path] = status
}

// FailNext makes path answer 500 to its next n requests.
func (p *Receiver) FailNext(path string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails[path] = n
}

// Received returns the decrypted payloads path accepted, in order.
func (p *Receiver) Received(path string) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.got[path]...)
}

// VAPIDKey is the k= key of the last authorised request.
func (p *Receiver) VAPIDKey() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vapid
}

func (p *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	d, status := p.devices[r.URL.Path], p.status[r.URL.Path]
	if p.fails[r.URL.Path] > 0 {
		p.fails[r.URL.Path]--
		status = http.StatusInternalServerError
	}
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
	if !json.Valid(plain) {
		p.t.Errorf("payload %q is not JSON", plain)
	}
	p.mu.Lock()
	p.got[r.URL.Path] = append(p.got[r.URL.Path], plain)
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID verifies the ES256 JWT of "vapid t=…, k=…" against k and the
// endpoint's origin.
func (p *Receiver) checkVAPID(r *http.Request) error {
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
	if c.Aud != "https://"+r.Host || c.Sub != p.Contact || c.Exp < time.Now().Unix() {
		return fmt.Errorf("claims %+v", c)
	}
	p.mu.Lock()
	p.vapid = k
	p.mu.Unlock()
	return nil
}
