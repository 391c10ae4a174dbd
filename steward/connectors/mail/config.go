// Package mail holds what the mail connector's packages share: the account
// configuration read from mail.yaml, the mailbox roles, and the embedding
// client that turns text into vectors through the gateway.
//
// The connector itself is split by job: source reads mail stores on disk,
// message parses RFC 5322/MIME, mirror keeps the local SQLite mirror,
// search answers queries over it, and server exposes the MCP tools.
package mail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Account kinds.
const (
	KindMaildir   = "maildir"
	KindAppleMail = "applemail"
)

// Maildir layouts. LayoutAuto recognises both in one tree.
const (
	LayoutAuto      = "auto"
	LayoutMaildirPP = "maildir++"
	LayoutNested    = "nested"
)

// Account is one configured mail store.
type Account struct {
	// Name is shown to the user and the agent, and selects the account in searches.
	Name string `yaml:"name"`
	// Kind is maildir or applemail.
	Kind string `yaml:"kind"`
	// Root is a Maildir tree (Maildir++ or nested) or an Apple Mail V* folder
	// (or one account folder inside it).
	Root string `yaml:"root"`
	// Addresses are the user's own addresses in this account; they identify
	// sent mail and are not used as the shared participant when threads are
	// matched by subject.
	Addresses []string `yaml:"addresses"`
	// Layout forces a Maildir layout (auto, maildir++ or nested); auto by default.
	Layout string `yaml:"layout,omitempty"`
	// Roles maps mailbox names to roles where names alone do not tell, e.g.
	// {"Archivio 2024": archive}. Keys compare case-insensitively.
	Roles map[string]string `yaml:"roles,omitempty"`
}

// Config is the content of mail.yaml.
type Config struct {
	Accounts []Account `yaml:"accounts"`
	// Source is the file the configuration came from, or a note saying it was discovered.
	Source string `yaml:"-"`
}

// ErrNoConfig reports that there is no mail.yaml and nothing to discover.
var ErrNoConfig = errors.New("no mail accounts configured")

// LoadConfig reads and validates a mail.yaml file. Unknown keys are errors so
// that a misspelt setting is reported rather than ignored.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read mail config %s: %w", path, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("mail config %s: %w", path, err)
	}
	cfg.Source = path
	return cfg, nil
}

// ParseConfig parses and validates mail.yaml content.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate checks every account and normalises kinds, layouts and roles.
func (c *Config) Validate() error {
	if len(c.Accounts) == 0 {
		return fmt.Errorf("%w: add at least one entry under accounts", ErrNoConfig)
	}
	seen := map[string]bool{}
	for i := range c.Accounts {
		a := &c.Accounts[i]
		a.Name = strings.TrimSpace(a.Name)
		where := fmt.Sprintf("accounts[%d]", i)
		if a.Name != "" {
			where += " (" + a.Name + ")"
		}
		if a.Name == "" {
			return fmt.Errorf("%s: name is required", where)
		}
		if seen[strings.ToLower(a.Name)] {
			return fmt.Errorf("%s: duplicate account name", where)
		}
		seen[strings.ToLower(a.Name)] = true
		a.Kind = strings.ToLower(strings.TrimSpace(a.Kind))
		switch a.Kind {
		case KindMaildir, KindAppleMail:
		case "":
			return fmt.Errorf("%s: kind is required (maildir or applemail)", where)
		default:
			return fmt.Errorf("%s: kind %q is not maildir or applemail", where, a.Kind)
		}
		if a.Root == "" {
			return fmt.Errorf("%s: root is required", where)
		}
		root, err := expandHome(a.Root)
		if err != nil {
			return fmt.Errorf("%s: root: %w", where, err)
		}
		if !filepath.IsAbs(root) {
			return fmt.Errorf("%s: root %q must be an absolute path", where, a.Root)
		}
		a.Root = filepath.Clean(root)
		a.Layout = strings.ToLower(strings.TrimSpace(a.Layout))
		switch a.Layout {
		case "":
			a.Layout = LayoutAuto
		case LayoutAuto, LayoutMaildirPP, LayoutNested:
		default:
			return fmt.Errorf("%s: layout %q is not auto, maildir++ or nested", where, a.Layout)
		}
		for j, addr := range a.Addresses {
			a.Addresses[j] = strings.ToLower(strings.TrimSpace(addr))
			if !strings.Contains(a.Addresses[j], "@") {
				return fmt.Errorf("%s: address %q is not an email address", where, addr)
			}
		}
		roles := map[string]string{}
		for name, role := range a.Roles {
			r := Role(strings.ToLower(strings.TrimSpace(role)))
			if !r.Valid() {
				return fmt.Errorf("%s: roles[%q]: %q is not one of %s", where, name, role, strings.Join(RoleNames(), ", "))
			}
			roles[strings.ToLower(strings.TrimSpace(name))] = string(r)
		}
		a.Roles = roles
	}
	return nil
}

func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, p[1:]), nil
	}
	return p, nil
}

// Owns reports whether addr is one of the account's own addresses.
func (a *Account) Owns(addr string) bool {
	addr = strings.ToLower(strings.TrimSpace(addr))
	for _, o := range a.Addresses {
		if o == addr {
			return true
		}
	}
	return false
}

// DiscoverAppleMail builds a configuration from the newest V* folder under
// mailDir (normally ~/Library/Mail), one account per account folder. It is
// used on macOS when mail.yaml is absent.
func DiscoverAppleMail(mailDir string) (*Config, error) {
	entries, err := os.ReadDir(mailDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist", ErrNoConfig, mailDir)
		}
		return nil, fmt.Errorf("discover Apple Mail in %s: %w", mailDir, err)
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) > 1 && e.Name()[0] == 'V' && isDigits(e.Name()[1:]) {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%w: no V* folder in %s", ErrNoConfig, mailDir)
	}
	sort.Slice(versions, func(i, j int) bool {
		return len(versions[i]) < len(versions[j]) || len(versions[i]) == len(versions[j]) && versions[i] < versions[j]
	})
	vdir := filepath.Join(mailDir, versions[len(versions)-1])
	accts, err := os.ReadDir(vdir)
	if err != nil {
		return nil, fmt.Errorf("discover Apple Mail in %s: %w", vdir, err)
	}
	cfg := &Config{Source: "discovered in " + vdir}
	for _, e := range accts {
		if !e.IsDir() || e.Name() == "MailData" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		cfg.Accounts = append(cfg.Accounts, Account{Name: e.Name(), Kind: KindAppleMail, Root: filepath.Join(vdir, e.Name())})
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
