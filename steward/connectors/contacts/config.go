package contacts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// Config is the content of contacts.yaml.
//
//	embed: gateway          # gateway (default), off, or an OpenAI-compatible base URL
//	sources:
//	  - name: me
//	    kind: apple          # an AddressBook folder or one .abcddb file
//	    path: ~/Library/Application Support/AddressBook
//	  - name: carddav
//	    kind: vcard          # a .vcf file or a vdir folder
//	    path: /home/me/.contacts
type Config struct {
	Embed   string         `yaml:"embed"`
	Sources []SourceConfig `yaml:"sources"`
}

// SourceConfig is one contacts source.
type SourceConfig struct {
	Name string `yaml:"name"`
	// Kind is "apple" (AddressBook-v22.abcddb, a file or the AddressBook
	// folder with its Sources/*/ stores) or "vcard" (.vcf file or folder).
	Kind string `yaml:"kind"`
	Path string `yaml:"path"`
}

// Source kinds.
const (
	KindApple = "apple"
	KindVCard = "vcard"
)

// LoadConfig reads contacts.yaml at path; when it does not exist it returns
// the discovered AddressBook folder on macOS or an error saying how to
// create the file. home replaces the user's home directory; goos replaces
// runtime.GOOS.
func LoadConfig(path, home, goos string) (*Config, error) {
	data, err := readBounded(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		if goos == "darwin" && home != "" {
			dir := filepath.Join(home, "Library", "Application Support", "AddressBook")
			if _, err := os.Stat(dir); err == nil || errors.Is(err, fs.ErrPermission) {
				return &Config{Sources: []SourceConfig{{Name: "apple", Kind: KindApple, Path: dir}}}, nil
			}
		}
		return nil, fmt.Errorf("no contacts sources: %s does not exist; create it with, for example:\n"+
			"sources:\n  - name: me\n    kind: vcard\n    path: /path/to/contacts-folder-or-file.vcf", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read contacts config: %w", err)
	}
	c, err := ParseConfig(data, home)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates contacts.yaml content; unknown keys are errors.
func ParseConfig(data []byte, home string) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse contacts config: %w", err)
	}
	switch e := c.Embed; {
	case e == "" || e == "gateway" || e == "off":
	default:
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("embed: %q must be gateway, off or an http(s) URL", e)
		}
	}
	if len(c.Sources) == 0 {
		return nil, errors.New("sources: at least one source is needed")
	}
	names := map[string]bool{}
	for i := range c.Sources {
		s := &c.Sources[i]
		s.Name = strings.TrimSpace(s.Name)
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("sources[%d]: name is required", i)
		case names[s.Name]:
			return nil, fmt.Errorf("sources[%d]: duplicate name %q", i, s.Name)
		case s.Kind != KindApple && s.Kind != KindVCard:
			return nil, fmt.Errorf("sources[%d] (%s): kind must be apple or vcard, not %q", i, s.Name, s.Kind)
		}
		names[s.Name] = true
		p, err := expandHome(s.Path, home)
		if err != nil {
			return nil, fmt.Errorf("sources[%d] (%s): %w", i, s.Name, err)
		}
		s.Path = p
	}
	return &c, nil
}

func expandHome(p, home string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", errors.New("path is required")
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", fmt.Errorf("path %q starts with ~ but the home directory is unknown", p)
		}
		p = filepath.Join(home, strings.TrimPrefix(p[1:], "/"))
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q must be absolute (or start with ~/)", p)
	}
	return filepath.Clean(p), nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// sourceError makes a whole-source failure actionable: permission problems
// name Full Disk Access, a lock says to retry, a missing path says to check
// the configuration.
func sourceError(what, path string, err error) error {
	var errno syscall.Errno
	msg := err.Error()
	switch {
	case errors.Is(err, fs.ErrPermission) || errors.As(err, &errno) && (errno == syscall.EPERM || errno == syscall.EACCES) ||
		strings.Contains(msg, "authorization denied"):
		return fmt.Errorf("%s %s: %w: grant Full Disk Access to the program running Steward (System Settings → Privacy & Security → Full Disk Access), or fix the file permissions; no contacts were read from this source (%v)",
			what, path, ErrPermission, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w: check the path in the configuration (%v)", what, path, ErrMissing, err)
	case strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY"):
		return fmt.Errorf("%s %s: %w by another process (the Contacts app may be writing); try again shortly (%v)", what, path, ErrLocked, err)
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}
