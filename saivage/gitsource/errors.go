package gitsource

import (
	"fmt"
	"slices"
	"strings"
)

// VersionError reports a Git older than MinGitVersion.
type VersionError struct {
	Have, Want string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("git %s is older than the required %s: install a newer git", e.Have, e.Want)
}

// UnsupportedError reports repository state the engine refuses to work
// with (fsmonitor, sparse checkout, transform attributes, submodules, SHA-256
// object format, ...).
type UnsupportedError struct {
	Feature string
	Detail  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported git state: %s: %s", e.Feature, e.Detail)
}

// DirtyError reports a checkout that does not match the selection it must
// match; Paths names every differing path.
type DirtyError struct {
	// What was being checked ("delivery branch main", "card c1", ...).
	What        string
	Observation Observation
}

func (e *DirtyError) Error() string {
	paths := e.Observation.Paths()
	shown := paths
	if len(shown) > 20 {
		shown = shown[:20]
	}
	more := ""
	if len(paths) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(paths)-len(shown))
	}
	return fmt.Sprintf("checkout does not match %s: %s%s", e.What, strings.Join(shown, ", "), more)
}

// Paths is every differing path.
func (e *DirtyError) Paths() []string { return e.Observation.Paths() }

// RefExistsError reports that a private ref the engine must create exists.
type RefExistsError struct {
	Ref    string
	Commit OID
}

func (e *RefExistsError) Error() string {
	return fmt.Sprintf("private ref %s already exists (at %s)", e.Ref, e.Commit)
}

// UnreviewedError reports a delivery whose child tip is not the reviewed
// commit.
type UnreviewedError struct {
	Card          string
	Reviewed, Tip OID
}

func (e *UnreviewedError) Error() string {
	return fmt.Sprintf("card %s: tip %s is not the reviewed commit %s; refusing to deliver", e.Card, e.Tip, e.Reviewed)
}

// NotFastForwardError refuses AdvanceParent: the parent moved away from
// the child's base, or the child does not descend from it. Nothing moved.
type NotFastForwardError struct {
	Child, Parent string
	// Base is the commit the child started from, ParentTip the parent's
	// tip now, ChildTip the child's.
	Base, ParentTip, ChildTip OID
	// Unrelated is true when the child does not descend from Base.
	Unrelated bool
}

func (e *NotFastForwardError) Error() string {
	if !e.Unrelated {
		return fmt.Sprintf("parent %s moved from %s to %s while card %s worked; its tip %s cannot fast-forward the parent",
			e.Parent, short(e.Base), short(e.ParentTip), e.Child, short(e.ChildTip))
	}
	return fmt.Sprintf("card %s's tip %s does not descend from its base %s; it cannot fast-forward parent %s",
		e.Child, short(e.ChildTip), short(e.Base), e.Parent)
}

// SquashConflictError refuses AdvanceParent's squash fallback: the parent
// moved away from the child's base and the child's changes conflict with
// the parent's new ones in Paths. Nothing moved, no rebase was started.
type SquashConflictError struct {
	NotFastForwardError
	Paths []string
}

func (e *SquashConflictError) Error() string {
	return fmt.Sprintf("parent %s moved from %s to %s while card %s worked, and squashing the card's tip %s onto it conflicts in %s; nothing moved",
		e.Parent, short(e.Base), short(e.ParentTip), e.Child, short(e.ChildTip), strings.Join(e.Paths, ", "))
}

// ConflictError reports that replaying a child onto its advanced parent
// stopped on conflicts. The native rebase is left stopped in the checkout
// for SnapshotRebase and ReturnSnapshot.
type ConflictError struct {
	Card, Parent string
	// Original is the child tip being replayed, Current the parent tip,
	// Native the checkout's HEAD when the rebase started, Detached the HEAD
	// the stopped rebase left.
	Original, Current, Native, Detached OID
	// Tip is the card tip this replay started from (Original is kept from
	// the first interruption).
	Tip   OID
	Paths []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("card %s conflicts with parent %s at %s: rebase stopped (original %s, onto %s)",
		e.Card, e.Parent, strings.Join(e.Paths, ", "), short(e.Original), short(e.Current))
}

// RebaseInProgressError reports a stopped native rebase where none may be.
type RebaseInProgressError struct{}

func (e *RebaseInProgressError) Error() string {
	return "a git rebase is stopped in the checkout: preserve it (SnapshotRebase, ReturnSnapshot) first"
}

// CommandError reports a Git command that did not succeed: non-zero exit,
// killed by the deadline or cancellation, or contained (its leader exited
// but members of its process group had to be killed).
type CommandError struct {
	Args      []string
	ExitCode  int
	Stderr    string
	Contained bool
	Cancelled bool
}

func (e *CommandError) Error() string {
	what := fmt.Sprintf("exit %d", e.ExitCode)
	switch {
	case e.Cancelled:
		what = "cancelled (process group killed)"
	case e.Contained:
		what = fmt.Sprintf("exit %d with surviving group members killed (containment, not success)", e.ExitCode)
	}
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	if msg != "" {
		msg = ": " + msg
	}
	return fmt.Sprintf("git %s: %s%s", strings.Join(e.Args, " "), what, msg)
}

// MissingObjectError reports an object the local repository lacks; the
// engine never fetches.
type MissingObjectError struct {
	OID OID
}

func (e *MissingObjectError) Error() string {
	return fmt.Sprintf("object %s is missing from the local repository (nothing is fetched)", e.OID)
}

func short(o OID) string {
	if len(o) > 12 {
		return string(o[:12])
	}
	return string(o)
}

func sortedUnique(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
