// Package templates holds Saivage's built-in project templates: a complete
// config.yaml plus the prompt files it references. Templates are registered
// explicitly in code (no directory scan); init materialises one into a
// project's .saivage directory, prompts first and config.yaml last.
package templates

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
)

//go:embed classic
var classicFS embed.FS

// ConfigFile is the configuration file name inside a template and inside a
// project's .saivage directory.
const ConfigFile = "config.yaml"

// Template is one built-in project template.
type Template struct {
	// Name selects the template (saivage init --template NAME).
	Name string
	// Description says what the template sets up.
	Description string
	files       fs.FS
}

// Default is the template used when none is named.
const Default = "classic"

// All returns the registered templates in a stable order.
func All() []Template {
	classic, err := fs.Sub(classicFS, "classic")
	if err != nil {
		panic(err) // embedded path is fixed at compile time
	}
	return []Template{{
		Name:        "classic",
		Description: "project → goals → tasks with Planner, Executor and Reviewer agents, an Analyst and a disabled Oversight",
		files:       classic,
	}}
}

// Lookup returns the template called name.
func Lookup(name string) (Template, error) {
	var names []string
	for _, t := range All() {
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return Template{}, fmt.Errorf("unknown template %q (known: %s)", name, strings.Join(names, ", "))
}

// Files returns the template's files (config.yaml and prompts/...), rooted
// like a project's .saivage directory.
func (t Template) Files() fs.FS { return t.files }

// Config strictly decodes the template's config.yaml. Templates use no
// ${NAME} interpolation.
func (t Template) Config() (*config.Config, error) {
	data, err := fs.ReadFile(t.files, ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", t.Name, err)
	}
	cfg, err := config.Decode(data, config.DecodeOptions{File: "template " + t.Name + "/" + ConfigFile})
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// ClassicCardTypes returns a fresh copy of the classic template's complete
// card_types map: the effective map of a configuration that omits card_types.
func ClassicCardTypes() map[string]config.CardType {
	t, err := Lookup("classic")
	if err != nil {
		panic(err)
	}
	cfg, err := t.Config()
	if err != nil {
		panic(fmt.Sprintf("built-in classic template does not decode: %v", err)) // covered by tests
	}
	return cfg.CardTypes
}

// Paths lists the template's files in the order Materialize writes them:
// every prompt first, config.yaml last.
func (t Template) Paths() ([]string, error) {
	var paths []string
	err := fs.WalkDir(t.files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && p != ConfigFile {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", t.Name, err)
	}
	slices.Sort(paths)
	return append(paths, ConfigFile), nil
}

// Materialize writes the template's files through write (path relative to
// the .saivage directory): prompts first and config.yaml last, so a present
// config.yaml implies its prompt closure was written.
func (t Template) Materialize(write func(rel string, data []byte) error) error {
	paths, err := t.Paths()
	if err != nil {
		return err
	}
	for _, p := range paths {
		data, err := fs.ReadFile(t.files, p)
		if err != nil {
			return fmt.Errorf("template %s: %w", t.Name, err)
		}
		if err := write(p, data); err != nil {
			return fmt.Errorf("materialize %s: %w", p, err)
		}
	}
	return nil
}
