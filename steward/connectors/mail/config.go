// Package mail holds what the mail connector's packages share: the account
// configuration read from mail.yaml, the mailbox roles, and the embedding
// client that turns text into vectors through the gateway.
//
// The connector itself is split by job: source reads mail stores on disk,
// message parses RFC 5322/MIME, mirror keeps the local SQLite mirror,
// search answers queries over it, and server exposes the MCP tools.
package mail

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentstack/agentstack/yamlstrict"
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
	// SMTP is the submission server that sends this account's mail; without
	// it (and outside Apple Mail on macOS) the account cannot send.
	SMTP *SMTP `yaml:"smtp,omitempty"`
	// From is the sender address of mail sent from this account; the first
	// of Addresses when empty. It must be one of Addresses.
	From string `yaml:"from,omitempty"`
	// Fcc stores a copy of each sent message in the Sent folder of a
	// Maildir account (default on). Turn it off for providers that file
	// submitted mail themselves (Gmail), or the copy appears twice.
	Fcc *bool `yaml:"fcc,omitempty"`
	// SentFolder is the Maildir folder the copy goes to, relative to Root
	// (".Sent" for Maildir++, "Sent" for nested); by default the existing
	// folder whose name says sent, else one of those created.
	SentFolder string `yaml:"sent_folder,omitempty"`
}

// SMTP security modes.
const (
	SMTPStartTLS = "starttls"
	SMTPTLS      = "tls"
	SMTPNone     = "none"
)

// SMTP is one account's submission server. The password is never in the
// file: PasswordEnv names the variable (environment or config.env) that
// holds it.
type SMTP struct {
	Host string `yaml:"host"`
	// Port defaults to 587 (starttls), 465 (tls) or 25 (none).
	Port int `yaml:"port,omitempty"`
	// Security is starttls (default), tls, or none; none is accepted only
	// for a loopback host, because it would send the password in clear.
	Security    string `yaml:"security,omitempty"`
	Username    string `yaml:"username,omitempty"`
	PasswordEnv string `yaml:"password_env,omitempty"`
}

// FccEnabled reports whether sent mail is copied into the Sent folder.
func (a *Account) FccEnabled() bool { return a.Fcc == nil || *a.Fcc }

// Sender returns the account's sending address: From, or the first address.
func (a *Account) Sender() string {
	if a.From != "" {
		return a.From
	}
	if len(a.Addresses) > 0 {
		return a.Addresses[0]
	}
	return ""
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
	if err := yamlstrict.Decode(data, &cfg); err != nil {
		return nil, err
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
		if err := a.validateSending(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
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

func (a *Account) validateSending() error {
	a.From = strings.ToLower(strings.TrimSpace(a.From))
	if a.From != "" && !a.Owns(a.From) {
		return fmt.Errorf("from %q is not one of the account's addresses", a.From)
	}
	if a.SentFolder != "" && (filepath.IsAbs(a.SentFolder) || strings.Contains(a.SentFolder, "..")) {
		return fmt.Errorf("sent_folder %q must be a folder inside root", a.SentFolder)
	}
	if a.SMTP == nil {
		return nil
	}
	s := a.SMTP
	s.Host = strings.TrimSpace(s.Host)
	if s.Host == "" {
		return errors.New("smtp.host is required")
	}
	s.Security = strings.ToLower(strings.TrimSpace(s.Security))
	switch s.Security {
	case "":
		s.Security = SMTPStartTLS
	case SMTPStartTLS, SMTPTLS:
	case SMTPNone:
		if !isLoopback(s.Host) {
			return fmt.Errorf("smtp.security none is only allowed for a loopback host, not %q (the password would travel in clear)", s.Host)
		}
	default:
		return fmt.Errorf("smtp.security %q is not starttls, tls or none", s.Security)
	}
	if s.Port == 0 {
		s.Port = map[string]int{SMTPStartTLS: 587, SMTPTLS: 465, SMTPNone: 25}[s.Security]
	}
	if s.Port < 1 || s.Port > 65535 {
		return fmt.Errorf("smtp.port %d is out of range", s.Port)
	}
	if (s.Username == "") != (s.PasswordEnv == "") {
		return errors.New("smtp.username and smtp.password_env go together (the password is read from that variable)")
	}
	if len(a.Addresses) == 0 {
		return errors.New("an account that sends needs addresses (the first is the sender)")
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
