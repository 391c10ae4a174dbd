package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
)

// SourceRefusedError is the source gate's refusal of a global caller's
// file write: the source paths it would have touched and why source is not
// admitted now. Nothing was written.
type SourceRefusedError struct {
	Paths  []string
	Reason string
	Branch string
}

func (e *SourceRefusedError) Error() string {
	return fmt.Sprintf("nothing was written: %s %s source under the native Git workflow (git_workflow.enabled: true), and %s. "+
		"Source reaches %s only as reviewed card work (create a task card for this change); files under .saivage/work and excluded paths stay writable",
		strings.Join(e.Paths, ", "), plural(len(e.Paths), "is", "are"), e.Reason, e.Branch)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// admitFiles is the Supervisor's final source-file admission for global
// callers (tools.SourceGate), run synchronously before any effect of the
// call. Destinations under .saivage or an excluded path are not source and
// pass. Source destinations (and the Git directory) pass only while no Run
// owns the checkout — the runtime stopped, no activation, no hold — the
// root's strict facts are commissioned and not held, and read-only Git
// inspection finds HEAD attached to the delivery branch at exactly the
// root's tip with a clean checkout. Nothing is cached or leased: every
// call decides afresh.
func (s *source) admitFiles(ctx context.Context, paths []string) error {
	var src []string
	for _, p := range paths {
		if rel, ok := s.sourcePath(p); ok {
			src = append(src, rel)
		}
	}
	if len(src) == 0 {
		return nil
	}
	if why := s.refusal(ctx); why != "" {
		s.rt.logEvent("source_write_refused", map[string]any{"paths": src, "reason": why})
		return &SourceRefusedError{Paths: src, Reason: why, Branch: s.policy.DeliveryBranch}
	}
	return nil
}

// sourcePath classifies a resolved absolute destination: its slash path
// relative to the checkout and whether the gate decides it.
func (s *source) sourcePath(p string) (string, bool) {
	rel, err := filepath.Rel(s.rt.root(), p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false // the file tools refuse it themselves
	}
	rel = filepath.ToSlash(rel)
	if under(rel, ".saivage") {
		return "", false
	}
	for _, e := range s.policy.ExcludedPaths {
		if under(rel, e) {
			return "", false
		}
	}
	return rel, true // source_roots is the whole checkout in this build; .git is gated too
}

func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

// refusal says why source is not admitted now ("" when it is).
func (s *source) refusal(ctx context.Context) string {
	rt := s.rt
	rt.mu.Lock()
	status, runID, active, held := rt.status, rt.runID, len(rt.stack), rt.heldLocked()
	rt.mu.Unlock()
	switch {
	case held:
		return "a maintenance hold is in place"
	case rt.Failure() != nil:
		return "the server is closing after an unexpected owner failure"
	case status != StatusStopped:
		return fmt.Sprintf("the runtime is %s (Run %s), so cards own the checkout; stop the Run first", status, runID)
	case active > 0:
		return "cards are still active in the checkout"
	}
	root, err := rt.p.Cards.Get(ctx, cards.RootID)
	if err != nil {
		return fmt.Sprintf("the root card's source facts cannot be read (%v)", err)
	}
	switch {
	case root.Git == nil || root.Git.Tip == "":
		return "the root card has no commissioned source facts"
	case root.Git.Held != "":
		return "the root card's source is held (" + root.Git.Held + ")"
	}
	q, err := s.repo.CheckDelivery(ctx)
	var dirty *gitsource.DirtyError
	switch {
	case errors.As(err, &dirty):
		return fmt.Sprintf("the checkout already differs from the delivery branch %s (%s), which would hold the next Run; commit or restore those paths first",
			s.policy.DeliveryBranch, describe(dirty.Observation))
	case err != nil:
		return fmt.Sprintf("the checkout is not at the exact delivery (%v); a Run left it on card source", err)
	}
	t, err := s.repo.Lookup(ctx, cards.RootID)
	if err != nil {
		return fmt.Sprintf("the root's private ref cannot be read (%v)", err)
	}
	if t.Commit != q.Commit || root.Git.Tip != string(q.Commit) {
		return fmt.Sprintf("the delivery branch %s is at %s but the root's source is at %s (facts: %s); the delivery is not exact",
			s.policy.DeliveryBranch, short(q.Commit), short(t.Commit), short(gitsource.OID(root.Git.Tip)))
	}
	return ""
}
