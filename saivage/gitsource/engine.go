package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CardRef is the private ref of a card: Namespace/cards/<card>.
func (r *Repo) CardRef(card string) string { return r.ns + "/cards/" + card }

// SnapshotRef is the ref holding a card's preserved failed rebase.
func (r *Repo) SnapshotRef(card string) string { return r.ns + "/snapshots/" + card }

// OriginalRef holds the child tip first replayed when a card's rebase was
// first interrupted; it survives repeated interruptions.
func (r *Repo) OriginalRef(card string) string { return r.ns + "/original/" + card }

// Branch is the delivery branch's full ref name (refs/heads/<D>).
func (r *Repo) Branch() string { return r.branch }

// CheckDelivery verifies that HEAD is attached to the delivery branch and the
// checkout (index and files) matches its tip exactly; a dirty checkout is a
// *DirtyError naming the paths. Reset preflights with it.
func (r *Repo) CheckDelivery(ctx context.Context) (Qualification, error) {
	if r.rebaseInProgress() {
		return Qualification{}, &RebaseInProgressError{}
	}
	_, headRef, err := r.head(ctx)
	if err != nil {
		return Qualification{}, err
	}
	if headRef != r.branch {
		if headRef == "" {
			headRef = "a detached HEAD"
		}
		return Qualification{}, fmt.Errorf("check delivery branch: the checkout is on %s, not on the delivery branch %s", headRef, r.branch)
	}
	t, err := r.tuple(ctx, r.branch)
	if err != nil {
		return Qualification{}, fmt.Errorf("check delivery branch: %w", err)
	}
	obs, err := r.Check(ctx, t)
	if err != nil {
		return Qualification{}, err
	}
	if !obs.Clean() {
		return Qualification{}, &DirtyError{What: "delivery branch " + r.opts.DeliveryBranch, Observation: obs}
	}
	return Qualification{Branch: r.branch, Commit: t.Commit, Tree: t.Tree}, nil
}

// Qualify is commissioning's first step: a clean explicit delivery branch
// (CheckDelivery) and the root's private ref proven absent. It writes
// nothing.
func (r *Repo) Qualify(ctx context.Context, root string) (Qualification, error) {
	q, err := r.CheckDelivery(ctx)
	if err != nil {
		return q, fmt.Errorf("qualify commissioning: %w", err)
	}
	q.RootRef = r.CardRef(root)
	c, err := r.revParse(ctx, q.RootRef)
	if err != nil {
		return q, fmt.Errorf("qualify commissioning: %w", err)
	}
	if c != "" {
		return q, &RefExistsError{Ref: q.RootRef, Commit: c}
	}
	return q, nil
}

// Commission reconsumes the qualification (the branch still at the same tip,
// the checkout still clean, the root ref still absent), creates only the
// root's private ref at the branch tip and verifies the checkout unchanged.
func (r *Repo) Commission(ctx context.Context, root string, q Qualification) (Tuple, error) {
	now, err := r.Qualify(ctx, root)
	if err != nil {
		return Tuple{}, err
	}
	if now.Commit != q.Commit || now.RootRef != q.RootRef {
		return Tuple{}, fmt.Errorf("commission: delivery branch moved since qualification (%s, now %s)", short(q.Commit), short(now.Commit))
	}
	if err := r.updateRef(ctx, q.RootRef, q.Commit, zeroOID, "saivage: commission root "+root); err != nil {
		return Tuple{}, fmt.Errorf("commission: %w", err)
	}
	r.step(StepCommissionRef)
	after, err := r.CheckDelivery(ctx)
	if err != nil {
		return Tuple{}, fmt.Errorf("commission: verify the checkout unchanged: %w", err)
	}
	if after.Commit != q.Commit {
		return Tuple{}, fmt.Errorf("commission: delivery branch moved during commissioning (%s, now %s)", short(q.Commit), short(after.Commit))
	}
	return Tuple{Ref: q.RootRef, Commit: q.Commit, Tree: q.Tree}, nil
}

// Lookup reads a card's tuple from its private ref.
func (r *Repo) Lookup(ctx context.Context, card string) (Tuple, error) {
	t, err := r.tuple(ctx, r.CardRef(card))
	if err != nil {
		return t, fmt.Errorf("card %s: %w", card, err)
	}
	return t, nil
}

// Enter selects a card's source in the checkout: a child without a ref gets
// one at its parent's exact tuple; the checkout's index and files are then
// switched to the card's tip and HEAD detached there. The checkout must be
// clean relative to its current selection. Enter is idempotent, and it
// finishes a checkpoint a crash interrupted after the card's ref moved
// (HEAD still at the checkpoint's parent, the files already the
// checkpoint's); any other dirt is a *DirtyError.
func (r *Repo) Enter(ctx context.Context, opts EnterOptions) (Tuple, error) {
	t, err := r.enter(ctx, opts)
	if err != nil {
		return t, fmt.Errorf("enter card %s: %w", opts.Card, err)
	}
	return t, nil
}

func (r *Repo) enter(ctx context.Context, opts EnterOptions) (Tuple, error) {
	if r.rebaseInProgress() {
		return Tuple{}, &RebaseInProgressError{}
	}
	ref := r.CardRef(opts.Card)
	t, err := r.tuple(ctx, ref)
	if errors.Is(err, errNoRef) {
		if opts.Parent == "" {
			return t, fmt.Errorf("no private ref %s and no parent to start it from", ref)
		}
		p, perr := r.Lookup(ctx, opts.Parent)
		if perr != nil {
			return t, perr
		}
		if err := r.updateRef(ctx, ref, p.Commit, zeroOID, "saivage: enter "+opts.Card+" from "+opts.Parent); err != nil {
			return t, err
		}
		r.step(StepEnterRef)
		t, err = Tuple{Ref: ref, Commit: p.Commit, Tree: p.Tree}, nil
	}
	if err != nil {
		return t, err
	}
	if _, err := r.switchTree(ctx, t, ""); err != nil {
		var dirty *DirtyError
		if !errors.As(err, &dirty) {
			return t, err
		}
		finished, ferr := r.finishCheckpoint(ctx)
		if ferr != nil {
			return t, fmt.Errorf("%w (finishing an interrupted checkpoint: %v)", err, ferr)
		}
		if !finished {
			return t, err
		}
		if _, err := r.switchTree(ctx, t, ""); err != nil {
			return t, err
		}
	}
	return t, r.detachHead(ctx, t.Commit)
}

// finishCheckpoint completes a checkpoint that a crash interrupted after
// the card's ref moved (StepCheckpointRef) but before the checkout selected
// it: HEAD is detached at the checkpoint's parent (or already at the
// checkpoint), the real index still holds one of the two trees and the
// files equal the checkpoint's tree exactly. It then moves HEAD to the
// checkpoint and reads its tree into the real index. Any other state is
// left alone (false), so the caller's refusal stands.
func (r *Repo) finishCheckpoint(ctx context.Context) (bool, error) {
	head, headRef, err := r.head(ctx)
	if err != nil || headRef != "" {
		return false, err
	}
	out, err := r.run(ctx, Command{Args: []string{"for-each-ref", "--format=%(objectname)%09%(parent)%09%(refname)", r.ns + "/cards/"}})
	if err != nil {
		return false, fmt.Errorf("list card refs: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || strings.Contains(f[1], " ") {
			continue // not a card ref, or a merge: checkpoints have one parent
		}
		c, p, ref := OID(f[0]), OID(f[1]), f[2]
		if head != p && head != c {
			continue
		}
		card := strings.TrimPrefix(ref, r.ns+"/cards/")
		ok, err := r.isCheckpointOf(ctx, c, card)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		ct, err := r.tuple(ctx, ref)
		if err != nil {
			return false, err
		}
		pt, err := r.tuple(ctx, string(p))
		if err != nil {
			return false, err
		}
		if ok, err := r.holdsCheckpoint(ctx, ct, pt); err != nil || !ok {
			return false, err
		}
		if head != c {
			if err := r.updateRef(ctx, "HEAD", c, p, "saivage: finish checkpoint "+card); err != nil {
				return false, err
			}
			r.step(StepSelectHead)
		}
		if _, err := r.run(ctx, Command{Args: []string{"read-tree", string(ct.Tree)}}); err != nil {
			return false, fmt.Errorf("finish checkpoint of card %s: update the real index: %w", card, err)
		}
		r.step(StepSelectTree)
		return true, nil
	}
	return false, nil
}

// isCheckpointOf reports whether commit c is a checkpoint of card (its
// message carries the card's trailer and no delivery trailer).
func (r *Repo) isCheckpointOf(ctx context.Context, c OID, card string) (bool, error) {
	out, err := r.run(ctx, Command{Args: []string{"cat-file", "commit", string(c)}})
	if err != nil {
		return false, fmt.Errorf("read commit %s: %w", short(c), err)
	}
	msg := string(out.Stdout)
	return strings.Contains(msg, "\nSaivage-Card: "+card+"\n") && !strings.Contains(msg, "\nSaivage-Reviewed: "), nil
}

// holdsCheckpoint reports whether the checkout is exactly an interrupted
// checkpoint c of parent p: the real index holds p's or c's tree, every
// file of c's tree is on disk with its bytes and mode, files c removed are
// gone, and no untracked file lies outside c's tree (excluded paths aside).
func (r *Repo) holdsCheckpoint(ctx context.Context, c, p Tuple) (bool, error) {
	qctx, cancel := r.queryContext(ctx)
	defer cancel()
	ct, err := r.lsTree(qctx, c.Tree)
	if err != nil {
		return false, err
	}
	pt, err := r.lsTree(qctx, p.Tree)
	if err != nil {
		return false, err
	}
	index, err := r.lsIndex(qctx, "")
	if err != nil {
		return false, err
	}
	if !indexHolds(index, pt) && !indexHolds(index, ct) {
		return false, nil
	}
	for path, e := range ct {
		if r.isExcluded(path) {
			continue
		}
		mode, oid, err := r.fileBlob(path)
		if err != nil {
			return false, err
		}
		if mode != e.mode || oid != e.oid {
			return false, nil
		}
	}
	for path := range pt {
		if _, kept := ct[path]; kept || r.isExcluded(path) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(path))); err == nil {
			return false, nil
		}
	}
	others, err := r.others(qctx, "")
	if err != nil {
		return false, err
	}
	for _, path := range others {
		if _, ok := ct[path]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// indexHolds reports whether an index holds exactly tree (stage 0 only).
func indexHolds(index map[string][]entry, tree map[string]entry) bool {
	if len(index) != len(tree) {
		return false
	}
	for path, es := range index {
		e, ok := tree[path]
		if !ok || len(es) != 1 || es[0].stage != 0 || es[0].mode != e.mode || es[0].oid != e.oid {
			return false
		}
	}
	return true
}

// switchTree makes the checkout's real index and files hold target's tree
// and reports whether it had to change them. Unless they already hold it
// (verified: the tree the caller has just verified the checkout against),
// the checkout must match HEAD exactly and no untracked (even ignored) file
// may stand where target puts a file.
func (r *Repo) switchTree(ctx context.Context, target Tuple, verified OID) (bool, error) {
	if verified != "" && verified == target.Tree {
		return false, nil
	}
	obs, err := r.Check(ctx, target)
	if err != nil {
		return false, err
	}
	if obs.Clean() {
		return false, nil
	}
	cur, err := r.headTuple(ctx)
	if err != nil {
		return false, err
	}
	if err := r.Verify(ctx, cur); err != nil {
		var d *DirtyError
		if errors.As(err, &d) {
			d.What = "the checkout's current selection " + describe(cur)
		}
		return false, err
	}
	qctx, cancel := r.queryContext(ctx)
	defer cancel()
	from, err := r.lsTree(qctx, cur.Tree)
	if err != nil {
		return false, err
	}
	to, err := r.lsTree(qctx, target.Tree)
	if err != nil {
		return false, err
	}
	var obstructed []string
	for p := range to {
		if _, ok := from[p]; ok {
			continue
		}
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); err == nil {
			obstructed = append(obstructed, p)
		}
	}
	if len(obstructed) > 0 {
		return false, &DirtyError{What: "untracked files in the way of " + describe(target), Observation: Observation{Uncaptured: sortedUnique(obstructed)}}
	}
	// Refresh the stat data so that read-tree sees the verified files as up
	// to date, then switch with a two-way merge that only touches what
	// differs.
	if _, _, err := r.runCode(ctx, Command{Args: []string{"update-index", "-q", "--refresh"}}); err != nil {
		return false, err
	}
	if _, err := r.run(ctx, Command{Args: []string{"read-tree", "-m", "-u", string(cur.Tree), string(target.Tree)}}); err != nil {
		return false, fmt.Errorf("switch the checkout to %s: %w", describe(target), err)
	}
	r.step(StepSelectTree)
	return true, nil
}

// detachHead points HEAD, detached, at c.
func (r *Repo) detachHead(ctx context.Context, c OID) error {
	head, headRef, err := r.head(ctx)
	if err != nil {
		return err
	}
	if head == c && headRef == "" {
		return nil
	}
	if _, err := r.run(ctx, Command{Args: []string{"update-ref", "--no-deref", "-m", "saivage: select", "HEAD", string(c), string(head)}}); err != nil {
		return fmt.Errorf("detach HEAD at %s: %w", short(c), err)
	}
	r.step(StepSelectHead)
	return nil
}

// findDelivered returns the commit on parent's first-parent history that
// carries the reviewed child commit ("" when none does).
func (r *Repo) findDelivered(ctx context.Context, parent, reviewed OID) (OID, error) {
	out, err := r.run(ctx, Command{Args: []string{"log", "--first-parent", "-n1", "--format=%H", "-F",
		"--grep=Saivage-Reviewed: " + string(reviewed), string(parent), "--"}})
	if err != nil {
		return "", fmt.Errorf("search the parent's history: %w", err)
	}
	return OID(strings.TrimSpace(string(out.Stdout))), nil
}

// DeliverToParent squashes the reviewed child onto the parent's ref (one
// commit naming the child; none when the change is empty), then selects the
// parent in the checkout and verifies files, index and refs. A parent that
// advanced since the child started is merged; conflicts run the native
// rebase, leave it stopped and return a *ConflictError. It is idempotent: a
// rerun after a crash finishes the remaining steps and never squashes twice.
func (r *Repo) DeliverToParent(ctx context.Context, opts DeliverOptions) (Delivery, error) {
	d, err := r.deliverToParent(ctx, opts)
	if err != nil {
		return d, fmt.Errorf("deliver card %s to %s: %w", opts.Child, opts.Parent, err)
	}
	return d, nil
}

func (r *Repo) deliverToParent(ctx context.Context, opts DeliverOptions) (Delivery, error) {
	var d Delivery
	if opts.Reviewed == "" {
		return d, errors.New("no reviewed commit given")
	}
	c, p, err := r.lookupDelivery(ctx, opts.Child, opts.Parent)
	if err != nil {
		return d, err
	}
	done, err := r.findDelivered(ctx, p.Commit, opts.Reviewed)
	if err != nil {
		return d, err
	}
	if done != "" { // an interrupted run squashed already
		d.Resumed, d.Commit = true, done
		return d, r.settleParent(ctx, p, &d, "")
	}
	if c.Commit != opts.Reviewed {
		return d, &UnreviewedError{Card: opts.Child, Reviewed: opts.Reviewed, Tip: c.Commit}
	}
	cur, err := r.headTuple(ctx)
	if err != nil {
		return d, err
	}
	if err := r.Verify(ctx, cur); err != nil { // later dirt refuses
		return d, err
	}
	base, err := r.run(ctx, Command{Args: []string{"merge-base", string(p.Commit), string(c.Commit)}})
	if err != nil {
		return d, fmt.Errorf("find where the child started: %w", err)
	}
	tree := c.Tree
	if OID(strings.TrimSpace(string(base.Stdout))) != p.Commit {
		var conflicts []string
		if tree, conflicts, err = r.mergeTrees(ctx, p.Commit, c.Commit); err != nil {
			return d, err
		}
		if conflicts != nil {
			return d, r.startRebase(ctx, opts, c, p, OID(strings.TrimSpace(string(base.Stdout))))
		}
	}
	if err := r.squash(ctx, &p, &d, tree, opts.Child, opts.Title, opts.Reviewed); err != nil {
		return d, err
	}
	return d, r.settleParent(ctx, p, &d, cur.Tree)
}

// mergeTrees merges two commits' trees without touching the checkout
// (git merge-tree --write-tree, merge base found by Git). A conflict
// returns the conflicted paths (non-nil) and no tree.
func (r *Repo) mergeTrees(ctx context.Context, ours, theirs OID) (OID, []string, error) {
	cmd := Command{Args: []string{"merge-tree", "--write-tree", "-z", "--name-only", string(ours), string(theirs)}}
	out, res, err := r.runCode(ctx, cmd)
	switch {
	case err != nil:
		return "", nil, err
	case res.ExitCode == 1:
		// <tree> NUL <path> NUL ... NUL NUL <messages>
		files, _, _ := strings.Cut(string(out.Stdout), "\x00\x00")
		names := strings.Split(files, "\x00")[1:]
		return "", sortedUnique(append([]string{}, names...)), nil
	case res.ExitCode != 0:
		return "", nil, r.commandError(cmd, out, res)
	}
	return OID(strings.SplitN(string(out.Stdout), "\x00", 2)[0]), nil, nil
}

// squash commits tree onto the parent's ref as one commit naming the child
// (its trailers let a rerun find it) and moves *p to it; a tree equal to
// the parent's writes nothing (d.Commit stays "").
func (r *Repo) squash(ctx context.Context, p *Tuple, d *Delivery, tree OID, child, title string, reviewed OID) error {
	if tree == p.Tree {
		return nil
	}
	if title == "" {
		title = "card " + child
	}
	msg := fmt.Sprintf("%s (card %s)\n\nSaivage-Card: %s\nSaivage-Reviewed: %s\n", title, child, child, reviewed)
	s, err := r.commitTree(ctx, tree, msg, p.Commit)
	if err != nil {
		return err
	}
	if err := r.updateRef(ctx, p.Ref, s, p.Commit, "saivage: deliver "+child); err != nil {
		return err
	}
	r.step(StepSquashParent)
	d.Commit, *p = s, Tuple{Ref: p.Ref, Commit: s, Tree: tree}
	return nil
}

// AdvanceParent passes a child's source up to a parent that is not
// reviewed (its children's squashes are already reviewed): when the
// parent's tip is still the child's base and the child descends from it,
// the parent's ref fast-forwards to the child's tip (old value checked),
// the parent is selected in the checkout and verified, as DeliverToParent
// does. When the parent moved away from Base meanwhile and opts.Squash is
// set, the child's changes are squashed onto the parent's tip instead (as
// DeliverToParent does, Delivery.Squashed), and a conflict refuses with a
// *SquashConflictError naming the paths (no native rebase, nothing moves).
// Otherwise it refuses with a *NotFastForwardError and moves nothing. The
// checkout must match its current selection. Idempotent: a parent already
// at the child's tip, or holding its squash, is only selected.
func (r *Repo) AdvanceParent(ctx context.Context, opts AdvanceOptions) (Delivery, error) {
	d, err := r.advanceParent(ctx, opts)
	if err != nil {
		return d, fmt.Errorf("advance %s to card %s: %w", opts.Parent, opts.Child, err)
	}
	return d, nil
}

func (r *Repo) advanceParent(ctx context.Context, opts AdvanceOptions) (Delivery, error) {
	var d Delivery
	if opts.Base == "" {
		return d, errors.New("no base commit given")
	}
	c, p, err := r.lookupDelivery(ctx, opts.Child, opts.Parent)
	if err != nil {
		return d, err
	}
	// An interrupted run may have moved the ref and switched the checkout
	// already: settling checks the checkout against the parent first, then
	// against HEAD (later dirt refuses either way).
	if p.Commit == c.Commit { // nothing new, or an interrupted run moved the ref
		d.Resumed = p.Commit != opts.Base
		return d, r.settleParent(ctx, p, &d, "")
	}
	if opts.Squash && p.Commit != opts.Base { // an interrupted fallback squashed already
		done, err := r.findDelivered(ctx, p.Commit, c.Commit)
		if err != nil {
			return d, err
		}
		if done != "" {
			d.Resumed, d.Squashed, d.Commit = true, true, done
			return d, r.settleParent(ctx, p, &d, "")
		}
	}
	cur, err := r.headTuple(ctx)
	if err != nil {
		return d, err
	}
	if err := r.Verify(ctx, cur); err != nil { // later dirt refuses
		return d, err
	}
	refuse := &NotFastForwardError{Child: opts.Child, Parent: opts.Parent, Base: opts.Base, ParentTip: p.Commit, ChildTip: c.Commit}
	if _, res, err := r.runCode(ctx, Command{Args: []string{"merge-base", "--is-ancestor", string(opts.Base), string(c.Commit)}}); err != nil {
		return d, err
	} else if res.ExitCode != 0 {
		refuse.Unrelated = true
		return d, refuse
	}
	if p.Commit != opts.Base {
		if !opts.Squash {
			return d, refuse
		}
		// The parent moved meanwhile: squash the child's changes onto its
		// tip instead, unless they conflict (then nothing moves).
		tree, conflicts, err := r.mergeTrees(ctx, p.Commit, c.Commit)
		if err != nil {
			return d, err
		}
		if conflicts != nil {
			return d, &SquashConflictError{NotFastForwardError: *refuse, Paths: conflicts}
		}
		if err := r.squash(ctx, &p, &d, tree, opts.Child, opts.Title, c.Commit); err != nil {
			return d, err
		}
		d.Squashed = true
		return d, r.settleParent(ctx, p, &d, cur.Tree)
	}
	if err := r.updateRef(ctx, p.Ref, c.Commit, p.Commit, "saivage: advance to "+opts.Child); err != nil {
		return d, err
	}
	r.step(StepAdvanceParent)
	d.Commit, p = c.Commit, Tuple{Ref: p.Ref, Commit: c.Commit, Tree: c.Tree}
	return d, r.settleParent(ctx, p, &d, cur.Tree)
}

// lookupDelivery reads a delivery's child and parent tuples; a stopped
// rebase refuses any delivery.
func (r *Repo) lookupDelivery(ctx context.Context, child, parent string) (c, p Tuple, err error) {
	if r.rebaseInProgress() {
		return c, p, &RebaseInProgressError{}
	}
	if c, err = r.Lookup(ctx, child); err != nil {
		return c, p, err
	}
	p, err = r.Lookup(ctx, parent)
	return c, p, err
}

// settleParent selects the parent in the checkout and verifies files,
// index and refs (verified: the tree the checkout was just found to match).
func (r *Repo) settleParent(ctx context.Context, p Tuple, d *Delivery, verified OID) error {
	now, err := r.tuple(ctx, p.Ref)
	if err != nil {
		return err
	}
	if now.Commit != p.Commit {
		return fmt.Errorf("%s moved to %s during delivery", p.Ref, short(now.Commit))
	}
	switched, err := r.switchTree(ctx, p, verified)
	if err != nil {
		return err
	}
	if err := r.detachHead(ctx, p.Commit); err != nil {
		return err
	}
	d.Parent = p
	if !switched { // the checkout was found to match p in this call
		return nil
	}
	return r.Verify(ctx, p)
}

// DeliverToBranch fast-forwards the delivery branch to the root's ref (old
// value checked), updates the checkout's real index and files, attaches HEAD
// to the branch and verifies that nothing is left uncommitted. Idempotent.
func (r *Repo) DeliverToBranch(ctx context.Context, root string) (Delivery, error) {
	d, err := r.deliverToBranch(ctx, root)
	if err != nil {
		return d, fmt.Errorf("deliver root %s to %s: %w", root, r.branch, err)
	}
	return d, nil
}

func (r *Repo) deliverToBranch(ctx context.Context, root string) (Delivery, error) {
	var d Delivery
	if r.rebaseInProgress() {
		return d, &RebaseInProgressError{}
	}
	rt, err := r.Lookup(ctx, root)
	if err != nil {
		return d, err
	}
	old, err := r.revParse(ctx, r.branch)
	if err != nil || old == "" {
		return d, fmt.Errorf("read the delivery branch: %v", err)
	}
	if old == rt.Commit {
		d.Resumed = true
	} else if _, res, err := r.runCode(ctx, Command{Args: []string{"merge-base", "--is-ancestor", string(old), string(rt.Commit)}}); err != nil {
		return d, err
	} else if res.ExitCode != 0 {
		return d, fmt.Errorf("the delivery branch moved outside Saivage: %s is not an ancestor of %s", short(old), describe(rt))
	}
	target := Tuple{Ref: r.branch, Commit: rt.Commit, Tree: rt.Tree}
	switched, err := r.switchTree(ctx, target, "")
	if err != nil {
		return d, err
	}
	if old != rt.Commit {
		if err := r.updateRef(ctx, r.branch, rt.Commit, old, "saivage: deliver "+root); err != nil {
			return d, err
		}
		r.step(StepBranchRef)
		d.Commit = rt.Commit
	}
	if _, headRef, err := r.head(ctx); err != nil {
		return d, err
	} else if headRef != r.branch {
		if _, err := r.run(ctx, Command{Args: []string{"symbolic-ref", "-m", "saivage: deliver", "HEAD", r.branch}}); err != nil {
			return d, fmt.Errorf("attach HEAD to %s: %w", r.branch, err)
		}
		r.step(StepSelectHead)
	}
	d.Parent = target
	if !switched { // the checkout was found to match the branch tip above
		return d, nil
	}
	if _, err := r.CheckDelivery(ctx); err != nil {
		return d, fmt.Errorf("verify delivery: %w", err)
	}
	return d, nil
}

// Inspect reports, read-only, how far a delivery got (for recovery after a
// crash: rerunning DeliverToParent/DeliverToBranch resumes it).
func (r *Repo) Inspect(ctx context.Context, opts DeliverOptions) (DeliveryState, error) {
	var st DeliveryState
	qctx, cancel := r.queryContext(ctx)
	defer cancel()
	c, err := r.Lookup(qctx, opts.Child)
	if err != nil {
		return st, fmt.Errorf("inspect delivery: %w", err)
	}
	p, err := r.Lookup(qctx, opts.Parent)
	if err != nil {
		return st, fmt.Errorf("inspect delivery: %w", err)
	}
	st.ChildTip, st.RebaseInProgress = c.Commit, r.rebaseInProgress()
	if st.InParent, err = r.findDelivered(qctx, p.Commit, opts.Reviewed); err != nil {
		return st, fmt.Errorf("inspect delivery: %w", err)
	}
	if st.InParent != "" {
		_, res, err := r.runCode(qctx, Command{Args: []string{"merge-base", "--is-ancestor", string(st.InParent), r.branch}})
		if err != nil {
			return st, fmt.Errorf("inspect delivery: %w", err)
		}
		st.InBranch = res.ExitCode == 0
	}
	head, headRef, err := r.head(qctx)
	if err != nil {
		return st, fmt.Errorf("inspect delivery: %w", err)
	}
	if headRef == "" {
		out, err := r.run(qctx, Command{Args: []string{"for-each-ref", "--format=%(refname)", "--points-at", string(head), r.ns + "/cards/"}})
		if err != nil {
			return st, fmt.Errorf("inspect delivery: %w", err)
		}
		for _, ref := range strings.Fields(string(out.Stdout)) {
			st.Selected = strings.TrimPrefix(ref, r.ns+"/cards/")
			if st.Selected == opts.Child || st.Selected == opts.Parent {
				break
			}
		}
	}
	return st, nil
}
