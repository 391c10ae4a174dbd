// Package templates holds Saivage's built-in project templates: a complete
// config.yaml plus the prompt files it references. Templates are registered
// explicitly in code (no directory scan); init materialises one into a
// project's .saivage directory, prompts first and config.yaml last.
package templates

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/workflow"
)

//go:embed classic classic-typed paad-typed classic-git
var embedded embed.FS

// ConfigFile is the configuration file name inside a template and inside a
// project's .saivage directory.
const ConfigFile = "config.yaml"

// Template is one built-in project template: a complete config.yaml and the
// prompt files it references, found in its source layers (its own directory
// first, then the templates it reuses prompts from).
type Template struct {
	// Name selects the template (saivage init --template NAME).
	Name string
	// Description says what the template sets up.
	Description string
	// ProvisionRequired templates need provisioning at init: classic-git
	// needs a clean Git checkout on its delivery branch, which init
	// commissions.
	ProvisionRequired bool
	dir               string
	// layers are directory names searched in order for prompt files.
	layers []string
}

// Default is the template used when none is named.
const Default = "classic"

// All returns the registered templates in a stable order. Registration is
// explicit: there is no directory scan.
func All() []Template {
	return []Template{
		{Name: "classic", dir: "classic", layers: []string{"classic"},
			Description: "project → goals → tasks with Planner, Executor and Reviewer agents, an Analyst and a disabled Oversight"},
		{Name: "classic-typed", dir: "classic-typed", layers: []string{"classic-typed", "classic"},
			Description: "classic with typed goal children: architecture (component then system review), implementation, test (coverage then verify) and research cards"},
		{Name: "paad-typed", dir: "paad-typed", layers: []string{"paad-typed", "classic-typed", "classic"},
			Description: "classic-typed in plan-act-assess-deliver cycles: PAAD plan prompts, no research cards, Oversight enabled, snapped compaction"},
		{Name: "classic-git", dir: "classic-git", layers: []string{"classic-git", "classic"}, ProvisionRequired: true,
			Description: "classic with the native Git workflow: tasks work on private refs, approved reviews deliver one commit per card to the delivery branch (needs a clean Git checkout)"},
	}
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

// Files serves the template's prompts and config.yaml (from its layers),
// rooted like a project's .saivage directory; only files can be opened.
func (t Template) Files() fs.FS { return &recordingFS{t: t, opened: map[string]bool{}} }

// read returns a file of the template: config.yaml from its own directory,
// a prompt from the first layer that has it.
func (t Template) read(rel string) ([]byte, error) {
	if rel == ConfigFile {
		data, err := fs.ReadFile(embedded, path.Join(t.dir, ConfigFile))
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
		return data, nil
	}
	for _, l := range t.layers {
		data, err := fs.ReadFile(embedded, path.Join(l, rel))
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
	}
	return nil, fmt.Errorf("template %s: %s: %w", t.Name, rel, fs.ErrNotExist)
}

// Config strictly decodes the template's config.yaml. Templates use no
// ${NAME} interpolation.
func (t Template) Config() (*config.Config, error) {
	data, err := t.read(ConfigFile)
	if err != nil {
		return nil, err
	}
	return config.Decode(data, config.DecodeOptions{File: "template " + t.Name + "/" + ConfigFile})
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

// Paths lists the template's exact closure in the order Materialize writes
// it: every prompt the compiled configuration reads, sorted, then
// config.yaml last. The closure is what compilation opens, so a prompt the
// configuration does not reference is never written.
func (t Template) Paths() ([]string, error) {
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	rec := &recordingFS{t: t, opened: map[string]bool{}}
	if _, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: rec}); err != nil {
		return nil, fmt.Errorf("template %s does not compile: %w", t.Name, err)
	}
	paths := make([]string, 0, len(rec.opened)+1)
	for p := range rec.opened {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return append(paths, ConfigFile), nil
}

// recordingFS serves a template's layered prompts and remembers which
// files compilation read.
type recordingFS struct {
	t      Template
	opened map[string]bool
}

func (r *recordingFS) Open(name string) (fs.File, error) {
	data, err := r.t.read(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	r.opened[name] = true
	return &memFile{info: memInfo{name: path.Base(name), size: int64(len(data))}, r: bytes.NewReader(data)}, nil
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
		data, err := t.read(p)
		if err != nil {
			return err
		}
		if err := write(p, data); err != nil {
			return fmt.Errorf("materialize %s: %w", p, err)
		}
	}
	return nil
}
