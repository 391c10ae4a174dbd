// Package project composes a Saivage project on disk: it materialises a
// template into .saivage, loads and compiles the configuration, performs the
// first publication of the generated state (cards, agents, logs, work) and
// strictly admits an existing project. Nothing is reconstructed or guessed:
// partial or damaged state fails with the exact file.
package project

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// GeneratedRoots are the four generated roots under .saivage that the first
// publication creates together and reset replaces wholesale.
var GeneratedRoots = []string{"cards", "agents", "logs", "work"}

// Options selects a project.
type Options struct {
	// Root is the project directory; ConfigPath defaults to
	// Root/.saivage/config.yaml.
	Root, ConfigPath string
	// LookupEnv resolves ${NAME} in the configuration; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Publisher performs writes; a default one (exit 1 on unknown outcomes)
	// is created when nil.
	Publisher *state.Publisher
	// Now stamps documents; time.Now when nil.
	Now func() time.Time
	// ReadOnly opens without any write: a torn app-log tail a live writer may
	// be completing is skipped instead of truncated.
	ReadOnly bool
}

// Project is an admitted project.
type Project struct {
	Root, StateDir, ConfigPath string
	Config                     *config.Config
	Workflows                  *workflow.Set
	Cards                      *cards.Store
	Sessions                   *conversations.Store
	Publisher                  *state.Publisher
	// Graph is the card graph admitted by Open.
	Graph *cards.Graph
	// AppEvents counts the app log's admitted events.
	AppEvents int
	now       func() time.Time
}

func (o *Options) fill() {
	if o.ConfigPath == "" {
		o.ConfigPath = filepath.Join(o.Root, config.StateDir, templates.ConfigFile)
	}
	if o.Publisher == nil {
		o.Publisher = state.New(state.Options{})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Compile loads and compiles the configuration selected by opts without
// touching generated state.
func Compile(ctx context.Context, opts Options) (*config.Config, *workflow.Set, error) {
	opts.fill()
	cfg, err := config.Load(config.LoadOptions{Path: opts.ConfigPath, LookupEnv: opts.LookupEnv, DefaultCardTypes: templates.ClassicCardTypes})
	if err != nil {
		return nil, nil, err
	}
	stateDir := filepath.Join(opts.Root, config.StateDir)
	set, err := workflow.Compile(ctx, cfg, workflow.Options{Prompts: os.DirFS(stateDir)})
	if err != nil {
		if ce, ok := err.(*config.Error); ok && ce.File == "" {
			ce.File = opts.ConfigPath
		}
		return nil, nil, err
	}
	return cfg, set, nil
}

func newProject(opts Options, cfg *config.Config, set *workflow.Set) *Project {
	stateDir := filepath.Join(opts.Root, config.StateDir)
	return &Project{
		Root: opts.Root, StateDir: stateDir, ConfigPath: opts.ConfigPath, Config: cfg, Workflows: set,
		Cards:     cards.New(cards.Options{StateDir: stateDir, Publisher: opts.Publisher, Workflows: set, Now: opts.Now}),
		Sessions:  conversations.New(opts.Publisher),
		Publisher: opts.Publisher, now: opts.Now,
	}
}

// rootsPresent reports which generated roots exist.
func rootsPresent(stateDir string) (present, absent []string, err error) {
	for _, r := range GeneratedRoots {
		_, err := os.Lstat(filepath.Join(stateDir, r))
		switch {
		case err == nil:
			present = append(present, r)
		case errors.Is(err, fs.ErrNotExist):
			absent = append(absent, r)
		default:
			return nil, nil, err
		}
	}
	return present, absent, nil
}

// Open compiles the configuration and strictly admits the generated state:
// all four roots, the card graph with its records and sessions, the global
// Analyst session and the app log.
func Open(ctx context.Context, opts Options) (*Project, error) {
	opts.fill()
	cfg, set, err := Compile(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := newProject(opts, cfg, set)
	present, absent, err := rootsPresent(p.StateDir)
	if err != nil {
		return nil, fmt.Errorf("open project: %w", err)
	}
	if len(present) == 0 {
		return nil, fmt.Errorf("%s: project is not initialised (run saivage init)", p.StateDir)
	}
	if len(absent) > 0 {
		return nil, fmt.Errorf("%s: partial generated state: %s present but %s missing (an interrupted saivage reset: run saivage reset --yes again to finish it)", p.StateDir, strings.Join(present, ", "), strings.Join(absent, ", "))
	}
	if err := p.admit(ctx, opts.ReadOnly); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Project) globalSessionDir(agent string) string {
	return filepath.Join(p.StateDir, "agents", agent)
}

// AppLogPath returns the app event log.
func (p *Project) AppLogPath() string { return filepath.Join(p.StateDir, "logs", "app.jsonl") }

func (p *Project) admit(ctx context.Context, readOnly bool) error {
	g, err := p.Cards.Admit(ctx)
	if err != nil {
		return err
	}
	p.Graph = g
	analyst := p.Workflows.Analyst()
	if _, err := p.Sessions.ReadIndex(p.globalSessionDir(analyst), conversations.SessionID(analyst, "")); err != nil {
		return err
	}
	tail := state.TailTruncate
	if readOnly {
		tail = state.TailIgnore
	}
	n, err := ReadAppLog(p.Publisher, p.AppLogPath(), tail)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	p.AppEvents = n
	return nil
}

// Event is one app log event.
type Event struct {
	ID   string         `json:"id"`
	Time time.Time      `json:"ts"`
	Type string         `json:"type"`
	Data map[string]any `json:"data,omitempty"`
}

// AppLogVersion is the app log envelope version.
const AppLogVersion = 2

// ReadAppLog validates the app log (unique non-empty IDs, typed events) and
// returns its event count.
func ReadAppLog(pub *state.Publisher, path string, tail state.TailPolicy) (int, error) {
	ids := map[string]bool{}
	_, err := pub.ReadJSONL(path, state.ReadOptions{Versions: []int{AppLogVersion}, Tail: tail,
		Validate: func(_ int, env state.Envelope) error {
			for _, raw := range env.Rows {
				var e Event
				if err := strictJSON(raw, &e); err != nil {
					return err
				}
				if e.ID == "" || e.Type == "" || e.Time.IsZero() {
					return errors.New("event needs id, ts and type")
				}
				if ids[e.ID] {
					return fmt.Errorf("duplicate event id %s", e.ID)
				}
				ids[e.ID] = true
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// LogEvent appends one event to the app log (created on first use).
func (p *Project) LogEvent(typ string, data map[string]any) error {
	e := Event{ID: state.NewUUID(), Time: p.now().UTC(), Type: typ, Data: data}
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(p.AppLogPath())
	return p.Publisher.Append(p.AppLogPath(), state.Envelope{V: AppLogVersion, Rows: []json.RawMessage{raw}}, errors.Is(statErr, fs.ErrNotExist))
}

// InitOptions configures Init.
type InitOptions struct {
	Options
	// Template names the template materialised when config.yaml is absent.
	Template string
	// Title of the root card; "Project" when empty.
	Title string
	// Objective, when set, is accepted as version 1 of the root's objective
	// record.
	Objective string
}

// InitResult says what Init did.
type InitResult struct {
	// WroteConfig is true when the template was materialised.
	WroteConfig bool
	// Bootstrapped is true when the generated state was first published.
	Bootstrapped bool
}

// Init prepares a project: it materialises the template when config.yaml is
// absent (prompts first, config last; an existing config and its prompts are
// kept), compiles the configuration, takes the project lock and either
// publishes the first generated state (all four roots absent) or admits the
// existing one. Partial generated state fails.
func Init(ctx context.Context, opts InitOptions) (*Project, InitResult, error) {
	opts.fill()
	var res InitResult
	stateDir := filepath.Join(opts.Root, config.StateDir)
	if err := os.MkdirAll(stateDir, 0o777); err != nil {
		return nil, res, fmt.Errorf("init: %w", err)
	}
	if _, err := os.Lstat(opts.ConfigPath); errors.Is(err, fs.ErrNotExist) {
		name := opts.Template
		if name == "" {
			name = templates.Default
		}
		tpl, err := templates.Lookup(name)
		if err != nil {
			return nil, res, err
		}
		err = tpl.Materialize(func(rel string, data []byte) error {
			dst := filepath.Join(stateDir, filepath.FromSlash(rel))
			if rel == templates.ConfigFile {
				dst = opts.ConfigPath
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
				return err
			}
			if rel == templates.ConfigFile {
				return opts.Publisher.CreateNew(dst, data)
			}
			return opts.Publisher.Replace(dst, data)
		})
		if err != nil {
			return nil, res, err
		}
		res.WroteConfig = true
	} else if err != nil {
		return nil, res, fmt.Errorf("init: %w", err)
	}
	cfg, set, err := Compile(ctx, opts.Options)
	if err != nil {
		return nil, res, err
	}
	lk, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: opts.Publisher, Now: opts.Now})
	if err != nil {
		return nil, res, err
	}
	defer func() {
		if !opts.Publisher.Stopped() {
			_ = lk.Release()
		}
	}()
	p := newProject(opts.Options, cfg, set)
	present, absent, err := rootsPresent(stateDir)
	if err != nil {
		return nil, res, fmt.Errorf("init: %w", err)
	}
	switch {
	case len(present) == len(GeneratedRoots):
		if err := p.admit(ctx, false); err != nil {
			return nil, res, err
		}
		return p, res, nil
	case len(present) > 0:
		return nil, res, fmt.Errorf("%s: partial generated state: %s present but %s missing; nothing was changed", stateDir, strings.Join(present, ", "), strings.Join(absent, ", "))
	}
	if err := p.bootstrap(ctx, opts); err != nil {
		return nil, res, err
	}
	res.Bootstrapped = true
	if err := p.admit(ctx, false); err != nil {
		return nil, res, err
	}
	return p, res, nil
}

func (p *Project) bootstrap(ctx context.Context, opts InitOptions) error {
	cm, err := p.qualify(ctx)
	if err != nil {
		return err
	}
	for _, r := range []string{"work", "logs", "agents"} {
		if err := p.Publisher.Mkdir(filepath.Join(p.StateDir, r), true); err != nil {
			return err
		}
	}
	analyst := p.Workflows.Analyst()
	if err := p.Sessions.Establish(p.globalSessionDir(analyst), conversations.SessionID(analyst, "")); err != nil {
		return err
	}
	title := opts.Title
	if title == "" {
		title = "Project"
	}
	in := cards.CreateInput{Type: config.RootCardType, Title: title, Author: "runtime:bootstrap"}
	if strings.TrimSpace(opts.Objective) != "" {
		in.Bootstrap = map[string]string{"objective": opts.Objective}
	}
	if cm != nil {
		in.Commission = cm.commission(ctx)
	}
	root, err := p.Cards.Create(ctx, in)
	if err != nil {
		return err
	}
	data := map[string]any{"template": opts.Template}
	if cm != nil {
		if err := ignoreGenerated(p.Root); err != nil {
			return fmt.Errorf("ignore .saivage/ in the checkout: %w", err)
		}
		data["delivery_branch"], data["commit"], data["policy_digest"] = cm.pol.DeliveryBranch, root.Git.Tip, cm.pol.Digest
	}
	return p.LogEvent("project_initialized", data)
}

// Events returns the app log events that keep returns true for, in order.
// A torn tail is skipped without writing (a live writer may complete it).
func (p *Project) Events(keep func(Event) bool) ([]Event, error) {
	var out []Event
	_, err := p.Publisher.ReadJSONL(p.AppLogPath(), state.ReadOptions{Versions: []int{AppLogVersion}, Tail: state.TailIgnore,
		Validate: func(_ int, env state.Envelope) error {
			for _, raw := range env.Rows {
				var e Event
				if err := strictJSON(raw, &e); err != nil {
					return err
				}
				if keep == nil || keep(e) {
					out = append(out, e)
				}
			}
			return nil
		}})
	if errors.Is(err, fs.ErrNotExist) {
		return []Event{}, nil
	}
	if out == nil {
		out = []Event{}
	}
	return out, err
}
