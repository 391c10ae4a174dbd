package host

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/protocol"
)

// MaxUploadBytes bounds one uploaded file.
const MaxUploadBytes = 50 << 20

// files stores uploads under dir and serves them only by registered token:
// no path ever comes from a request.
type files struct {
	dir   string
	store *chats.Store
}

func (f *files) resolve(ctx context.Context, tokens []string) ([]protocol.File, error) {
	var out []protocol.File
	for _, t := range tokens {
		r, err := f.store.File(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("unknown file token %q: upload the file first", t)
		}
		out = append(out, protocol.File{Token: r.Token, Name: r.Name, Size: r.Size, Type: r.MIME})
	}
	return out, nil
}

func newToken() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// displayName keeps a readable, harmless version of an uploaded file name.
func displayName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '"' || r == '/' || r == '\\' {
			return -1
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		name = "upload"
	}
	if r := []rune(name); len(r) > 200 {
		name = string(r[:200])
	}
	return name
}

// handleUpload stores one multipart file field named "file".
func (h *Host) handleUpload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxUploadBytes+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "send the file as multipart/form-data in a field named \"file\"")
		return
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			writeJSONError(w, http.StatusBadRequest, "no field named \"file\" in the upload")
			return
		}
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, "malformed multipart body")
			return
		}
		if part.FormName() != "file" {
			continue
		}
		h.saveUpload(w, r, part)
		return
	}
}

func (h *Host) saveUpload(w http.ResponseWriter, r *http.Request, part io.Reader) {
	if err := os.MkdirAll(h.files.dir, 0o700); err != nil {
		h.log.Error("cannot create the uploads directory", "dir", h.files.dir, "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the host could not store the file")
		return
	}
	token := newToken()
	path := filepath.Join(h.files.dir, token)
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "the host could not store the file")
		return
	}
	n, err := io.Copy(out, io.LimitReader(part, MaxUploadBytes+1))
	cerr := out.Close()
	if err != nil || cerr != nil || n > MaxUploadBytes {
		os.Remove(path)
		if n > MaxUploadBytes {
			writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("files are limited to %d MiB", MaxUploadBytes>>20))
		} else {
			writeJSONError(w, http.StatusBadRequest, "the upload was interrupted")
		}
		return
	}
	name := "upload"
	if p, ok := part.(interface{ FileName() string }); ok {
		name = displayName(p.FileName())
	}
	typ := mime.TypeByExtension(filepath.Ext(name))
	if typ == "" {
		head := make([]byte, 512)
		if f, err := os.Open(path); err == nil {
			k, _ := io.ReadFull(f, head)
			f.Close()
			typ = http.DetectContentType(head[:k])
		}
	}
	rec := chats.File{Token: token, Name: name, MIME: typ, Size: n, Path: path, CreatedAt: time.Now()}
	if err := h.files.store.RegisterFile(r.Context(), rec); err != nil {
		os.Remove(path)
		writeJSONError(w, http.StatusInternalServerError, "the host could not register the file")
		return
	}
	h.audit(r.Context(), AuditEvent{Actor: "user", Type: "file.upload", Risk: "low", Summary: "uploaded " + name,
		Payload: map[string]any{"name": name, "size": n, "type": typ}})
	writeJSON(w, http.StatusCreated, protocol.File{Token: token, Name: name, Size: n, Type: typ})
}

// handleFile serves a registered upload by its token.
func (h *Host) handleFile(w http.ResponseWriter, r *http.Request) {
	rec, err := h.files.store.File(r.Context(), r.PathValue("token"))
	if err != nil {
		writeJSONError(w, http.StatusNotFound, "no such file")
		return
	}
	f, err := os.Open(rec.Path)
	if err != nil {
		writeJSONError(w, http.StatusGone, "the file is no longer on disk")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", rec.MIME)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": rec.Name}))
	h.audit(r.Context(), AuditEvent{Actor: "user", Type: "file.open", Risk: "low", Summary: "opened " + rec.Name})
	http.ServeContent(w, r, "", rec.CreatedAt, f)
}
