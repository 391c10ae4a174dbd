package host

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertOptions names the certificate pair of the HTTPS listener.
type CertOptions struct {
	// CertFile and KeyFile are PEM files (for example a Tailscale
	// certificate, renewed in place).
	CertFile, KeyFile string
	// CertName and KeyName are the settings the files came from, named in
	// every error so the user knows what to fix.
	CertName, KeyName string
	Logger            *slog.Logger
}

// CertReloader serves the HTTPS listener's certificate and reloads it when
// either file changes on disk, so a renewed certificate is picked up without
// a restart. A renewal that cannot be loaded (half-written, mismatched)
// keeps the previous certificate and is logged.
type CertReloader struct {
	opts CertOptions
	log  *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	certStamp fileStamp
	keyStamp  fileStamp
	lastCheck time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: info.ModTime(), size: info.Size()}, nil
}

// certCheckInterval bounds how often a handshake stats the files.
const certCheckInterval = time.Second

// NewCertReloader loads the pair; a missing, unreadable or mismatched pair
// is an error naming the setting at fault.
func NewCertReloader(opts CertOptions) (*CertReloader, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &CertReloader{opts: opts, log: opts.Logger}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *CertReloader) load() error {
	o := c.opts
	cs, err := stampOf(o.CertFile)
	if err != nil {
		return fmt.Errorf("%s: %w", o.CertName, err)
	}
	ks, err := stampOf(o.KeyFile)
	if err != nil {
		return fmt.Errorf("%s: %w", o.KeyName, err)
	}
	certPEM, err := os.ReadFile(o.CertFile)
	if err != nil {
		return fmt.Errorf("%s: %w", o.CertName, err)
	}
	keyPEM, err := os.ReadFile(o.KeyFile)
	if err != nil {
		return fmt.Errorf("%s: %w", o.KeyName, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s (%s) and %s (%s) are not a usable certificate and key pair: %w", o.CertName, o.CertFile, o.KeyName, o.KeyFile, err)
	}
	if pair.Leaf != nil && time.Now().After(pair.Leaf.NotAfter) {
		c.log.Warn("the HTTPS certificate has expired; renew it (browsers will refuse it)", "setting", o.CertName, "path", o.CertFile, "notAfter", pair.Leaf.NotAfter)
	}
	c.mu.Lock()
	c.cert, c.certStamp, c.keyStamp = &pair, cs, ks
	c.mu.Unlock()
	return nil
}

// GetCertificate is tls.Config.GetCertificate: it returns the current
// certificate, reloading it first when a file changed since the last load.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	changed := false
	if now := time.Now(); now.Sub(c.lastCheck) >= certCheckInterval {
		c.lastCheck = now
		cs, err1 := stampOf(c.opts.CertFile)
		ks, err2 := stampOf(c.opts.KeyFile)
		changed = err1 == nil && err2 == nil && (cs != c.certStamp || ks != c.keyStamp)
	}
	c.mu.Unlock()
	if changed {
		if err := c.load(); err != nil {
			c.log.Error("the HTTPS certificate changed on disk but cannot be loaded; still serving the previous one", "err", err)
		} else {
			c.log.Info("reloaded the HTTPS certificate", "path", c.opts.CertFile)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, nil
}

// Leaf returns the current certificate's parsed leaf (its names make the
// pairing URL).
func (c *CertReloader) Leaf() *x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert.Leaf
}

// TLSConfig is the HTTPS listener's configuration: TLS 1.2 or later, with
// only forward-secret AEAD suites for 1.2 (1.3's are all modern). It offers
// HTTP/1.1 only: the WebSocket is an HTTP/1.1 upgrade, and a browser on
// HTTP/2 could otherwise try WebSocket over HTTP/2 (RFC 8441).
func (c *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: c.GetCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}
