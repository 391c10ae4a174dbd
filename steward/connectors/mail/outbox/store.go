package outbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
)

// Blobs keeps attachment content by SHA-256 (STEWARD_HOME/write-ops/attachments).
type Blobs struct{ Dir string }

// Put stores r's content and returns its SHA-256 and size.
func (b *Blobs) Put(r io.Reader) (sha string, size int64, err error) {
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	tmp, err := os.CreateTemp(b.Dir, ".put-*")
	if err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	sha = hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(tmp.Name(), b.path(sha)); err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	return sha, size, nil
}

func (b *Blobs) path(sha string) string { return filepath.Join(b.Dir, sha) }

// Open opens stored content.
func (b *Blobs) Open(sha string) (io.ReadCloser, error) {
	if len(sha) != 64 || strings.Trim(sha, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("attachment content %q: not a SHA-256", sha)
	}
	f, err := os.Open(b.path(sha))
	if err != nil {
		return nil, fmt.Errorf("attachment content is missing from %s: %w", b.Dir, err)
	}
	return f, nil
}

// SentFolder returns the Maildir folder an account's sent copies go to:
// sent_folder, else an existing folder whose name says sent, else ".Sent"
// (Maildir++ trees) or "Sent".
func SentFolder(a *stewardmail.Account) string {
	if a.SentFolder != "" {
		return filepath.Join(a.Root, a.SentFolder)
	}
	entries, _ := os.ReadDir(a.Root)
	// A root that is itself a Maildir (INBOX) is a Maildir++ tree.
	_, err := os.Stat(filepath.Join(a.Root, "cur"))
	plusPlus := err == nil
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") && len(name) > 1 {
			plusPlus = true
			name = name[1:]
		}
		if a.ClassifyMailbox(name) == stewardmail.RoleSent && !strings.Contains(name, ".") {
			return filepath.Join(a.Root, e.Name())
		}
	}
	if plusPlus || a.Layout == stewardmail.LayoutMaildirPP {
		return filepath.Join(a.Root, ".Sent")
	}
	return filepath.Join(a.Root, "Sent")
}

// FileSent writes raw into the account's Sent Maildir folder as a seen
// message (tmp → cur, atomically) and returns its path.
func FileSent(a *stewardmail.Account, raw []byte, now time.Time) (string, error) {
	dir := SentFolder(a)
	for _, sub := range []string{"tmp", "new", "cur"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return "", fmt.Errorf("file sent copy in %s: %w", dir, err)
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	host, _ := os.Hostname()
	host = strings.NewReplacer("/", "\\057", ":", "\\072").Replace(host)
	name := fmt.Sprintf("%d.M%dP%dR%s.%s", now.Unix(), now.Nanosecond()/1000, os.Getpid(), hex.EncodeToString(rnd[:]), host)
	tmp := filepath.Join(dir, "tmp", name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("file sent copy: %w", err)
	}
	// No fsync: rename makes the copy atomic against a crash of this
	// process, and a copy lost to a power failure only leaves the send
	// unconfirmed (needs_review), never sent twice. An fsync would cost
	// more than the whole submission (docs/benchmarks.md).
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("file sent copy: %w", err)
	}
	final := filepath.Join(dir, "cur", name+":2,S")
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("file sent copy: %w", err)
	}
	return final, nil
}
