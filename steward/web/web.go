// Package web is Steward's web app: a thin, installable view over the host's
// WebSocket protocol and HTTP routes (docs/protocol.md), written as plain ES
// modules and CSS that need no build step, embedded in the binary and served
// by Handler at the host's root.
//
// Caching: every static file is served under /assets/<version>/, where the
// version is a hash of all embedded files, with a one-year immutable cache;
// the shell (/), the manifest and the service worker are revalidated on each
// load, so a new binary is picked up at once and an unchanged one costs a 304.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
)

//go:embed all:static
var static embed.FS

// Placeholders in the templated files: the versioned asset prefix, and the
// JSON list of asset files the service worker caches.
const (
	assetToken      = "{{ASSETS}}"
	shellFilesToken = "{{SHELL_FILES}}"
)

// templated files are rewritten with the asset prefix and served at fixed
// paths with revalidation instead of under /assets/.
var templated = map[string]string{
	"/":                     "index.html",
	"/sw.js":                "sw.js",
	"/manifest.webmanifest": "manifest.webmanifest",
}

// contentSecurityPolicy allows only the app's own scripts and styles: no
// inline script, no eval, no foreign connections. The Markdown renderer is
// safe by construction; this is the second wall.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; manifest-src 'self'; worker-src 'self'"

type file struct {
	body  []byte
	gz    []byte // nil when compression does not pay
	ctype string
	etag  string
}

// App serves the embedded web app.
type App struct {
	version string
	prefix  string // /assets/<version>/
	assets  map[string]*file
	pages   map[string]*file
}

// Handler returns the web app's handler, to be mounted at "/" (GET and HEAD).
// It serves /, /sw.js, /manifest.webmanifest and /assets/<version>/…, and
// answers 404 for anything else.
func Handler() http.Handler {
	a, err := New(Files())
	if err != nil {
		panic(fmt.Sprintf("web: embedded app is broken: %v", err)) // a build defect, caught by the package tests
	}
	return a
}

// Files returns the embedded app (its files under static/), for New.
func Files() fs.FS { return static }

// New builds the app from a file system whose root holds static/ as embedded.
func New(fsys fs.FS) (*App, error) {
	root, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, fmt.Errorf("open static files: %w", err)
	}
	raw := map[string][]byte{}
	sum := sha256.New()
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		raw[p] = b
		fmt.Fprintf(sum, "%s\x00%d\x00", p, len(b))
		sum.Write(b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	a := &App{version: hex.EncodeToString(sum.Sum(nil))[:12], assets: map[string]*file{}, pages: map[string]*file{}}
	a.prefix = "/assets/" + a.version + "/"
	isTemplate := map[string]bool{}
	for _, name := range templated {
		isTemplate[name] = true
	}
	var names []string
	for name, b := range raw {
		if !isTemplate[name] {
			a.assets[name] = newFile(name, b)
			names = append(names, name)
		}
	}
	sort.Strings(names)
	shellList, _ := json.Marshal(names)
	for route, name := range templated {
		b, ok := raw[name]
		if !ok {
			return nil, fmt.Errorf("missing %s", name)
		}
		b = bytes.ReplaceAll(b, []byte(assetToken), []byte(strings.TrimSuffix(a.prefix, "/")))
		b = bytes.ReplaceAll(b, []byte(shellFilesToken), shellList)
		a.pages[route] = newFile(name, b)
	}
	return a, nil
}

func newFile(name string, b []byte) *file {
	f := &file{body: b, ctype: mime.TypeByExtension(path.Ext(name))}
	switch path.Ext(name) {
	case ".js":
		f.ctype = "text/javascript; charset=utf-8"
	case ".webmanifest":
		f.ctype = "application/manifest+json"
	case ".svg":
		f.ctype = "image/svg+xml"
	}
	if f.ctype == "" {
		f.ctype = "application/octet-stream"
	}
	h := sha256.Sum256(b)
	f.etag = `"` + hex.EncodeToString(h[:8]) + `"`
	if strings.HasPrefix(f.ctype, "text/") || strings.Contains(f.ctype, "json") || strings.Contains(f.ctype, "svg") {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		if buf.Len() < len(b)*9/10 {
			f.gz = buf.Bytes()
		}
	}
	return f
}

// Version is the hash of the embedded files that names the asset prefix.
func (a *App) Version() string { return a.version }

// ShellFiles returns the path and size of every file the app shell consists
// of (what the service worker caches), for size budgets and docs.
func (a *App) ShellFiles() map[string]int {
	out := map[string]int{}
	for route, f := range a.pages {
		out[route] = len(f.body)
	}
	for name, f := range a.assets {
		out[a.prefix+name] = len(f.body)
	}
	return out
}

// ServeHTTP serves the shell, the manifest, the service worker and the
// versioned assets.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if p == "/index.html" {
		p = "/"
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if f, ok := a.pages[p]; ok {
		// Revalidated on every load (a 304 when unchanged) so that a new
		// binary's shell and service worker are seen at once.
		hd.Set("Cache-Control", "no-cache")
		if p == "/" {
			hd.Set("Content-Security-Policy", contentSecurityPolicy)
			hd.Set("X-Frame-Options", "DENY")
		}
		a.serveFile(w, r, f)
		return
	}
	if rest, ok := strings.CutPrefix(p, a.prefix); ok {
		if f, ok := a.assets[rest]; ok {
			hd.Set("Cache-Control", "public, max-age=31536000, immutable")
			a.serveFile(w, r, f)
			return
		}
	}
	hd.Set("Cache-Control", "no-store")
	http.Error(w, "not found", http.StatusNotFound)
}

func (a *App) serveFile(w http.ResponseWriter, r *http.Request, f *file) {
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	hd.Add("Vary", "Accept-Encoding")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.body
	if f.gz != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
