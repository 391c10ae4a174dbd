package operator

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// The cockpit is the operator's browser view: plain ES modules and CSS
// (no build step), embedded and served at /. It talks to the API with the
// bearer token in a header and to /api/live with a one-time ticket.
//
//go:embed cockpit
var cockpitFS embed.FS

// cockpitCSP allows only the cockpit's own scripts, styles and
// connections; rendering builds DOM nodes, never HTML strings.
const cockpitCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// cockpit serves the shell at /, /contracts.js (the contract registry) and
// the static files under /assets/; anything else is 404.
type cockpit struct{ files map[string]*asset }

func newCockpit() http.Handler {
	c := &cockpit{files: map[string]*asset{}}
	add := func(name string, body []byte) {
		ct := mime.TypeByExtension(path.Ext(name))
		switch {
		case name == "/":
			ct = "text/html; charset=utf-8"
		case strings.HasSuffix(name, ".js"):
			ct = "text/javascript; charset=utf-8"
		}
		sum := sha256.Sum256(body)
		a := &asset{body: body, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if buf.Len() < len(body)*9/10 {
			a.gz = buf.Bytes()
		}
		c.files[name] = a
	}
	err := fs.WalkDir(cockpitFS, "cockpit", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := cockpitFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "cockpit/")
		if name == "index.html" {
			add("/", b)
		} else {
			add("/assets/"+name, b)
		}
		return nil
	})
	if err != nil {
		panic("operator: the embedded cockpit is unreadable: " + err.Error()) // a build defect
	}
	add("/contracts.js", contractsJS())
	return c
}

func (c *cockpit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, ok := c.files[r.URL.Path]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		writeError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.URL.Path == "/" {
		h.Set("Content-Security-Policy", cockpitCSP)
		h.Set("X-Frame-Options", "DENY")
	}
	h.Add("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}
