package host

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFileName is the host token's file inside STEWARD_HOME.
const TokenFileName = "auth-token"

// LoadOrCreateToken returns override when set; otherwise the token stored at
// path, creating it (random, mode 0600) on first start.
func LoadOrCreateToken(path, override string) (string, error) {
	if t := strings.TrimSpace(override); t != "" {
		if len(t) < 16 {
			return "", errors.New("STEWARD_AUTH_TOKEN is too short: use at least 16 characters")
		}
		return t, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		t := strings.TrimSpace(string(b))
		if len(t) < 16 {
			return "", fmt.Errorf("auth token file %s is empty or too short: delete it to generate a new one", path)
		}
		if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("restrict auth token file %s to its owner: %w", path, err)
			}
		}
		return t, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read auth token %s: %w", path, err)
	}
	t, err := newHostToken()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateToken(path, "") // another process created it first
	}
	if err != nil {
		return "", fmt.Errorf("create auth token %s: %w", path, err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("write auth token %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("sync auth token %s: %w", path, err)
	}
	return t, f.Close()
}

// newHostToken returns 32 random bytes, base64url.
func newHostToken() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate auth token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// writeTokenFile replaces path with t atomically (mode 0600).
func writeTokenFile(path, t string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".auth-token-*")
	if err != nil {
		return fmt.Errorf("write auth token %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(t + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write auth token %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync auth token %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace auth token %s: %w", path, err)
	}
	return nil
}
