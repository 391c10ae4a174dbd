package gitsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// rebaseState is what startRebase leaves for the two preservation
// invocations; it lives in WorkDir next to the stopped native rebase.
type rebaseState struct {
	Card     string `json:"card"`
	Parent   string `json:"parent"`
	Native   OID    `json:"native"`
	Original OID    `json:"original"`
	Tip      OID    `json:"tip"`
	Current  OID    `json:"current"`
}

func (r *Repo) rebaseStatePath() string { return filepath.Join(r.workDir, "rebase.json") }

// startRebase replays the child onto its advanced parent with the native
// rebase in the checkout; on conflicts it leaves the rebase stopped and
// returns a *ConflictError.
func (r *Repo) startRebase(ctx context.Context, opts DeliverOptions, c, p Tuple, base OID) error {
	native, _, err := r.head(ctx)
	if err != nil {
		return err
	}
	orig, err := r.revParse(ctx, r.OriginalRef(opts.Child))
	if err != nil {
		return err
	}
	if orig == "" {
		if err := r.updateRef(ctx, r.OriginalRef(opts.Child), c.Commit, zeroOID, "saivage: original of "+opts.Child); err != nil {
			return err
		}
		orig = c.Commit
	}
	st := rebaseState{Card: opts.Child, Parent: opts.Parent, Native: native, Original: orig, Tip: c.Commit, Current: p.Commit}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(r.rebaseStatePath(), b, 0o600); err != nil {
		return fmt.Errorf("record the rebase: %w", err)
	}
	if _, err := r.switchTree(ctx, c, ""); err != nil {
		return err
	}
	if err := r.detachHead(ctx, c.Commit); err != nil {
		return err
	}
	out, res, err := r.runCode(ctx, Command{Args: []string{"-c", "rebase.autoStash=false", "-c", "rebase.updateRefs=false",
		"-c", "rebase.autoSquash=false", "rebase", "--no-autostash", "--onto", string(p.Commit), string(base)}})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 || !r.rebaseInProgress() {
		_ = os.Remove(r.rebaseStatePath())
		if res.ExitCode == 0 {
			// merge-tree saw a conflict the native rebase did not: put the
			// checkout back on the reviewed child and refuse.
			_, _ = r.switchTree(ctx, c, "")
			_ = r.detachHead(ctx, c.Commit)
			return fmt.Errorf("merge-tree reported conflicts but the rebase onto %s succeeded; nothing delivered", short(p.Commit))
		}
		return r.commandError(Command{Args: []string{"rebase", "--onto", string(p.Commit), string(base)}}, out, res)
	}
	q, _, err := r.head(ctx)
	if err != nil {
		return err
	}
	paths, err := r.unmerged(ctx)
	if err != nil {
		return err
	}
	return &ConflictError{Card: opts.Child, Parent: opts.Parent, Original: orig, Tip: c.Commit, Current: p.Commit,
		Native: native, Detached: q, Paths: paths}
}

// unmerged lists the real index's conflicted paths.
func (r *Repo) unmerged(ctx context.Context) ([]string, error) {
	idx, err := r.lsIndex(ctx, "")
	if err != nil {
		return nil, err
	}
	var paths []string
	for p, es := range idx {
		for _, e := range es {
			if e.stage != 0 {
				paths = append(paths, p)
				break
			}
		}
	}
	return sortedUnique(paths), nil
}

func (r *Repo) loadRebase(card string) (rebaseState, error) {
	var st rebaseState
	b, err := os.ReadFile(r.rebaseStatePath())
	if errors.Is(err, os.ErrNotExist) || !r.rebaseInProgress() {
		return st, fmt.Errorf("no stopped rebase of card %s in the checkout", card)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read the rebase record: %w", err)
	}
	if st.Card != card {
		return st, fmt.Errorf("the stopped rebase belongs to card %s, not %s", st.Card, card)
	}
	return st, nil
}

// SnapshotRebase is the first preservation invocation: with a native rebase
// stopped on conflicts, it captures the checkout's eligible files into a
// snapshot commit on SnapshotRef without changing the real index.
func (r *Repo) SnapshotRebase(ctx context.Context, card string) (Snapshot, error) {
	s, err := r.snapshotRebase(ctx, card)
	if err != nil {
		return s, fmt.Errorf("snapshot the stopped rebase of card %s: %w", card, err)
	}
	return s, nil
}

func (r *Repo) snapshotRebase(ctx context.Context, card string) (Snapshot, error) {
	st, err := r.loadRebase(card)
	if err != nil {
		return Snapshot{}, err
	}
	qt, err := r.headTuple(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	q := qt.Commit
	paths, err := r.unmerged(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	tree, _, idx, err := r.captureTree(ctx, captureSpec{name: "snapshot-" + card, base: qt.Tree})
	_ = os.Remove(idx)
	if err != nil {
		return Snapshot{}, err
	}
	msg := fmt.Sprintf("saivage: snapshot of card %s's stopped rebase onto %s\n\nSaivage-Card: %s\nSaivage-Original: %s\nSaivage-Conflicts: %s\n",
		card, st.Current, card, st.Original, strings.Join(paths, " "))
	s, err := r.commitTree(ctx, tree, msg, q)
	if err != nil {
		return Snapshot{}, err
	}
	ref := r.SnapshotRef(card)
	old, err := r.revParse(ctx, ref)
	if err != nil {
		return Snapshot{}, err
	}
	if old == "" {
		old = zeroOID
	}
	if err := r.updateRef(ctx, ref, s, old, "saivage: snapshot "+card); err != nil {
		return Snapshot{}, err
	}
	r.step(StepSnapshotRef)
	return Snapshot{Card: card, Parent: st.Parent, Original: st.Original, Tip: st.Tip, Current: st.Current, Native: st.Native,
		Detached: q, Commit: s, Ref: ref, Tree: tree, Paths: paths}, nil
}

// ReturnSnapshot is the second invocation, once the caller has published
// the snapshot: it normalizes the real index, aborts the rebase once,
// restores the snapshot's files and checkpoints them onto the card's ref on
// top of the parent tip it was replayed onto, returning the new tuple.
func (r *Repo) ReturnSnapshot(ctx context.Context, snap Snapshot) (Tuple, error) {
	t, err := r.returnSnapshot(ctx, snap)
	if err != nil {
		return t, fmt.Errorf("return the snapshot of card %s: %w", snap.Card, err)
	}
	return t, nil
}

func (r *Repo) returnSnapshot(ctx context.Context, snap Snapshot) (Tuple, error) {
	if _, err := r.loadRebase(snap.Card); err != nil {
		return Tuple{}, err
	}
	if now, err := r.revParse(ctx, snap.Ref); err != nil || now != snap.Commit {
		return Tuple{}, fmt.Errorf("%s is no longer the published snapshot %s (%s, %v)", snap.Ref, short(snap.Commit), short(now), err)
	}
	if q, _, err := r.head(ctx); err != nil || q != snap.Detached {
		return Tuple{}, fmt.Errorf("HEAD moved from the stopped rebase's %s (%s, %v)", short(snap.Detached), short(q), err)
	}
	// Normalize: the real index becomes the snapshot (no conflict stages,
	// every eligible file tracked, so the abort's reset neither refuses nor
	// leaves strays), then abort exactly once.
	if _, err := r.run(ctx, Command{Args: []string{"read-tree", "--reset", string(snap.Tree)}}); err != nil {
		return Tuple{}, fmt.Errorf("normalize the real index: %w", err)
	}
	if _, err := r.run(ctx, Command{Args: []string{"rebase", "--abort"}}); err != nil {
		return Tuple{}, fmt.Errorf("abort the rebase: %w", err)
	}
	r.step(StepRebaseAborted)
	_ = os.Remove(r.rebaseStatePath())
	c, err := r.Lookup(ctx, snap.Card)
	if err != nil {
		return Tuple{}, err
	}
	if _, err := r.switchTree(ctx, Tuple{Commit: snap.Commit, Tree: snap.Tree}, ""); err != nil {
		return Tuple{}, fmt.Errorf("restore the snapshot's files: %w", err)
	}
	msg := fmt.Sprintf("saivage: card %s replayed onto %s with conflicts to resolve\n\nSaivage-Card: %s\nSaivage-Original: %s\nSaivage-Snapshot: %s\nSaivage-Conflicts: %s\n",
		snap.Card, snap.Current, snap.Card, snap.Original, snap.Commit, strings.Join(snap.Paths, " "))
	n, err := r.commitTree(ctx, snap.Tree, msg, snap.Current)
	if err != nil {
		return Tuple{}, err
	}
	if err := r.updateRef(ctx, c.Ref, n, c.Commit, "saivage: return snapshot "+snap.Card); err != nil {
		return Tuple{}, err
	}
	r.step(StepSnapshotReturn)
	t := Tuple{Ref: c.Ref, Commit: n, Tree: snap.Tree}
	if err := r.detachHead(ctx, n); err != nil {
		return t, err
	}
	return t, r.Verify(ctx, t)
}
