package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/gitsource"
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

// ResetOptions configures Reset.
type ResetOptions struct {
	InitOptions
	// DiscardSource is the operator's consent to delete private refs that
	// hold source the delivery branch does not have (their work is lost).
	DiscardSource bool
}

// SourceReset is the Git part of a reset of a commissioned project
// (git_workflow on): the delivery branch stays exactly where it is, every
// ref of the private namespace is removed, and the fresh project is
// commissioned again at the branch's tip.
type SourceReset struct {
	DeliveryBranch string `json:"delivery_branch"`
	// Commit is the delivery branch's tip, kept.
	Commit    string `json:"commit"`
	Namespace string `json:"namespace"`
	// Refs are the private refs removed.
	Refs []gitsource.PrivateRef `json:"refs"`
	// Discarded names the removed refs whose source was not delivered
	// (only with the operator's consent).
	Discarded []string `json:"discarded"`
}

// UndeliveredError refuses a reset whose private refs hold source the
// delivery branch does not have.
type UndeliveredError struct {
	Branch string
	Refs   []string
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("private refs hold source that is not on the delivery branch %s: %s; deliver that work first (a Run under saivage start), or consent to losing it with saivage reset --yes --discard-source",
		e.Branch, strings.Join(e.Refs, ", "))
}

// PlanSourceReset is the read-only Git preflight of a reset: nil when
// git_workflow is off; otherwise the delivery branch must be selected
// (HEAD attached to it, no rebase stopped) with a clean checkout, and no
// private ref may hold undelivered source unless discard is set. The
// refusal names the paths or the refs; nothing is written.
func PlanSourceReset(ctx context.Context, opts Options, discard bool) (*SourceReset, error) {
	opts.fill()
	cfg, set, err := Compile(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("reset refused, the configuration does not compile: %w", err)
	}
	plan, _, err := newProject(opts, cfg, set).preflightReset(ctx, discard)
	return plan, err
}

func (p *Project) preflightReset(ctx context.Context, discard bool) (*SourceReset, *gitsource.Repo, error) {
	pol := p.Workflows.Git()
	if pol == nil {
		return nil, nil, nil
	}
	repo, err := OpenSource(ctx, p.Root, pol, SourceOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reset refused before deleting anything: %w", err)
	}
	q, err := repo.CheckDelivery(ctx)
	var rebase *gitsource.RebaseInProgressError
	if errors.As(err, &rebase) {
		return nil, nil, errors.New("reset refused before deleting anything: a git rebase is stopped in the checkout (a Run stopped while delivering a conflicting card); run the project again so that it is preserved, or drop it with git rebase --abort")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reset refused before deleting anything: the delivery branch %s must be selected with a clean checkout (commit, stash or remove these changes, or git switch %s): %w",
			pol.DeliveryBranch, pol.DeliveryBranch, err)
	}
	refs, err := repo.Provisioning(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reset refused before deleting anything: %w", err)
	}
	plan := &SourceReset{DeliveryBranch: pol.DeliveryBranch, Commit: string(q.Commit), Namespace: pol.RefNamespace, Refs: refs, Discarded: []string{}}
	for _, r := range refs {
		if r.Undelivered {
			plan.Discarded = append(plan.Discarded, r.Ref)
		}
	}
	if len(plan.Discarded) > 0 && !discard {
		return plan, nil, fmt.Errorf("reset refused before deleting anything: %w", &UndeliveredError{Branch: pol.DeliveryBranch, Refs: plan.Discarded})
	}
	return plan, repo, nil
}

// Reset discards exactly the generated roots (cards, agents, logs, work)
// and publishes a fresh project (root card, Analyst session) under the
// project lock; configuration, prompts, skills, tokens, the source tree
// and every other entry of .saivage stay. Any existing lock, live or not,
// refuses it. The configuration must compile first, so a reset never
// leaves a project the next start cannot admit because of its config.
// A commissioned project (git_workflow on) is preflighted first
// (PlanSourceReset); after the generated roots, its private refs are
// removed and the fresh root is commissioned again at the delivery
// branch's tip, which stays with its delivered commits.
func Reset(ctx context.Context, ro ResetOptions) (*Project, error) {
	opts := ro.InitOptions
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
	// A Git project preflights clean delivery and unused provisioning
	// before any generated-root deletion.
	src, repo, err := newProject(opts.Options, cfg, set).preflightReset(ctx, ro.DiscardSource)
	if err != nil {
		return nil, err
	}
	for _, name := range resetOrder {
		if err := os.RemoveAll(filepath.Join(stateDir, name)); err != nil {
			return nil, fmt.Errorf("reset: remove %s (run saivage reset again to finish): %w", name, err)
		}
		if err := state.SyncDir(stateDir); err != nil {
			return nil, fmt.Errorf("reset: %w", err)
		}
	}
	event := map[string]any{"author": "operator"}
	if src != nil {
		if err := repo.Unprovision(ctx, src.Refs); err != nil {
			return nil, fmt.Errorf("reset: %w (run saivage reset again to finish)", err)
		}
		event["removed_refs"], event["discarded_refs"] = len(src.Refs), len(src.Discarded)
	}
	p := newProject(opts.Options, cfg, set)
	if err := p.bootstrap(ctx, opts); err != nil {
		return nil, fmt.Errorf("reset: publish the fresh project (run saivage reset again to finish): %w", err)
	}
	if err := p.LogEvent("project_reset", event); err != nil {
		return nil, err
	}
	if err := p.admit(ctx, false); err != nil {
		return nil, err
	}
	return p, nil
}
