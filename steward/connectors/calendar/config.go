package calendar

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/yamlstrict"
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

// LoadConfig reads calendar.yaml at path. When the file does not exist it
// returns the discovered default (Apple's store on macOS, when present) or an
// error that says how to create the file. home replaces the user's home
// directory for "~/" paths and discovery; goos replaces runtime.GOOS.
func LoadConfig(path, home, goos string) (*Config, error) {
	return localsource.Load(path, localsource.LoadOptions[Config]{
		What:     "calendar",
		Example:  "sources:\n  - name: personal\n    kind: ics\n    path: /path/to/calendar-folder-or-file.ics",
		Parse:    func(data []byte) (*Config, error) { return ParseConfig(data, home) },
		Discover: func() *Config { return discover(home, goos) },
	})
}

// ParseConfig parses and validates calendar.yaml content. Unknown keys are errors.
func ParseConfig(data []byte, home string) (*Config, error) {
	var c Config
	if err := yamlstrict.Decode(data, &c); err != nil {
		return nil, err
	}
	if c.Timezone != "" {
		if _, err := resolveTZID(c.Timezone); err != nil {
			return nil, fmt.Errorf("timezone: %w", err)
		}
	}
	if err := localsource.CheckEmbed(c.Embed); err != nil {
		return nil, err
	}
	if err := localsource.CheckSources(c.Sources, home, (*SourceConfig).fields, KindApple, KindICS); err != nil {
		return nil, err
	}
	for i := range c.Sources {
		if c.Sources[i].Account == "" {
			c.Sources[i].Account = c.Sources[i].Name
		}
	}
	return &c, nil
}

func (s *SourceConfig) fields() localsource.Fields {
	return localsource.Fields{Name: &s.Name, Kind: &s.Kind, Path: &s.Path}
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

// discover returns the default macOS configuration when Apple's store exists.
func discover(home, goos string) *Config {
	p := localsource.Discover(home, goos,
		filepath.Join("Library", "Group Containers", "group.com.apple.calendar", "Calendar.sqlitedb"),
		filepath.Join("Library", "Calendars", "Calendar.sqlitedb"))
	if p == "" {
		return nil
	}
	return &Config{Sources: []SourceConfig{{Name: "apple", Kind: KindApple, Path: p, Account: "apple"}}}
}
