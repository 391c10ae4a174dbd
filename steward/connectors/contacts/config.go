package contacts

import (
	"path/filepath"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/yamlstrict"
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
	return localsource.Load(path, localsource.LoadOptions[Config]{
		What:    "contacts",
		Example: "sources:\n  - name: me\n    kind: vcard\n    path: /path/to/contacts-folder-or-file.vcf",
		Parse:   func(data []byte) (*Config, error) { return ParseConfig(data, home) },
		Discover: func() *Config {
			if dir := localsource.Discover(home, goos, filepath.Join("Library", "Application Support", "AddressBook")); dir != "" {
				return &Config{Sources: []SourceConfig{{Name: "apple", Kind: KindApple, Path: dir}}}
			}
			return nil
		},
	})
}

// ParseConfig parses and validates contacts.yaml content; unknown keys are errors.
func ParseConfig(data []byte, home string) (*Config, error) {
	var c Config
	if err := yamlstrict.Decode(data, &c); err != nil {
		return nil, err
	}
	if err := localsource.CheckEmbed(c.Embed); err != nil {
		return nil, err
	}
	if err := localsource.CheckSources(c.Sources, home, (*SourceConfig).fields, KindApple, KindVCard); err != nil {
		return nil, err
	}
	return &c, nil
}

func (s *SourceConfig) fields() localsource.Fields {
	return localsource.Fields{Name: &s.Name, Kind: &s.Kind, Path: &s.Path}
}

// sourceError makes a whole-source failure actionable: permission problems
// name Full Disk Access, a lock says to retry, a missing path says to check
// the configuration.
var sourceError = localsource.Access{Items: "contacts", App: "the Contacts app"}.Error
