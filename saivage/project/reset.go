package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/state"
)

// ResetPlan is the report of a reset, made before any effect: the
// generated roots it removes (with their sizes) and what it keeps.
type ResetPlan struct {
	StateDir string      `json:"state_dir"`
	Remove   []ResetRoot `json:"remove"`
	Keep     []string    `json:"keep"`
}

// ResetRoot is one generated root a reset removes.
type ResetRoot struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	Files   int    `json:"files"`
	Bytes   int64  `json:"bytes"`
}

// resetOrder removes cards first: an interrupted reset then leaves a
// partial generated state, which start refuses and a second reset
// finishes; it is never mistaken for a usable project.
var resetOrder = []string{"cards", "agents", "logs", "work"}

// PlanReset inspects the generated roots a reset would remove. It writes
// nothing.
func PlanReset(opts Options) (ResetPlan, error) {
	opts.fill()
	stateDir := filepath.Join(opts.Root, config.StateDir)
	plan := ResetPlan{StateDir: stateDir, Remove: []ResetRoot{}}
	for _, name := range resetOrder {
		r := ResetRoot{Name: name}
		err := filepath.WalkDir(filepath.Join(stateDir, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == filepath.Join(stateDir, name) && errors.Is(err, fs.ErrNotExist) {
					return fs.SkipAll
				}
				return err
			}
			r.Present = true
			if d.Type().IsRegular() {
				info, err := d.Info()
				if err != nil {
					return err
				}
				r.Files++
				r.Bytes += info.Size()
			}
			return nil
		})
		if err != nil {
			return plan, fmt.Errorf("inspect %s: %w", name, err)
		}
		plan.Remove = append(plan.Remove, r)
	}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return plan, fmt.Errorf("reset: %w", err)
	}
	for _, e := range entries {
		if !slices.Contains(GeneratedRoots, e.Name()) {
			plan.Keep = append(plan.Keep, e.Name())
		}
	}
	return plan, nil
}

// Reset discards exactly the generated roots (cards, agents, logs, work)
// and publishes a fresh project (root card, Analyst session) under the
// project lock; configuration, prompts, skills, tokens, the source tree
// and every other entry of .saivage stay. Any existing lock, live or not,
// refuses it. The configuration must compile first, so a reset never
// leaves a project the next start cannot admit because of its config.
func Reset(ctx context.Context, opts InitOptions) (*Project, error) {
	opts.fill()
	stateDir := filepath.Join(opts.Root, config.StateDir)
	if _, err := os.Lstat(opts.ConfigPath); err != nil {
		return nil, fmt.Errorf("reset: %w (a reset keeps the configuration; there is none)", err)
	}
	cfg, set, err := Compile(ctx, opts.Options)
	if err != nil {
		return nil, fmt.Errorf("reset refused, the configuration does not compile: %w", err)
	}
	lk, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: opts.Publisher, Now: opts.Now})
	if err != nil {
		return nil, fmt.Errorf("reset refused: %w", err)
	}
	defer func() {
		if !opts.Publisher.Stopped() {
			_ = lk.Release()
		}
	}()
	// A Git project preflights clean delivery and unused provisioning (no
	// root private ref) before any generated-root deletion.
	if _, err := newProject(opts.Options, cfg, set).qualify(ctx); err != nil {
		return nil, fmt.Errorf("reset refused before deleting anything: %w", err)
	}
	for _, name := range resetOrder {
		if err := os.RemoveAll(filepath.Join(stateDir, name)); err != nil {
			return nil, fmt.Errorf("reset: remove %s (run saivage reset again to finish): %w", name, err)
		}
		if err := state.SyncDir(stateDir); err != nil {
			return nil, fmt.Errorf("reset: %w", err)
		}
	}
	p := newProject(opts.Options, cfg, set)
	if err := p.bootstrap(ctx, opts); err != nil {
		return nil, fmt.Errorf("reset: publish the fresh project (run saivage reset again to finish): %w", err)
	}
	if err := p.LogEvent("project_reset", map[string]any{"author": "operator"}); err != nil {
		return nil, err
	}
	if err := p.admit(ctx, false); err != nil {
		return nil, err
	}
	return p, nil
}
