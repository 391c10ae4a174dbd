// Package pathguard is the shared sensitive-path policy: every connector that
// touches a user-supplied path (documents, shell, mail attachments, calendar,
// wiki) asks a Guard before reading or writing it. The guard blocks secrets
// and protected locations — .env files, SSH and GPG keys, cloud credentials,
// keychains, browser profiles, password stores, Steward's own data directory —
// checking the path as given, then again after canonicalising symlinks, so a
// symlink or a ".." cannot reach a blocked place.
package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrBlocked is matched (errors.Is) by every *BlockedError.
var ErrBlocked = errors.New("path blocked by sensitive-path policy")

// BlockedError says why a path was refused. Its message is safe to show to
// the user and the model: it names the path they gave and the rule, never
// file content.
type BlockedError struct {
	Path   string // the path as given
	Reason string // e.g. "SSH keys and configuration (.ssh)"
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("access to %s is blocked: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Options configures a Guard.
type Options struct {
	// Home is the user's home directory; rules for per-user application
	// data (keychains, browser profiles, keyrings) are anchored there.
	Home string
	// DataDir is Steward's own data directory (STEWARD_HOME): its stores,
	// token and config.env are never reachable through a connector.
	DataDir string
	// Extra are more absolute paths to block, with everything below them.
	Extra []string
}

// Guard checks paths against the policy. It is safe for concurrent use.
type Guard struct {
	anchors []anchor // blocked directories (absolute, folded), both as given and canonical
	home    []string // home as given and canonical, folded
}

type anchor struct{ prefix, reason string }

// componentRule blocks any path with a component equal to name (folded), or
// starting with prefix, or ending with suffix.
type componentRule struct {
	name, prefix, suffix string
	reason               string
}

// componentRules apply anywhere in a path: a copied ~/.ssh on a backup disk
// holds the same keys.
var componentRules = []componentRule{
	{prefix: ".env", reason: "environment files (.env*) hold secrets"},
	{name: ".ssh", reason: "SSH keys and configuration (.ssh)"},
	{name: ".gnupg", reason: "GPG keys (.gnupg)"},
	{name: ".aws", reason: "AWS credentials (.aws)"},
	{name: ".azure", reason: "Azure credentials (.azure)"},
	{name: "gcloud", reason: "Google Cloud credentials (gcloud)"},
	{name: ".kube", reason: "Kubernetes credentials (.kube)"},
	{name: ".docker", reason: "Docker registry credentials (.docker)"},
	{name: ".password-store", reason: "password store (.password-store)"},
	{name: ".1password", reason: "1Password data"},
	{name: "keychains", reason: "keychains"},
	{name: "keyrings", reason: "keyrings"},
	{name: ".netrc", reason: "network credentials (.netrc)"},
	{name: "_netrc", reason: "network credentials (_netrc)"},
	{name: ".pgpass", reason: "database passwords (.pgpass)"},
	{name: ".my.cnf", reason: "database passwords (.my.cnf)"},
	{name: ".git-credentials", reason: "Git credentials"},
	{name: ".npmrc", reason: "package registry tokens (.npmrc)"},
	{name: ".pypirc", reason: "package registry tokens (.pypirc)"},
	{name: ".vault-token", reason: "Vault token"},
	{name: ".htpasswd", reason: "password file (.htpasswd)"},
	{name: "credentials", reason: "credential files"},
	{name: "credentials.json", reason: "credential files"},
	{name: "credentials.toml", reason: "credential files"},
	{name: "credentials.tfrc.json", reason: "Terraform credentials"},
	{name: "secring.gpg", reason: "GPG secret keyring"},
	{name: ".bash_history", reason: "shell history may contain secrets"},
	{name: ".zsh_history", reason: "shell history may contain secrets"},
	{name: ".python_history", reason: "shell history may contain secrets"},
	{name: ".psql_history", reason: "shell history may contain secrets"},
	{name: ".mysql_history", reason: "shell history may contain secrets"},
	{prefix: "id_rsa", reason: "SSH private key"},
	{prefix: "id_dsa", reason: "SSH private key"},
	{prefix: "id_ecdsa", reason: "SSH private key"},
	{prefix: "id_ed25519", reason: "SSH private key"},
	{suffix: ".pem", reason: "certificates and private keys (.pem)"},
	{suffix: ".key", reason: "private keys (.key)"},
	{suffix: ".p12", reason: "certificate bundles (.p12)"},
	{suffix: ".pfx", reason: "certificate bundles (.pfx)"},
	{suffix: ".kdbx", reason: "password databases (.kdbx)"},
	{suffix: ".keychain", reason: "keychains"},
	{suffix: ".keychain-db", reason: "keychains"},
	{suffix: ".gpg", reason: "encrypted GPG files"},
	{suffix: ".asc", reason: "GPG keys (.asc)"},
}

// homeRules are blocked below the user's home directory: application data
// holding cookies, saved passwords and private messages.
var homeRules = []struct{ rel, reason string }{
	{".config/gh", "GitHub CLI tokens"},
	{".config/op", "1Password CLI"},
	{".config/google-chrome", "browser profiles"},
	{".config/chromium", "browser profiles"},
	{".config/bravesoftware", "browser profiles"},
	{".config/microsoft-edge", "browser profiles"},
	{".mozilla", "browser profiles"},
	{"snap/firefox", "browser profiles"},
	{".local/share/keyrings", "keyrings"},
	{".cargo/credentials", "Cargo registry token"},
	{".gem/credentials", "RubyGems token"},
	{".terraform.d", "Terraform credentials"},
	{"library/keychains", "keychains"},
	{"library/cookies", "browser cookies"},
	{"library/safari", "browser profiles"},
	{"library/messages", "private messages"},
	{"library/application support/google/chrome", "browser profiles"},
	{"library/application support/firefox", "browser profiles"},
	{"library/application support/bravesoftware", "browser profiles"},
	{"library/application support/microsoft edge", "browser profiles"},
	{"library/application support/arc", "browser profiles"},
	{"library/application support/1password", "1Password data"},
	{"library/group containers", "application group containers (password managers, messages)"},
	{"library/containers/com.apple.safari", "browser profiles"},
}

// systemAnchors are absolute locations that expose secrets or kernel state
// (/proc/self/environ holds the process environment).
var systemAnchors = []anchor{
	{"/proc", "kernel and process state (/proc)"},
	{"/sys", "kernel state (/sys)"},
	{"/dev", "devices (/dev)"},
	{"/etc/shadow", "system password hashes"},
	{"/etc/gshadow", "system password hashes"},
	{"/etc/sudoers", "system privileges"},
	{"/etc/ssl/private", "system private keys"},
	{"/private/etc/master.passwd", "system password hashes"},
	{"/private/etc/sudoers", "system privileges"},
	{"/library/keychains", "system keychains"},
	{"/private/var/db", "system databases"},
	{"/var/db", "system databases"},
}

// New returns a Guard for opts.
func New(opts Options) *Guard {
	g := &Guard{anchors: append([]anchor(nil), systemAnchors...)}
	add := func(p, reason string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		for _, v := range variants(p) {
			g.anchors = append(g.anchors, anchor{fold(v), reason})
		}
	}
	add(opts.DataDir, "Steward's own data directory (stores, token and config)")
	for _, e := range opts.Extra {
		add(e, "blocked by configuration")
	}
	if opts.Home != "" && filepath.IsAbs(opts.Home) {
		for _, h := range variants(opts.Home) {
			g.home = append(g.home, fold(h))
			for _, r := range homeRules {
				g.anchors = append(g.anchors, anchor{fold(filepath.Join(h, filepath.FromSlash(r.rel))), r.reason})
			}
		}
	}
	return g
}

// variants returns p cleaned and, when it exists, its canonical form too, so
// that /var/… and /private/var/… (macOS) are both covered.
func variants(p string) []string {
	p = filepath.Clean(p)
	out := []string{p}
	if c, err := canonical(p); err == nil && c != p {
		out = append(out, c)
	}
	return out
}

// Check validates path for access: it must be absolute, pass the policy as
// given and, after symlinks are resolved, pass it again. It returns the
// canonical path, which the caller must use from then on. A path that does
// not exist yet (a write target) is resolved through its deepest existing
// ancestor. Refusals are *BlockedError; other errors say what failed.
func (g *Guard) Check(path string) (string, error) {
	if path == "" {
		return "", errors.New("path is empty")
	}
	if strings.ContainsRune(path, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q must be absolute", path)
	}
	if err := g.Match(filepath.Clean(path)); err != nil {
		return "", &BlockedError{Path: path, Reason: err.(*BlockedError).Reason}
	}
	c, err := canonical(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if err := g.Match(c); err != nil {
		return "", &BlockedError{Path: path, Reason: err.(*BlockedError).Reason + " (reached through a link)"}
	}
	return c, nil
}

// Match applies the policy to an already clean absolute path without
// touching the file system: for walkers that hold canonical paths. It
// returns a *BlockedError or nil.
func (g *Guard) Match(clean string) error {
	f := fold(clean)
	for _, a := range g.anchors {
		if under(f, a.prefix) {
			return &BlockedError{Path: clean, Reason: a.reason}
		}
	}
	for _, part := range strings.Split(f, string(filepath.Separator)) {
		if part == "" {
			continue
		}
		for _, r := range componentRules {
			if (r.name != "" && part == r.name) ||
				(r.prefix != "" && strings.HasPrefix(part, r.prefix)) ||
				(r.suffix != "" && strings.HasSuffix(part, r.suffix)) {
				return &BlockedError{Path: clean, Reason: r.reason}
			}
		}
	}
	return nil
}

func under(path, prefix string) bool {
	if path == prefix {
		return true
	}
	if prefix == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, prefix) && path[len(prefix)] == filepath.Separator
}

// fold lowercases for comparison: macOS volumes are case-insensitive by
// default, so ~/.SSH is ~/.ssh there.
func fold(s string) string { return strings.ToLower(s) }

// canonical resolves every symlink in p. When p does not exist, its deepest
// existing ancestor is resolved and the remaining components are appended.
func canonical(p string) (string, error) {
	c, err := filepath.EvalSymlinks(p)
	if err == nil {
		return filepath.Abs(c)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	// A missing tail: resolve the parent, then reattach the base name. The
	// base cannot be a link (it does not exist), unless it is a dangling one.
	if _, lerr := os.Lstat(p); lerr == nil {
		return "", fmt.Errorf("%s is a dangling symbolic link", p)
	}
	for _, part := range strings.Split(p, string(filepath.Separator)) {
		if part == ".." {
			// Lexical cleaning would be wrong after a link; a missing
			// target has no physical "..", so refuse instead of guessing.
			return "", fmt.Errorf("%s does not exist and contains \"..\"", p)
		}
	}
	parent, base := filepath.Split(filepath.Clean(p))
	parent = filepath.Clean(parent)
	if parent == p || base == "" {
		return "", err
	}
	cp, err := canonical(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(cp, base), nil
}
