package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// SourceOptions configures OpenSource.
type SourceOptions struct {
	// AfterStep is called after each durable Git step (tests, progress).
	AfterStep func(gitsource.Step)
	// Environ is the base environment of Git children.
	Environ func() []string
	// QueryDeadline overrides gitsource.QueryDeadline (tests on a loaded
	// machine).
	QueryDeadline time.Duration
}

// OpenSource opens the project checkout for the compiled Git policy.
func OpenSource(ctx context.Context, root string, pol *workflow.GitPolicy, o SourceOptions) (*gitsource.Repo, error) {
	repo, err := gitsource.Open(ctx, gitsource.Options{Dir: root, DeliveryBranch: pol.DeliveryBranch, Namespace: pol.RefNamespace,
		ExcludedPaths: pol.ExcludedPaths, AfterStep: o.AfterStep, Environ: o.Environ, QueryDeadline: o.QueryDeadline,
		Identity: gitsource.Identity{Name: "Saivage", Email: "saivage@localhost"}})
	if err != nil {
		return nil, fmt.Errorf("open the Git checkout %s: %w", root, err)
	}
	return repo, nil
}

// commissioning is fresh bootstrap's native Git part: qualify before any
// generated namespace, commission once the root's sessions and the
// Analyst exist.
type commissioning struct {
	repo *gitsource.Repo
	pol  *workflow.GitPolicy
	q    gitsource.Qualification
}

// qualify checks a clean explicit delivery branch and an absent root ref.
// A dirty checkout is refused naming its paths.
func (p *Project) qualify(ctx context.Context) (*commissioning, error) {
	pol := p.Workflows.Git()
	if pol == nil {
		return nil, nil
	}
	repo, err := OpenSource(ctx, p.Root, pol, SourceOptions{})
	if err != nil {
		return nil, fmt.Errorf("commissioning refused: %w", err)
	}
	q, err := repo.Qualify(ctx, cards.RootID)
	if err != nil {
		return nil, fmt.Errorf("commissioning refused (the checkout is untouched and no project was created; the template files in .saivage are kept for the next init): %w", err)
	}
	return &commissioning{repo: repo, pol: pol, q: q}, nil
}

// commission creates the root's private ref and returns its facts.
func (cm *commissioning) commission(ctx context.Context) func() (*cards.SourceFacts, error) {
	return func() (*cards.SourceFacts, error) {
		t, err := cm.repo.Commission(ctx, cards.RootID, cm.q)
		if err != nil {
			return nil, fmt.Errorf("commission the delivery branch %s: %w", cm.pol.DeliveryBranch, err)
		}
		return &cards.SourceFacts{Ref: t.Ref, Base: string(cm.q.Commit), Tip: string(t.Commit), Tree: string(t.Tree),
			DeliveryBranch: cm.pol.DeliveryBranch, PolicyDigest: cm.pol.Digest}, nil
	}
}

// ignoreGenerated makes Git ignore .saivage/ in the checkout's local
// exclude file (.git/info/exclude): a commissioned checkout must stay
// clean, so the tracked .gitignore is not edited.
func ignoreGenerated(root string) error {
	gitDir := filepath.Join(root, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil // not a plain checkout (worktree file or no Git): leave it
	}
	path := filepath.Join(gitDir, "info", "exclude")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if t := strings.TrimSpace(line); t == "/.saivage/" || t == ".saivage/" || t == "/.saivage" || t == ".saivage" {
			return nil
		}
	}
	if len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
		data = append(data, '\n')
	}
	data = append(data, []byte("# Saivage generated state\n/.saivage/\n")...)
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o666)
}

// CheckSourcePolicy compares the retained root with the compiled
// configuration: ON/OFF and the exact source policy digest must match
// (commissioning never replays on a retained root).
func (p *Project) CheckSourcePolicy(ctx context.Context) error {
	root, err := p.Cards.Get(ctx, cards.RootID)
	if err != nil {
		return err
	}
	pol := p.Workflows.Git()
	switch {
	case pol == nil && root.Git != nil:
		return fmt.Errorf("the project was commissioned for the native Git workflow (delivery branch %s) but git_workflow is off; turn it back on or reset the project", root.Git.DeliveryBranch)
	case pol != nil && root.Git == nil:
		return fmt.Errorf("git_workflow is on but the project was initialized without it; commissioning happens only at init (saivage reset on a clean %s checkout)", pol.DeliveryBranch)
	case pol != nil && root.Git.PolicyDigest != pol.Digest:
		return fmt.Errorf("the compiled source policy (%s) differs from the one the project was commissioned with (%s); restore the git_workflow section or reset the project", pol.Digest, root.Git.PolicyDigest)
	}
	return nil
}
