package calendar

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
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the content of calendar.yaml.
//
//	timezone: Europe/Rome      # zone for all-day and floating events (default: system zone)
//	embed: gateway             # gateway (default), off, or an OpenAI-compatible base URL
//	sources:
//	  - name: personal
//	    kind: apple             # Calendar.sqlitedb
//	    path: ~/Library/Group Containers/group.com.apple.calendar/Calendar.sqlitedb
//	  - name: work
//	    kind: ics               # one .ics file, or a vdir folder
//	    path: /home/me/.calendars/work
//	    account: work@example.com
type Config struct {
	Timezone string         `yaml:"timezone"`
	Embed    string         `yaml:"embed"`
	Sources  []SourceConfig `yaml:"sources"`
}

// SourceConfig is one calendar source.
type SourceConfig struct {
	Name string `yaml:"name"`
	// Kind is "apple" (Calendar.sqlitedb) or "ics" (an .ics/.vcs file or a vdir folder).
	Kind string `yaml:"kind"`
	Path string `yaml:"path"`
	// Account labels the events of an ics source (default: the source name).
	// Apple sources take the account from each calendar's store.
	Account string `yaml:"account"`
}

// Source kinds.
const (
	KindApple = "apple"
	KindICS   = "ics"
)

// maxConfigBytes bounds calendar.yaml; a real one is a few hundred bytes.
const maxConfigBytes = 1 << 20

// LoadConfig reads calendar.yaml at path. When the file does not exist it
// returns the discovered default (Apple's store on macOS, when present) or an
// error that says how to create the file. home replaces the user's home
// directory for "~/" paths and discovery; goos replaces runtime.GOOS.
func LoadConfig(path, home, goos string) (*Config, error) {
	data, err := readBounded(path, maxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if c := discover(home, goos); c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("no calendar sources: %s does not exist; create it with, for example:\n"+
			"sources:\n  - name: personal\n    kind: ics\n    path: /path/to/calendar-folder-or-file.ics", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read calendar config: %w", err)
	}
	c, err := ParseConfig(data, home)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates calendar.yaml content. Unknown keys are errors.
func ParseConfig(data []byte, home string) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse calendar config: %w", err)
	}
	if err := c.validate(home); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate(home string) error {
	if c.Timezone != "" {
		if _, err := resolveTZID(c.Timezone); err != nil {
			return fmt.Errorf("timezone: %w", err)
		}
	}
	switch e := c.Embed; {
	case e == "" || e == "gateway" || e == "off":
	default:
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("embed: %q must be gateway, off or an http(s) URL", e)
		}
	}
	if len(c.Sources) == 0 {
		return errors.New("sources: at least one source is needed")
	}
	names := map[string]bool{}
	for i := range c.Sources {
		s := &c.Sources[i]
		s.Name = strings.TrimSpace(s.Name)
		if s.Name == "" {
			return fmt.Errorf("sources[%d]: name is required", i)
		}
		if names[s.Name] {
			return fmt.Errorf("sources[%d]: duplicate name %q", i, s.Name)
		}
		names[s.Name] = true
		if s.Kind != KindApple && s.Kind != KindICS {
			return fmt.Errorf("sources[%d] (%s): kind must be apple or ics, not %q", i, s.Name, s.Kind)
		}
		p, err := expandHome(s.Path, home)
		if err != nil {
			return fmt.Errorf("sources[%d] (%s): %w", i, s.Name, err)
		}
		s.Path = p
		if s.Account == "" {
			s.Account = s.Name
		}
	}
	return nil
}

// Location returns the display zone: the configured timezone or the system zone.
func (c *Config) Location() *time.Location {
	if c.Timezone != "" {
		if loc, err := resolveTZID(c.Timezone); err == nil {
			return loc
		}
	}
	return time.Local
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

// discover returns the default macOS configuration when Apple's store exists.
func discover(home, goos string) *Config {
	if goos != "darwin" || home == "" {
		return nil
	}
	for _, p := range []string{
		filepath.Join(home, "Library", "Group Containers", "group.com.apple.calendar", "Calendar.sqlitedb"),
		filepath.Join(home, "Library", "Calendars", "Calendar.sqlitedb"),
	} {
		if _, err := os.Stat(p); err == nil || errors.Is(err, fs.ErrPermission) {
			// A permission error still means the store is there; the
			// sync reports it with the Full Disk Access advice.
			return &Config{Sources: []SourceConfig{{Name: "apple", Kind: KindApple, Path: p, Account: "apple"}}}
		}
	}
	return nil
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
