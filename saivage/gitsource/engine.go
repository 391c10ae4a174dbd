package gitsource

import (
	"context"
	"errors"
)

var errNotImplemented = errors.New("gitsource: not implemented yet")

// CardRef is the private ref of a card: Namespace/cards/<card>.
func (r *Repo) CardRef(card string) string { return r.ns + "/cards/" + card }

// SnapshotRef is the ref holding a card's preserved failed rebase.
func (r *Repo) SnapshotRef(card string) string { return r.ns + "/snapshots/" + card }

// OriginalRef holds the child tip first replayed when a card's rebase was
// first interrupted; it survives repeated interruptions until delivery.
func (r *Repo) OriginalRef(card string) string { return r.ns + "/original/" + card }

// CheckDelivery verifies that HEAD is attached to the delivery branch and the
// checkout (index and files) matches its tip exactly; a dirty checkout is a
// *DirtyError naming the paths. Reset preflights with it.
func (r *Repo) CheckDelivery(ctx context.Context) (Qualification, error) {
	return Qualification{}, errNotImplemented
}

// Qualify is commissioning's first step: a clean explicit delivery branch
// (CheckDelivery) and the root's private ref proven absent. It writes
// nothing.
func (r *Repo) Qualify(ctx context.Context, root string) (Qualification, error) {
	return Qualification{}, errNotImplemented
}

// Commission reconsumes the qualification (the branch still at the same tip,
// the checkout still clean, the root ref still absent), creates only the
// root's private ref at the branch tip and verifies the checkout unchanged.
func (r *Repo) Commission(ctx context.Context, root string, q Qualification) (Tuple, error) {
	return Tuple{}, errNotImplemented
}

// Lookup reads a card's tuple from its private ref.
func (r *Repo) Lookup(ctx context.Context, card string) (Tuple, error) {
	return Tuple{}, errNotImplemented
}

// Enter selects a card's source in the checkout: a child without a ref gets
// one at its parent's exact tuple; the checkout's index and files are then
// switched to the card's tip and HEAD detached there. The checkout must be
// clean relative to its current selection. Enter is idempotent.
func (r *Repo) Enter(ctx context.Context, opts EnterOptions) (Tuple, error) {
	return Tuple{}, errNotImplemented
}

// Check is the synchronous read-only source check of the checkout against
// want: real index entries against the tree, file bytes, executable modes
// and symlink targets against blob hashes, and untracked files. All of its
// Git queries share one QueryDeadline; none writes the index or objects.
// Refused repository state is an *UnsupportedError.
func (r *Repo) Check(ctx context.Context, want Tuple) (Observation, error) {
	return Observation{}, errNotImplemented
}

// Verify is Check that turns a mismatch into a *DirtyError.
func (r *Repo) Verify(ctx context.Context, want Tuple) error {
	return errNotImplemented
}

// Capture writes the checkout's files into a tree through a private index
// started from the card's exact tuple: tracked files, modes and symlinks;
// new files that are not ignored; tracked files even when now ignored;
// excluded paths and GeneratedDir left as they are in the tuple. It changes
// neither the real index nor any ref.
func (r *Repo) Capture(ctx context.Context, card string) (Capture, error) {
	return Capture{}, errNotImplemented
}

// Checkpoint captures the selected card and commits the capture onto its
// ref with a message naming the card (through git commit, so the
// repository's commit hooks run; their effects are seen by the next Check).
// Nothing changed: no commit, the ref stays.
func (r *Repo) Checkpoint(ctx context.Context, opts CheckpointOptions) (Checkpoint, error) {
	return Checkpoint{}, errNotImplemented
}

// DeliverToParent squashes the reviewed child onto the parent's ref (one
// commit naming the child; none when the change is empty), then selects the
// parent in the checkout and verifies files, index and refs. A parent that
// advanced since the child started is merged; conflicts run the native
// rebase, leave it stopped and return a *ConflictError. It is idempotent: a
// rerun after a crash finishes the remaining steps and never squashes twice.
func (r *Repo) DeliverToParent(ctx context.Context, opts DeliverOptions) (Delivery, error) {
	return Delivery{}, errNotImplemented
}

// DeliverToBranch fast-forwards the delivery branch to the root's ref (old
// value checked), updates the checkout's real index and files, attaches HEAD
// to the branch and verifies that nothing is left uncommitted. Idempotent.
func (r *Repo) DeliverToBranch(ctx context.Context, root string) (Delivery, error) {
	return Delivery{}, errNotImplemented
}

// Inspect reports, read-only, how far a delivery got (for recovery after a
// crash: rerunning DeliverToParent/DeliverToBranch resumes it).
func (r *Repo) Inspect(ctx context.Context, opts DeliverOptions) (DeliveryState, error) {
	return DeliveryState{}, errNotImplemented
}

// SnapshotRebase is the first preservation invocation: with a native rebase
// stopped on conflicts, it captures the checkout's eligible files into a
// snapshot commit on SnapshotRef without changing the real index.
func (r *Repo) SnapshotRebase(ctx context.Context, card string) (Snapshot, error) {
	return Snapshot{}, errNotImplemented
}

// ReturnSnapshot is the second invocation, once the caller has published
// the snapshot: it normalizes the real index, aborts the rebase once,
// restores the snapshot's files and checkpoints them onto the card's ref on
// top of the parent tip it was replayed onto, returning the new tuple.
func (r *Repo) ReturnSnapshot(ctx context.Context, snap Snapshot) (Tuple, error) {
	return Tuple{}, errNotImplemented
}
