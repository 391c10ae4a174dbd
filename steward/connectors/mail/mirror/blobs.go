package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// Blobs is a content-addressed store of attachment bytes: each blob lives at
// <dir>/<first two hex digits>/<sha256>. Names come only from the hash, so a
// hostile attachment filename never reaches the file system, and duplicate
// content is stored once.
type Blobs struct {
	dir string
	// MaxBytes caps one blob; larger content is hashed but not kept. Zero means 1 GiB.
	MaxBytes int64
}

// NewBlobs returns the store rooted at dir, creating it with mode 0700.
func NewBlobs(dir string) (*Blobs, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("create blob store %s: %w", dir, err)
	}
	return &Blobs{dir: dir}, nil
}

// ErrTooLarge reports content over the blob size cap; Put still returns its hash and size.
var ErrTooLarge = errors.New("attachment larger than the blob size cap; not stored")

var shaRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// Path returns the file holding the blob sha, or an error for a malformed key.
func (b *Blobs) Path(sha string) (string, error) {
	if !shaRe().MatchString(sha) {
		return "", fmt.Errorf("blob key %q is not a SHA-256 hex digest", sha)
	}
	return filepath.Join(b.dir, sha[:2], sha), nil
}

// Has reports whether the blob is stored.
func (b *Blobs) Has(sha string) bool {
	p, err := b.Path(sha)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// Put streams r into the store and returns its SHA-256 and size. The content
// is written to a temporary file and renamed into place, so a killed
// process never leaves a partial blob under its final name.
func (b *Blobs) Put(r io.Reader) (sha string, size int64, err error) {
	limit := b.MaxBytes
	if limit <= 0 {
		limit = 1 << 30
	}
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "put-*")
	if err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(h, tmp), io.LimitReader(r, limit))
	if err != nil {
		return "", n, fmt.Errorf("store attachment: %w", err)
	}
	if n == limit {
		// Hash the remainder without storing it.
		more, err := io.Copy(h, r)
		if err != nil {
			return "", n + more, fmt.Errorf("store attachment: %w", err)
		}
		if more > 0 {
			return hex.EncodeToString(h.Sum(nil)), n + more, ErrTooLarge
		}
	}
	sha = hex.EncodeToString(h.Sum(nil))
	final, _ := b.Path(sha)
	if _, err := os.Stat(final); err == nil {
		return sha, n, nil // same content already stored
	}
	// No fsync: like the database (WAL, synchronous=NORMAL) the blob store
	// survives a killed process; a power cut may lose the latest writes,
	// which the next reconcile re-ingests from the mail store.
	if err := tmp.Close(); err != nil {
		return "", n, fmt.Errorf("store attachment: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return "", n, fmt.Errorf("store attachment: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", n, fmt.Errorf("store attachment: %w", err)
	}
	tmp = nil
	return sha, n, nil
}

// Open opens the blob sha for reading.
func (b *Blobs) Open(sha string) (*os.File, error) {
	p, err := b.Path(sha)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Sweep removes temporary files older than an hour (left by a killed
// process) and blobs for which keep returns false. It returns how many
// blobs were removed.
func (b *Blobs) Sweep(keep func(sha string) bool) (int, error) {
	cutoff := time.Now().Add(-time.Hour)
	removed := 0
	err := filepath.WalkDir(b.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Base(filepath.Dir(path)) == "tmp" {
			if info, err := d.Info(); err == nil && info.ModTime().Before(cutoff) {
				os.Remove(path)
			}
			return nil
		}
		if shaRe().MatchString(d.Name()) && !keep(d.Name()) {
			if os.Remove(path) == nil {
				removed++
			}
		}
		return nil
	})
	return removed, err
}
