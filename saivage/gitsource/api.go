// Package gitsource is Saivage's native Git engine: it commissions a
// checkout's delivery branch, gives every card a private ref starting from its
// parent's exact source tuple, captures the working tree into checkpoints
// through a private index, delivers reviewed changes to the parent (squash)
// and to the delivery branch, preserves failed rebases, and answers
// read-only source checks without writing the index. Every Git argv runs in
// its own managed process group (package procgroup).
package gitsource

import (
	"time"
)

// MinGitVersion is the oldest Git this engine runs against (merge-tree
// --write-tree appeared in 2.38). Open refuses older Git with a clear error.
const MinGitVersion = "2.38.0"

// DefaultNamespace is the private ref namespace when Options leaves it empty.
const DefaultNamespace = "refs/saivage"

// QueryDeadline is the one remaining deadline a synchronous read-only source
// check shares across all of its Git queries.
const QueryDeadline = 5 * time.Second

// GeneratedDir is Saivage's generated state directory; it is never captured
// or delivered, whatever ExcludedPaths says.
const GeneratedDir = ".saivage"

// OID is a Git object id (40 hex digits, SHA-1 repositories only).
type OID string

// Tuple is a card's exact source selection: its private ref and the commit
// and tree the ref pointed at when the tuple was read.
type Tuple struct {
	Ref    string `json:"ref"`
	Commit OID    `json:"commit"`
	Tree   OID    `json:"tree"`
}

// Identity is the author and committer of the commits the engine writes.
// Empty fields leave Git's own configuration in charge.
type Identity struct {
	Name, Email string
}

// Options configures a Repo.
type Options struct {
	// Dir is the root of the checkout (the working tree).
	Dir string
	// Git is the git binary (default "git", looked up in PATH).
	Git string
	// Namespace is the private ref namespace (default DefaultNamespace); card
	// refs are Namespace+"/cards/"+card.
	Namespace string
	// DeliveryBranch is the explicit branch D the work is delivered to
	// (short name, e.g. "main"). Required.
	DeliveryBranch string
	// ExcludedPaths are repository-relative paths (files or directories,
	// slash-separated) never captured or delivered; GeneratedDir is always
	// excluded.
	ExcludedPaths []string
	// WorkDir holds the engine's private indexes (default:
	// <git dir>/saivage). It must not be inside the working tree unless it
	// is under an excluded path.
	WorkDir string
	// Identity signs the engine's commits.
	Identity Identity
	// Environ is the base environment of Git children (default
	// os.Environ); GIT_* variables from it are dropped so that no outer Git
	// context leaks in.
	Environ func() []string
	// QueryDeadline overrides the synchronous check deadline (default
	// QueryDeadline).
	QueryDeadline time.Duration
	// AfterStep, when set, is called after each durable step of a mutating
	// operation (for progress and crash-recovery tests).
	AfterStep func(Step)
}

// Step names a durable step of a mutating operation.
type Step string

// Durable steps, in the order a delivery takes them.
const (
	StepCommissionRef  Step = "commission-ref"  // the root's private ref was created
	StepEnterRef       Step = "enter-ref"       // a child's private ref was created at its parent's tuple
	StepSelectTree     Step = "select-tree"     // the checkout's index and files were switched
	StepSelectHead     Step = "select-head"     // HEAD was moved to the selection
	StepCheckpointRef  Step = "checkpoint-ref"  // a card's ref moved to its new checkpoint
	StepSquashParent   Step = "squash-parent"   // the parent's ref received the squash commit
	StepAdvanceParent  Step = "advance-parent"  // the parent's ref fast-forwarded to the child's tip
	StepBranchRef      Step = "branch-ref"      // the delivery branch moved (old-value checked)
	StepSnapshotRef    Step = "snapshot-ref"    // a failed rebase's snapshot ref was written
	StepRebaseAborted  Step = "rebase-aborted"  // the stopped rebase was aborted
	StepSnapshotReturn Step = "snapshot-return" // the snapshot was checkpointed onto the card
)

// Qualification is the result of qualifying a checkout for commissioning:
// the delivery branch's exact tip and the root ref proven absent.
type Qualification struct {
	Branch  string `json:"branch"` // refs/heads/<D>
	Commit  OID    `json:"commit"`
	Tree    OID    `json:"tree"`
	RootRef string `json:"root_ref"`
}

// Observation is what a read-only source check found.
type Observation struct {
	// Head is the commit HEAD names; HeadRef is the branch when HEAD is
	// attached ("" when detached).
	Head    OID    `json:"head"`
	HeadRef string `json:"head_ref,omitempty"`
	// IndexMismatch lists paths whose real index entry (mode, object,
	// stage) differs from the selected tree.
	IndexMismatch []string `json:"index_mismatch,omitempty"`
	// WorktreeMismatch lists paths whose file bytes, executable mode or
	// symlink target differ from the selected tree, or that are missing.
	WorktreeMismatch []string `json:"worktree_mismatch,omitempty"`
	// Uncaptured lists untracked, not ignored, not excluded files.
	Uncaptured []string `json:"uncaptured,omitempty"`
}

// Clean reports whether the checkout matches the selection exactly.
func (o Observation) Clean() bool {
	return len(o.IndexMismatch) == 0 && len(o.WorktreeMismatch) == 0 && len(o.Uncaptured) == 0
}

// Paths is every path the observation names, sorted, without duplicates.
func (o Observation) Paths() []string {
	return sortedUnique(o.IndexMismatch, o.WorktreeMismatch, o.Uncaptured)
}

// Capture is a captured working tree: the tree written through a private
// index, starting from the card's exact tuple.
type Capture struct {
	Base    Tuple    `json:"base"`
	Tree    OID      `json:"tree"`
	Changed []string `json:"changed,omitempty"` // added, modified or removed paths
}

// CheckpointOptions names the card to checkpoint.
type CheckpointOptions struct {
	Card string
	// Message is the commit message; default "saivage: checkpoint card <card>".
	Message string
}

// Checkpoint is the result of checkpointing a card.
type Checkpoint struct {
	Before Tuple `json:"before"`
	After  Tuple `json:"after"`
	// Changed is false when nothing changed (the ref did not move).
	Changed bool     `json:"changed"`
	Paths   []string `json:"paths,omitempty"`
}

// EnterOptions selects a card's source in the checkout.
type EnterOptions struct {
	Card string
	// Parent is the parent card whose exact tuple a new child ref starts
	// from; empty for the root (whose ref commissioning created).
	Parent string
}

// DeliverOptions delivers a reviewed child to its parent.
type DeliverOptions struct {
	Child, Parent string
	// Reviewed is the exact child commit the Reviewer approved; delivery
	// refuses any other tip.
	Reviewed OID
	// Title names the card in the squash commit message
	// ("<Title> (card <Child>)"); default the card id.
	Title string
}

// AdvanceOptions passes a child's source up to a parent of a type
// without review (a goal whose task children delivered into it): the
// parent's ref fast-forwards to the child's tip, unchanged.
type AdvanceOptions struct {
	Child, Parent string
	// Base is the parent commit the child started from; the parent must
	// still be there (old value checked) and the child must descend from it.
	Base OID
	// Squash, when the parent moved away from Base meanwhile, squashes the
	// child's changes onto the parent's tip (one commit naming the child,
	// as DeliverToParent does) instead of refusing.
	Squash bool
	// Title names the child in a squash commit ("card <id>" when empty).
	Title string
}

// Delivery is the result of a delivery step.
type Delivery struct {
	// Parent is the parent's tuple after delivery (the delivery branch's for
	// DeliverToBranch).
	Parent Tuple `json:"parent"`
	// Commit is the squash commit ("" when the change was already empty:
	// a no-change squash leaves the parent commit unchanged).
	Commit OID `json:"commit,omitempty"`
	// Resumed is true when an earlier, interrupted run had already taken
	// some of the steps.
	Resumed bool `json:"resumed"`
	// Squashed is true when AdvanceParent squashed because the parent had
	// moved (Commit is then the squash commit).
	Squashed bool `json:"squashed,omitempty"`
}

// DeliveryState is what Inspect found about a delivery.
type DeliveryState struct {
	ChildTip OID `json:"child_tip"`
	// InParent is the parent's commit carrying the reviewed change ("" if
	// none yet).
	InParent OID `json:"in_parent,omitempty"`
	// InBranch is true when the delivery branch contains InParent.
	InBranch bool `json:"in_branch"`
	// Selected is the card whose tip the checkout's HEAD names ("" when none).
	Selected string `json:"selected,omitempty"`
	// RebaseInProgress is true when a native rebase is stopped in the checkout.
	RebaseInProgress bool `json:"rebase_in_progress"`
}

// Snapshot is a preserved failed rebase (first invocation's result). The
// four selections stay distinct: Original is the child tip first being
// replayed (kept across repeated interruptions), Current the parent tip it
// was replayed onto (Tip is the card tip this replay started from, which
// differs from Original after a repeated interruption), Native the checkout's HEAD when the native rebase
// started, Detached the detached HEAD the stopped rebase left.
type Snapshot struct {
	Card     string `json:"card"`
	Parent   string `json:"parent"`
	Original OID    `json:"original"`
	Tip      OID    `json:"tip"` // the card tip this replay started from

	Current  OID      `json:"current"`
	Native   OID      `json:"native"`
	Detached OID      `json:"detached"`
	Commit   OID      `json:"commit"` // the snapshot commit on SnapshotRef
	Ref      string   `json:"ref"`
	Tree     OID      `json:"tree"`
	Paths    []string `json:"paths"` // conflicted paths
}
