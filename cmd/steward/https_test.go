package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/protocol"
)

// testCert writes a self-signed certificate for steward.test and 127.0.0.2
// with the given serial to certPath/keyPath and returns it parsed.
func testCert(t *testing.T, certPath, keyPath string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "steward.test"},
		DNSNames: []string{"steward.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.2")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestHTTPSListener runs steward serve with a self-signed certificate and
// uses it through 127.0.0.2 — a non-loopback-listener address of this
// machine — as a phone would: health, a WebSocket turn, data routes behind
// the token, no automatic pairing, a renewed certificate picked up without
// restart, and token rotation from the System page disconnecting clients.
func TestHTTPSListener(t *testing.T) {
	up := llmtest.NewServer(t)
	up.Enqueue("scripted", llmtest.Reply{Content: "hello over https"})
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := testCert(t, certPath, keyPath, 1)
	port := freePort(t)
	vars := map[string]string{"STEWARD_TLS_CERT": certPath, "STEWARD_TLS_KEY": keyPath, "STEWARD_TLS_PORT": strconv.Itoa(port)}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	_, token := runServe(t, env, home)

	// The client trusts whatever the listener presents and records it, so
	// the test can see which certificate is served.
	var served *x509.Certificate
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // verified by hand below against the certificate written
		VerifyConnection: func(cs tls.ConnectionState) error {
			served = cs.PeerCertificates[0]
			if cs.Version < tls.VersionTLS12 {
				t.Errorf("TLS version %x", cs.Version)
			}
			return nil
		},
	}, DisableKeepAlives: true}}
	base := "https://127.0.0.2:" + strconv.Itoa(port)
	get := func(path, tok string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\nlogs:\n%s", path, err, logs)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := get("/health", "", nil); r.StatusCode != 200 || served.SerialNumber.Int64() != first.SerialNumber.Int64() {
		t.Fatalf("/health over HTTPS: %d, serial %v", r.StatusCode, served.SerialNumber)
	}
	// HTTP/2 is not offered (the WebSocket is an HTTP/1.1 upgrade).
	c, err := tls.Dial("tcp", "127.0.0.2:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("ALPN negotiated %q, want http/1.1", p)
	}
	c.Close()
	// Old protocol versions are refused.
	if c, err := tls.Dial("tcp", "127.0.0.2:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	for _, path := range []string{"/system/status", "/usage", "/audit", "/system/pairing", "/push/public-key"} {
		if r := get(path, "", nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without token over HTTPS = %d, want 401", path, r.StatusCode)
		}
	}
	if r := get("/system/status", token, nil); r.StatusCode != 200 {
		t.Errorf("/system/status with the token = %d", r.StatusCode)
	}
	// The page's own same-origin fetch from a loopback address, which the
	// plain listener would answer, gets no token over HTTPS.
	r := get("/pair", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"})
	var pair map[string]string
	json.NewDecoder(r.Body).Decode(&pair)
	if r.StatusCode != http.StatusForbidden || pair["token"] != "" {
		t.Errorf("/pair over HTTPS = %d %v, want 403 without a token", r.StatusCode, pair)
	}

	// A WebSocket turn over wss://.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(tok string) (*websocket.Conn, error) {
		ws, _, err := websocket.Dial(ctx, "wss://127.0.0.2:"+strconv.Itoa(port)+"/ws", &websocket.DialOptions{
			HTTPClient:   client,
			Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + tok}})
		return ws, err
	}
	if _, err := dial("wrong-token-wrong-token"); err == nil {
		t.Error("a WebSocket with a wrong token was accepted over HTTPS")
	}
	ws, err := dial(token)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := turnOn(t, ctx, ws, send, "phone", false); got != "hello over https" {
		t.Fatalf("turn over HTTPS answered %q", got)
	}

	// The System page's pairing address is the certificate's name.
	var pairing struct{ URL, Link, QRSvg string }
	json.NewDecoder(get("/system/pairing", token, nil).Body).Decode(&pairing)
	if want := "https://steward.test:" + strconv.Itoa(port); pairing.URL != want || !strings.HasPrefix(pairing.Link, want+"/#pair=") || !strings.HasPrefix(pairing.QRSvg, "<svg") {
		t.Errorf("pairing = %+v, want url %s", pairing, want)
	}

	// A renewed certificate is served without a restart.
	second := testCert(t, certPath, keyPath, 2)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	})
	waitFor(t, func() bool {
		get("/health", "", nil)
		return served.SerialNumber.Int64() == second.SerialNumber.Int64()
	})
	// A broken renewal keeps the working certificate.
	os.WriteFile(certPath, []byte("not a certificate"), 0o600)
	waitFor(t, func() bool {
		get("/health", "", nil) // a handshake checks the files
		return strings.Contains(logs.String(), "cannot be loaded; still serving the previous one")
	})
	if get("/health", "", nil); served.SerialNumber.Int64() != second.SerialNumber.Int64() {
		t.Errorf("after a broken renewal the listener serves serial %v", served.SerialNumber)
	}

	// Rotating the token disconnects every client and retires the old token.
	req, _ := http.NewRequest(http.MethodPost, base+"/system/token", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rot struct {
		Token        string
		Disconnected int
	}
	json.NewDecoder(resp.Body).Decode(&rot)
	resp.Body.Close()
	if resp.StatusCode != 200 || rot.Token == "" || rot.Token == token || rot.Disconnected != 1 {
		t.Fatalf("rotate = %d %+v", resp.StatusCode, rot)
	}
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != host.StatusTokenRotated {
		t.Errorf("connected client after rotation: %v, want close %d", err, host.StatusTokenRotated)
	}
	if get("/system/status", token, nil).StatusCode != http.StatusUnauthorized || get("/system/status", rot.Token, nil).StatusCode != 200 {
		t.Error("after rotation the old token still works or the new one does not")
	}
	if b, _ := os.ReadFile(filepath.Join(home, host.TokenFileName)); strings.TrimSpace(string(b)) != rot.Token {
		t.Error("the rotated token was not stored in auth-token")
	}
}

// TestBrokenTLSSettingsStopStart: every broken certificate setting stops
// serve before it listens, naming the variable to fix.
func TestBrokenTLSSettingsStopStart(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testCert(t, certPath, keyPath, 1)
	otherCert, otherKey := filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem")
	testCert(t, otherCert, otherKey, 2)
	unreadable := filepath.Join(dir, "unreadable.pem")
	os.WriteFile(unreadable, []byte("x"), 0o000)
	tests := []struct {
		name       string
		cert, key  string
		wantNames  []string
		skipAsRoot bool
	}{
		{"missing cert file", filepath.Join(dir, "absent.pem"), keyPath, []string{"STEWARD_TLS_CERT"}, false},
		{"missing key file", certPath, filepath.Join(dir, "absent.pem"), []string{"STEWARD_TLS_KEY"}, false},
		{"unreadable key", certPath, unreadable, []string{"STEWARD_TLS_KEY"}, true},
		{"mismatched pair", certPath, otherKey, []string{"STEWARD_TLS_CERT", "STEWARD_TLS_KEY"}, false},
		{"key without cert", "", keyPath, []string{"STEWARD_TLS_CERT"}, false},
		{"cert without key", certPath, "", []string{"STEWARD_TLS_KEY"}, false},
		{"relative path", "cert.pem", keyPath, []string{"STEWARD_TLS_CERT"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skipAsRoot && os.Geteuid() == 0 {
				t.Skip("root reads any file")
			}
			vars := map[string]string{"STEWARD_TLS_PORT": strconv.Itoa(freePort(t)),
				"HOST_PORT": strconv.Itoa(freePort(t)), "GATEWAY_PORT": strconv.Itoa(freePort(t))}
			if tc.cert != "" {
				vars["STEWARD_TLS_CERT"] = tc.cert
			}
			if tc.key != "" {
				vars["STEWARD_TLS_KEY"] = tc.key
			}
			env, _, errb := testEnv(t, vars)
			if code := run(context.Background(), []string{"serve"}, env); code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, errb)
			}
			for _, want := range tc.wantNames {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("error does not name %s:\n%s", want, errb)
				}
			}
			if strings.Contains(errb.String(), "host listening") {
				t.Errorf("serve started despite the broken setting:\n%s", errb)
			}
		})
	}
}
