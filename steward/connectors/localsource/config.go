// Package localsource holds what Steward's connectors that index the user's
// local stores (Apple databases, iCalendar and vCard files or vdir folders)
// share: the YAML file listing the sources (NAME.yaml in STEWARD_HOME),
// bounded file reads, access errors worded as advice (Full Disk Access, a
// held lock, a wrong path), and reading every source with failures kept
// apart, so that an unreadable source keeps its indexed data instead of
// looking empty.
package localsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxConfigBytes bounds a connector's configuration file; a real one is a
// few hundred bytes.
const MaxConfigBytes = 1 << 20

// LoadOptions describe one connector's configuration file.
type LoadOptions[C any] struct {
	// What names the connector in messages ("calendar").
	What string
	// Example is a YAML configuration shown when the file is missing and
	// nothing was discovered.
	Example string
	// Parse parses and validates the file's content.
	Parse func(data []byte) (*C, error)
	// Discover returns the configuration to use when the file does not
	// exist (the platform's default store), or nil; it may be nil itself.
	Discover func() *C
}

// ErrNotConfigured reports that a connector has no configuration file and
// nothing was discovered: its jobs have nothing to do yet.
var ErrNotConfigured = errors.New("not configured")

// Load reads the configuration file at path (at most MaxConfigBytes). When
// the file does not exist it returns o.Discover's configuration or an error
// that shows how to create the file.
func Load[C any](path string, o LoadOptions[C]) (*C, error) {
	data, err := ReadBounded(path, MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if o.Discover != nil {
			if c := o.Discover(); c != nil {
				return c, nil
			}
		}
		return nil, fmt.Errorf("%w: no %s sources: %s does not exist; create it with, for example:\n%s", ErrNotConfigured, o.What, path, o.Example)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s config: %w", o.What, err)
	}
	c, err := o.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// CheckEmbed validates an "embed" setting: empty or "gateway" (the
// gateway's local-embed model), "off", or an OpenAI-compatible http(s) base
// URL.
func CheckEmbed(setting string) error {
	switch setting {
	case "", "gateway", "off":
		return nil
	}
	u, err := url.Parse(setting)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("embed: %q must be gateway, off or an http(s) URL", setting)
	}
	return nil
}

// Fields points at the fields every source entry has, so that CheckSources
// can normalise them in place.
type Fields struct {
	Name, Kind, Path *string
}

// CheckSources validates a connector's source list in place: at least one
// source; names trimmed, present and unique; kind one of kinds; path
// absolute or under ~/ (expanded with home) and cleaned.
func CheckSources[S any](sources []S, home string, fields func(*S) Fields, kinds ...string) error {
	if len(sources) == 0 {
		return errors.New("sources: at least one source is needed")
	}
	names := map[string]bool{}
	for i := range sources {
		f := fields(&sources[i])
		*f.Name = strings.TrimSpace(*f.Name)
		switch name := *f.Name; {
		case name == "":
			return fmt.Errorf("sources[%d]: name is required", i)
		case names[name]:
			return fmt.Errorf("sources[%d]: duplicate name %q", i, name)
		case !slices.Contains(kinds, *f.Kind):
			return fmt.Errorf("sources[%d] (%s): kind must be %s, not %q", i, name, strings.Join(kinds, " or "), *f.Kind)
		}
		names[*f.Name] = true
		p, err := ExpandHome(*f.Path, home)
		if err != nil {
			return fmt.Errorf("sources[%d] (%s): %w", i, *f.Name, err)
		}
		*f.Path = p
	}
	return nil
}

// ExpandHome returns p cleaned, with a leading ~/ replaced by home; any
// other relative path is an error, because a connector started by the host
// has no meaningful working directory.
func ExpandHome(p, home string) (string, error) {
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

// Discover returns the first of the paths (relative to home) that exists on
// macOS, or "" elsewhere or when none does. A path the program may not read
// still counts: the store is there, and reading it reports the Full Disk
// Access advice.
func Discover(home, goos string, rel ...string) string {
	if goos != "darwin" || home == "" {
		return ""
	}
	for _, r := range rel {
		p := filepath.Join(home, r)
		if _, err := os.Stat(p); err == nil || errors.Is(err, fs.ErrPermission) {
			return p
		}
	}
	return ""
}

// ReadBounded reads the file at path, refusing one larger than limit bytes.
func ReadBounded(path string, limit int64) ([]byte, error) {
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

// AdviceHead returns the first sentence of a "not configured" message: its
// first line without the lead-in to the configuration example that follows
// it ("; create it with, for example:", ", for example:"). Status lines,
// search preparation and log lines show it; the commands print the whole
// message.
func AdviceHead(msg string) string {
	head, _, _ := strings.Cut(msg, "\n")
	head, _, _ = strings.Cut(head, "; create it")
	head = strings.TrimSuffix(strings.TrimSpace(head), ":")
	return strings.TrimSpace(strings.TrimSuffix(head, ", for example"))
}

// NotConfiguredLine is msg's AdviceHead led by "not configured: " once,
// whether msg already starts so (ErrNotConfigured's messages) or not (a
// connector's own wording): the one line that search preparation and
// the tools give as the reason.
func NotConfiguredLine(msg string) string {
	return "not configured: " + strings.TrimPrefix(AdviceHead(msg), "not configured: ")
}
