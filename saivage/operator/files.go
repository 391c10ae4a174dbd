package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/records"
)

// Limits of the Files read model.
const (
	// MaxTextBytes is the raw size cap of a text preview.
	MaxTextBytes = 1 << 20
	// MaxImageBytes is the size cap of a raster image.
	MaxImageBytes = 8 << 20
	// MaxListing bounds the entries of one directory listing.
	MaxListing = 1000
	// maxControlRatio is the share of control characters above which a
	// valid UTF-8 file is not shown as text.
	maxControlRatio = 0.1
	// recordAlias prefixes a virtual card record path: record:CARD/NAME.
	recordAlias = "record:"
)

// privateNames are file names (or name patterns) that hold credentials.
// The Files view never lists or reads them; this is a defence, not an
// exhaustive detector.
var privateNames = []string{
	".env", ".env.*", "*.env", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".htpasswd",
	"*.pem", "*.key", "*.p12", "*.pfx", "*.keystore", "*.jks", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
	"credentials", "credentials.*", "secrets.*", "auth-token", "*.kdbx",
}

// privateDirs are top-level (or any-level, for .git) directories the view
// never enters: Saivage's own state and Git's internals (remotes may carry
// credentials).
var privateDirs = []string{".saivage", ".git", ".ssh", ".gnupg", ".aws"}

// errPrivate is the refusal of a private path.
func errPrivate(p, why string) error {
	return &apiError{http.StatusForbidden, "PrivatePath", fmt.Sprintf("%s is not shown: %s", p, why)}
}

// privacy classifies a project-relative slash path: "" when admitted,
// else why it is private.
func privacy(rel string) string {
	if rel == "." || rel == "" {
		return ""
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		if slices.Contains(privateDirs, p) {
			return p + " holds private state"
		}
	}
	base := parts[len(parts)-1]
	if slices.Contains(privateDirs, base) {
		return base + " holds private state"
	}
	for _, pat := range privateNames {
		if ok, _ := path.Match(pat, strings.ToLower(base)); ok {
			return "the name marks a credential file"
		}
	}
	return ""
}

// admitPath admits a Files path of the server's project.
func (s *Server) admitPath(raw string) (abs, rel string, err error) {
	return admitPath(s.rt.Project().Root, raw)
}

// admitPath admits a Files path before any stat or read: it must be a
// relative, clean path inside root, private neither lexically nor after
// symlink resolution. It returns the absolute path.
func admitPath(root, raw string) (abs, rel string, err error) {
	if raw == "" || raw == "." || raw == "/" {
		return root, ".", nil
	}
	if strings.ContainsRune(raw, 0) || strings.Contains(raw, "\\") {
		return "", "", badRequest("InvalidPath", "path must be a project-relative slash path")
	}
	if strings.HasPrefix(raw, "/") || path.Clean(raw) != raw || raw == ".." || strings.HasPrefix(raw, "../") {
		return "", "", badRequest("InvalidPath", fmt.Sprintf("%q is not a clean project-relative path (no leading /, no .., no //)", raw))
	}
	if why := privacy(raw); why != "" {
		return "", "", errPrivate(raw, why)
	}
	abs = filepath.Join(root, filepath.FromSlash(raw))
	// Resolved privacy: a symlink must not lead outside the project or
	// into a private place. Only an exact "does not exist" is absence; any
	// other failure to classify refuses.
	real, err := filepath.EvalSymlinks(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", notFound("no file " + raw)
	case err != nil:
		return "", "", errPrivate(raw, "its location could not be classified")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", "", err
	}
	rr, err := filepath.Rel(realRoot, real)
	if err != nil || rr == ".." || strings.HasPrefix(rr, "../") {
		return "", "", errPrivate(raw, "it resolves outside the project")
	}
	if why := privacy(filepath.ToSlash(rr)); why != "" {
		return "", "", errPrivate(raw, "it resolves to a private path ("+why+")")
	}
	return abs, raw, nil
}

type fileEntry struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Kind     string    `json:"kind"` // file | dir | symlink | other
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

func (s *Server) getFiles(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("path")
	if strings.HasPrefix(raw, recordAlias) {
		return s.listRecordAlias(w, r, raw)
	}
	abs, rel, err := s.admitPath(raw)
	if err != nil {
		return err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return notFound("no directory " + rel)
	}
	if !st.IsDir() {
		return badRequest("InvalidPath", rel+" is a file; read it with /api/files/content")
	}
	des, err := os.ReadDir(abs)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	out := []fileEntry{}
	hidden, truncated := 0, false
	for _, de := range des {
		p := de.Name()
		if rel != "." {
			p = rel + "/" + de.Name()
		}
		if privacy(p) != "" {
			hidden++
			continue
		}
		if len(out) == MaxListing {
			truncated = true
			break
		}
		e := fileEntry{Name: de.Name(), Path: p, Kind: "other"}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			e.Kind = "symlink"
		case de.IsDir():
			e.Kind = "dir"
		case de.Type().IsRegular():
			e.Kind = "file"
		}
		if info, err := de.Info(); err == nil {
			e.Size, e.Modified = info.Size(), info.ModTime().UTC()
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b fileEntry) int {
		if (a.Kind == "dir") != (b.Kind == "dir") {
			if a.Kind == "dir" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return s.writeRedacted(w, http.StatusOK, map[string]any{"path": rel, "entries": out, "hidden": hidden, "truncated": truncated,
		"listed_at": time.Now().UTC()})
}

// recordAliasRef resolves record:CARD or record:CARD/NAME to a card and an
// optional record. A card alias never falls through to the filesystem.
func (s *Server) recordAliasRef(ctx context.Context, raw string) (cards.Card, string, error) {
	rest := strings.TrimPrefix(raw, recordAlias)
	id, name, _ := strings.Cut(rest, "/")
	if !cards.ValidID(id) {
		return cards.Card{}, "", badRequest("InvalidCardId", fmt.Sprintf("%q is not a card id", id))
	}
	c, err := s.rt.Project().Cards.Get(ctx, id)
	if errors.Is(err, cards.ErrNotFound) {
		return c, "", notFound("no card " + id)
	}
	if err != nil {
		return c, "", err
	}
	if name == "" {
		return c, "", nil
	}
	tbl, _ := s.rt.Project().Workflows.Table(c.Type)
	if _, ok := tbl.Record(name); !ok || c.Tombstoned() {
		return c, "", notFound(fmt.Sprintf("card %s has no record %q", id, name))
	}
	return c, name, nil
}

func (s *Server) listRecordAlias(w http.ResponseWriter, r *http.Request, raw string) error {
	c, name, err := s.recordAliasRef(r.Context(), raw)
	if err != nil {
		return err
	}
	if name != "" {
		return badRequest("InvalidPath", raw+" is a record; read it with /api/files/content")
	}
	out := []fileEntry{}
	tbl, _ := s.rt.Project().Workflows.Table(c.Type)
	if !c.Tombstoned() {
		for _, spec := range tbl.Records() {
			out = append(out, fileEntry{Name: spec.Name, Path: recordAlias + c.ID + "/" + spec.Name, Kind: "record", Modified: c.UpdatedAt})
		}
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"path": raw, "entries": out, "hidden": 0, "truncated": false, "listed_at": time.Now().UTC()})
}

// textView is an admitted text file, redacted, with its BOM and line
// endings kept as they are.
type textView struct {
	Path     string `json:"path"`
	Bytes    int    `json:"bytes"`
	BOM      bool   `json:"bom"`
	CRLF     bool   `json:"crlf"`
	Redacted bool   `json:"redacted"`
	Text     string `json:"text"`
}

// projectText is the one confidential-text owner of Files and Executions:
// a raw size cap, then the whole buffer checked (valid UTF-8, no NUL, few
// control characters) before one decode and one redaction.
func (s *Server) projectText(display string, f io.Reader, size int64) (textView, error) {
	if size > MaxTextBytes {
		return textView{}, &apiError{http.StatusRequestEntityTooLarge, "TooLarge", fmt.Sprintf("%s is %d bytes; previews stop at %d", display, size, MaxTextBytes)}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxTextBytes+1))
	if err != nil {
		return textView{}, fmt.Errorf("read %s: %w", display, err)
	}
	if len(b) > MaxTextBytes {
		return textView{}, &apiError{http.StatusRequestEntityTooLarge, "TooLarge", fmt.Sprintf("%s grew past %d bytes", display, MaxTextBytes)}
	}
	if why := notText(b); why != "" {
		return textView{}, &apiError{http.StatusUnsupportedMediaType, "NotText", display + " is not shown as text: " + why}
	}
	text := string(b)
	red := s.rt.Redact(text)
	return textView{Path: display, Bytes: len(b), BOM: strings.HasPrefix(text, "\uFEFF"), CRLF: strings.Contains(text, "\r\n"),
		Redacted: red != text, Text: red}, nil
}

// notText explains why b is not text ("" when it is).
func notText(b []byte) string {
	if !utf8.Valid(b) {
		return "it is not valid UTF-8"
	}
	control, total := 0, 0
	for _, r := range string(b) {
		total++
		switch {
		case r == 0:
			return "it contains NUL bytes"
		case r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\uFEFF':
		case r < 0x20 || r == 0x7f:
			control++
		}
	}
	if total > 0 && float64(control)/float64(total) > maxControlRatio {
		return "too many control characters"
	}
	return ""
}

func (s *Server) getFileContent(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("path")
	if raw == "" {
		return badRequest("InvalidPath", "path is required")
	}
	if strings.HasPrefix(raw, recordAlias) {
		c, name, err := s.recordAliasRef(r.Context(), raw)
		if err != nil {
			return err
		}
		if name == "" {
			return badRequest("InvalidPath", raw+" is a card; list it with /api/files")
		}
		cur, err := s.rt.Project().Cards.Records().Current(records.Ref{CardDir: s.rt.Project().Cards.CardDir(c.ID), Card: c.ID, Name: name})
		if err != nil {
			return err
		}
		tv, err := s.projectText(raw, strings.NewReader(cur.Content), int64(len(cur.Content)))
		if err != nil {
			return err
		}
		return s.writeRedacted(w, http.StatusOK, tv)
	}
	f, st, rel, err := s.openAdmitted(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	tv, err := s.projectText(rel, f, st.Size())
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, tv)
}

// openAdmitted admits a Files path and opens it as a regular file.
func (s *Server) openAdmitted(raw string) (*os.File, os.FileInfo, string, error) {
	abs, rel, err := s.admitPath(raw)
	if err != nil {
		return nil, nil, "", err
	}
	f, st, err := openRegular(abs, rel)
	return f, st, rel, err
}

// openRegular opens an admitted regular file.
func openRegular(abs, display string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, notFound("no file " + display)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", display, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", display, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, badRequest("InvalidPath", display+" is not a regular file")
	}
	return f, st, nil
}

// rasterTypes are the image types served as bytes (no SVG: it is a
// document that can carry script).
var rasterTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

func (s *Server) getFileImage(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("path")
	if raw == "" {
		return badRequest("InvalidPath", "path is required")
	}
	if strings.HasPrefix(raw, recordAlias) {
		return &apiError{http.StatusUnsupportedMediaType, "NotImage", "records are text"}
	}
	f, st, rel, err := s.openAdmitted(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	if st.Size() > MaxImageBytes {
		return &apiError{http.StatusRequestEntityTooLarge, "TooLarge", fmt.Sprintf("%s is %d bytes; images stop at %d", rel, st.Size(), MaxImageBytes)}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxImageBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	ct := http.DetectContentType(b)
	if !slices.Contains(rasterTypes, ct) {
		return &apiError{http.StatusUnsupportedMediaType, "NotImage", fmt.Sprintf("%s is %s, not a raster image (PNG, JPEG, GIF, WebP)", rel, ct)}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}
