package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// sourceRepo is what the Supervisor needs of the native Git engine
// (*gitsource.Repo).
type sourceRepo interface {
	Lookup(ctx context.Context, card string) (gitsource.Tuple, error)
	Enter(ctx context.Context, opts gitsource.EnterOptions) (gitsource.Tuple, error)
	Check(ctx context.Context, want gitsource.Tuple) (gitsource.Observation, error)
	Checkpoint(ctx context.Context, opts gitsource.CheckpointOptions) (gitsource.Checkpoint, error)
	DeliverToParent(ctx context.Context, opts gitsource.DeliverOptions) (gitsource.Delivery, error)
	AdvanceParent(ctx context.Context, opts gitsource.AdvanceOptions) (gitsource.Delivery, error)
	DeliverToBranch(ctx context.Context, root string) (gitsource.Delivery, error)
	SnapshotRebase(ctx context.Context, card string) (gitsource.Snapshot, error)
	ReturnSnapshot(ctx context.Context, snap gitsource.Snapshot) (gitsource.Tuple, error)
	CheckDelivery(ctx context.Context) (gitsource.Qualification, error)
}

// source sequences the native Git workflow for the Supervisor: card entry
// from the parent's exact tuple, source readiness at results, review
// verification, delivery to the parent then the delivery branch, and
// failed-rebase preservation. It is nil when git_workflow is off.
type source struct {
	rt     *Runtime
	repo   sourceRepo
	policy *workflow.GitPolicy
	ops    sourceOps // orders source operations with urgent claims
}

// heldError is source that blocks execution; its text says why.
type heldError struct{ msg string }

func (e *heldError) Error() string { return "source held: " + e.msg }

// publish publishes a card's facts, read-modify-write.
func (s *source) publish(ctx context.Context, id string, edit func(f *cards.SourceFacts)) error {
	c, err := s.rt.p.Cards.Get(ctx, id)
	if err != nil {
		return err
	}
	var f cards.SourceFacts
	if c.Git != nil {
		f = *c.Git
	}
	edit(&f)
	if _, err := s.rt.p.Cards.PublishSourceFacts(ctx, id, &f); err != nil {
		return err
	}
	s.rt.hint("card", id)
	return nil
}

func setTuple(f *cards.SourceFacts, t gitsource.Tuple) {
	f.Ref, f.Tip, f.Tree = t.Ref, string(t.Commit), string(t.Tree)
	if f.Base == "" {
		f.Base = string(t.Commit)
	}
}

// enter selects a card's source before any provider admission: a child
// gets its private ref at the parent's exact tuple.
func (s *source) enter(ctx context.Context, c cards.Card) error {
	release, err := s.ops.acquire(ctx, "enter the source of "+c.ID)
	if err != nil {
		return err
	}
	defer release()
	t, err := s.repo.Enter(ctx, gitsource.EnterOptions{Card: c.ID, Parent: c.Parent})
	if err != nil {
		var dirty *gitsource.DirtyError
		if errors.As(err, &dirty) {
			return &heldError{fmt.Sprintf("card %s cannot enter its source: %v", c.ID, err)}
		}
		return fmt.Errorf("enter the source of %s: %w", c.ID, err)
	}
	s.rt.logEvent("source_entered", map[string]any{"card": c.ID, "commit": string(t.Commit)})
	return s.publish(ctx, c.ID, func(f *cards.SourceFacts) {
		setTuple(f, t)
		f.Held = ""
	})
}

// observe checks the checkout against the card's current tuple.
func (s *source) observe(ctx context.Context, card string) (gitsource.Tuple, gitsource.Observation, error) {
	t, err := s.repo.Lookup(ctx, card)
	if err != nil {
		return t, gitsource.Observation{}, err
	}
	obs, err := s.repo.Check(ctx, t)
	return t, obs, err
}

// describe explains an observation's differences.
func describe(obs gitsource.Observation) string {
	var parts []string
	if len(obs.WorktreeMismatch) > 0 {
		parts = append(parts, "changed files: "+strings.Join(obs.WorktreeMismatch, ", "))
	}
	if len(obs.Uncaptured) > 0 {
		parts = append(parts, "new files: "+strings.Join(obs.Uncaptured, ", "))
	}
	if len(obs.IndexMismatch) > 0 {
		parts = append(parts, "index entries that differ from the checkpoint (a hook or a git command rewrote the index): "+strings.Join(obs.IndexMismatch, ", "))
	}
	return strings.Join(parts, "; ")
}

// entryCheck runs before a node's provider admission: held or mismatched
// source blocks execution and says why.
func (s *source) entryCheck(ctx context.Context, act *activation, node string) (string, error) {
	t, obs, err := s.observe(ctx, act.card.ID)
	if err != nil {
		return "", err
	}
	if !obs.Clean() {
		reason := fmt.Sprintf("source held: the checkout differs from card %s's checkpoint %s before node %s (%s); nothing was run. Restore or checkpoint these paths, then run again.",
			act.card.ID, short(t.Commit), node, describe(obs))
		_ = s.publish(ctx, act.card.ID, func(f *cards.SourceFacts) { f.Held = reason })
		return reason, nil
	}
	if s.policy.Delivers(act.card.Type) && s.policy.Reviews[act.card.Type].Node == node {
		act.reviewEntry = t.Commit // the exact selection this review sees
	}
	return "", nil
}

// ready is source_ready at emit_result: the checkout must equal the
// card's last checkpoint; an approving review must see exactly the
// selection it entered with. A refusal is an ordinary correction.
func (s *source) ready(ctx context.Context, ne *nodeExec, tr workflow.Transition, outcome string) (string, error) {
	act := ne.act
	t, obs, err := s.observe(ctx, act.card.ID)
	if err != nil {
		return "", err
	}
	if !obs.Clean() {
		if slices.Contains(ne.nd.Tools, "checkpoint_source") {
			return fmt.Sprintf("source is not ready: the checkout differs from your last checkpoint (%s). Call checkpoint_source, then emit_result again.", describe(obs)), nil
		}
		return fmt.Sprintf("source is not ready: node %s does not change source, but the checkout differs from card %s's checkpoint (%s). Restore those paths, then emit_result again.", ne.nd.Name, act.card.ID, describe(obs)), nil
	}
	if ne.nd.Purpose == workflow.PurposeCorrection && outcome == "done" {
		if left := markers(s.rt.root(), act.conflicts); len(left) > 0 {
			return "conflict markers remain in " + strings.Join(left, ", ") + "; resolve them, call checkpoint_source, then emit_result again.", nil
		}
	}
	if s.policy.Approves(act.card.Type, ne.nd.Name, outcome, tr.CaseID) {
		if t.Commit != act.reviewEntry {
			return fmt.Sprintf("the source changed during the review (reviewed %s, now %s); review the current checkpoint", short(act.reviewEntry), short(t.Commit)), nil
		}
		act.reviewed = t.Commit
	}
	return "", nil
}

// CheckpointSource is checkpoint_source: capture and commit the card's
// source, then verify the checkout equals the new checkpoint (hooks run
// by the commit may have rewritten the index).
func (s *source) CheckpointSource(ctx context.Context, card, message string) (tools.SourceCheckpoint, error) {
	release, err := s.ops.acquire(ctx, "checkpoint_source")
	if err != nil {
		return tools.SourceCheckpoint{}, err
	}
	defer release()
	msg := ""
	if strings.TrimSpace(message) != "" {
		msg = fmt.Sprintf("saivage: checkpoint card %s: %s", card, strings.TrimSpace(message))
	}
	cp, err := s.repo.Checkpoint(ctx, gitsource.CheckpointOptions{Card: card, Message: msg})
	if err != nil {
		return tools.SourceCheckpoint{}, err
	}
	if err := s.publish(ctx, card, func(f *cards.SourceFacts) { setTuple(f, cp.After) }); err != nil {
		return tools.SourceCheckpoint{}, err
	}
	out := tools.SourceCheckpoint{Commit: string(cp.After.Commit), Changed: cp.Changed, Paths: cp.Paths}
	obs, err := s.repo.Check(ctx, cp.After)
	if err != nil {
		return out, err
	}
	if !obs.Clean() {
		s.rt.logEvent("source_hook_effect", map[string]any{"card": card, "commit": out.Commit, "paths": obs.Paths()})
		return out, fmt.Errorf("checkpointed %s, but the checkout no longer matches it: %s", short(cp.After.Commit), describe(obs))
	}
	s.rt.logEvent("source_checkpointed", map[string]any{"card": card, "commit": out.Commit, "changed": cp.Changed, "paths": cp.Paths})
	return out, nil
}

// settle runs before a card's terminal publication. DONE delivers:
// an approved card squashes onto its parent, a card of a type without a
// review binding passes its (already reviewed) source up unchanged, the
// root fast-forwards the delivery branch. Parent facts, then child facts,
// are published before the outcome. A conflict preserves the failed
// rebase and returns the correction to run (the card stays running).
func (s *source) settle(ctx context.Context, act *activation, res *nodeResult) (correct bool, err error) {
	release, err := s.ops.acquire(ctx, "settle the source of "+act.card.ID)
	if err != nil {
		return false, err
	}
	defer release()
	id, parent := act.card.ID, act.card.Parent
	if res.terminal != "DONE" {
		return false, s.returnToParent(ctx, act)
	}
	switch {
	case s.policy.Delivers(act.card.Type):
		if act.reviewed == "" {
			return false, s.block(ctx, act, res, fmt.Sprintf("card %s reached DONE without an approved review of its source; nothing was delivered", id))
		}
		d, err := s.repo.DeliverToParent(ctx, gitsource.DeliverOptions{Child: id, Parent: parent, Reviewed: act.reviewed, Title: act.card.Title})
		var conflict *gitsource.ConflictError
		if errors.As(err, &conflict) {
			return true, s.preserve(ctx, act, conflict)
		}
		if err != nil {
			return false, fmt.Errorf("deliver %s to %s: %w", id, parent, err)
		}
		return false, s.delivered(ctx, act, d)
	case id != cards.RootID:
		why, err := s.passUp(ctx, act)
		if err != nil || why == "" {
			return false, err
		}
		return false, s.block(ctx, act, res, why)
	default:
		d, err := s.repo.DeliverToBranch(ctx, id)
		if err != nil {
			return false, fmt.Errorf("deliver %s to the delivery branch %s: %w", id, s.policy.DeliveryBranch, err)
		}
		s.rt.logEvent("source_delivered", map[string]any{"card": id, "branch": s.policy.DeliveryBranch, "commit": string(d.Parent.Commit)})
		return false, s.publish(ctx, id, func(f *cards.SourceFacts) { f.Branch = string(d.Parent.Commit) })
	}
}

// block turns a DONE that cannot deliver into BLOCKED with the reason, as
// a gate block is (no promoted result, no exports), and returns the
// checkout to the parent.
func (s *source) block(ctx context.Context, act *activation, res *nodeResult, why string) error {
	*res = nodeResult{terminal: "BLOCKED", reason: why}
	return s.returnToParent(ctx, act)
}

// delivered publishes the parent's then the child's facts.
func (s *source) delivered(ctx context.Context, act *activation, d gitsource.Delivery) error {
	if err := s.publish(ctx, act.card.Parent, func(f *cards.SourceFacts) { setTuple(f, d.Parent) }); err != nil {
		return err
	}
	commit := d.Commit
	if commit == "" {
		commit = d.Parent.Commit // a no-change squash leaves the parent commit unchanged
	}
	s.rt.logEvent("source_delivered", map[string]any{"card": act.card.ID, "parent": act.card.Parent, "commit": string(commit), "resumed": d.Resumed})
	return s.publish(ctx, act.card.ID, func(f *cards.SourceFacts) {
		f.Delivered = string(commit)
		f.Correction = nil
		f.Held = ""
	})
}

// passUp delivers a card without a review binding: its source holds only
// its children's reviewed deliveries, so the parent's ref fast-forwards to
// its tip (gitsource.AdvanceParent) when the parent is still where the card
// started, and receives one squash commit naming the card when the parent
// moved meanwhile. Own unreviewed changes hold the source. A squash that
// conflicts with the parent's newer source moves nothing: the card's work
// stays on its ref, the reason is published as held and returned, and the
// card ends BLOCKED with it (no correction runs: the card type has no
// review binding, so a correction's result could never be reviewed).
func (s *source) passUp(ctx context.Context, act *activation) (blocked string, err error) {
	id, parent := act.card.ID, act.card.Parent
	_, obs, err := s.observe(ctx, id)
	if err != nil {
		return "", err
	}
	if !obs.Clean() {
		return "", &heldError{fmt.Sprintf("card %s holds unreviewed source changes (%s); only %s cards deliver source", id, describe(obs), strings.Join(s.bound(), ", "))}
	}
	c, err := s.rt.p.Cards.Get(ctx, id)
	if err != nil {
		return "", err
	}
	d, err := s.repo.AdvanceParent(ctx, gitsource.AdvanceOptions{Child: id, Parent: parent, Base: gitsource.OID(c.Git.Base),
		Squash: true, Title: act.card.Title})
	var nf *gitsource.NotFastForwardError
	var sc *gitsource.SquashConflictError
	switch {
	case errors.As(err, &sc):
		why := fmt.Sprintf("source held: %v. The reviewed work stays on card %s's private ref and %s is unchanged; %s cards have no review binding, so no correction runs: re-plan the conflicting work against %s's current source",
			sc, id, parent, act.card.Type, parent)
		return why, s.markHeld(ctx, id, why)
	case errors.As(err, &nf):
		why := "source held: " + nf.Error()
		return why, s.markHeld(ctx, id, why)
	case err != nil:
		return "", fmt.Errorf("deliver %s to %s: %w", id, parent, err)
	}
	if d.Squashed {
		s.rt.logEvent("source_squashed", map[string]any{"card": id, "parent": parent, "base": c.Git.Base, "commit": string(d.Commit)})
	}
	return "", s.delivered(ctx, act, d)
}

// markHeld logs and publishes why a card's source is held.
func (s *source) markHeld(ctx context.Context, id, why string) error {
	s.rt.logEvent("source_held", map[string]any{"card": id, "reason": why})
	return s.publish(ctx, id, func(f *cards.SourceFacts) { f.Held = why })
}

func (s *source) bound() []string {
	var out []string
	for ct := range s.policy.Reviews {
		out = append(out, ct)
	}
	slices.Sort(out)
	return out
}

// returnToParent keeps the work of a card that did not finish DONE on
// its private ref (checkpointed, never lost, never delivered) and selects
// the parent's exact tuple in the checkout again. Source that cannot be
// kept that way (a card type that does not deliver, a hook that keeps
// rewriting the index) stays in the checkout and is held, saying why; the
// parent's next source check then blocks.
func (s *source) returnToParent(ctx context.Context, act *activation) error {
	id := act.card.ID
	if id == cards.RootID {
		return nil
	}
	hold := func(why string) error { return s.markHeld(ctx, id, why) }
	_, obs, err := s.observe(ctx, id)
	if err != nil {
		return err
	}
	if !obs.Clean() {
		if !s.policy.Delivers(act.card.Type) {
			return hold(fmt.Sprintf("card %s left unreviewed changes in the checkout (%s); only %s cards change source", id, describe(obs), strings.Join(s.bound(), ", ")))
		}
		cp, err := s.repo.Checkpoint(ctx, gitsource.CheckpointOptions{Card: id, Message: "saivage: keep unfinished work of card " + id})
		if err != nil {
			return hold(fmt.Sprintf("keeping the unfinished source of %s failed: %v", id, err))
		}
		if err := s.publish(ctx, id, func(f *cards.SourceFacts) { setTuple(f, cp.After) }); err != nil {
			return err
		}
	}
	if _, err := s.repo.Enter(ctx, gitsource.EnterOptions{Card: act.card.Parent, Parent: cards.ParentOf(act.card.Parent)}); err != nil {
		var dirty *gitsource.DirtyError
		if errors.As(err, &dirty) {
			return hold(fmt.Sprintf("the checkout cannot return from %s to %s: %v", id, act.card.Parent, err))
		}
		return fmt.Errorf("return the checkout from %s to %s: %w", id, act.card.Parent, err)
	}
	return nil
}

// preserve keeps a failed rebase: snapshot (first invocation), publish
// the snapshot's provenance, then return it onto the parent tip (second
// invocation) and publish the new tip. The card continues with the
// correction node, whose done result returns to the review.
func (s *source) preserve(ctx context.Context, act *activation, conflict *gitsource.ConflictError) error {
	id := act.card.ID
	snap, err := s.repo.SnapshotRebase(ctx, id)
	if err != nil {
		return fmt.Errorf("preserve the failed rebase of %s: %w", id, err)
	}
	node := s.policy.Reviews[act.card.Type].Node
	reason := fmt.Sprintf("delivering %s onto %s's newer source stopped on conflicts in %s", id, act.card.Parent, strings.Join(conflict.Paths, ", "))
	corr := &cards.SourceCorrection{Original: string(snap.Original), Current: string(snap.Current), Native: string(snap.Native),
		Detached: string(snap.Detached), Snapshot: string(snap.Commit), Paths: slices.Clone(snap.Paths), Node: node, Reason: reason}
	c, err := s.rt.p.Cards.Get(ctx, id)
	if err != nil {
		return err
	}
	if prev := c.Git.Correction; prev != nil {
		corr.Original = prev.Original // the original replay history survives repeated interruptions
	}
	if err := s.publish(ctx, id, func(f *cards.SourceFacts) { f.Correction = corr }); err != nil {
		return err
	}
	t, err := s.repo.ReturnSnapshot(ctx, snap)
	if err != nil {
		_ = s.publish(ctx, id, func(f *cards.SourceFacts) { f.Held = "returning the preserved rebase failed: " + err.Error() })
		return fmt.Errorf("return the preserved rebase of %s: %w", id, err)
	}
	if err := s.publish(ctx, id, func(f *cards.SourceFacts) { setTuple(f, t); f.Base = string(snap.Current) }); err != nil {
		return err
	}
	act.reviewed, act.returnTo, act.correction, act.conflicts = "", node, reason, slices.Clone(snap.Paths)
	s.rt.logEvent("source_conflict_preserved", map[string]any{"card": id, "paths": snap.Paths, "snapshot": string(snap.Commit), "original": corr.Original, "current": corr.Current})
	return nil
}

func short(o gitsource.OID) string {
	if len(o) > 12 {
		return string(o[:12])
	}
	return string(o)
}

// corrected runs when the correction node finished done: the rewritten
// tip (verified clean at its emit_result) is published and the preserved
// provenance is settled before the card returns to its saved entry.
func (s *source) corrected(ctx context.Context, act *activation) error {
	t, err := s.repo.Lookup(ctx, act.card.ID)
	if err != nil {
		return err
	}
	act.correction, act.conflicts = "", nil
	s.rt.logEvent("source_corrected", map[string]any{"card": act.card.ID, "commit": string(t.Commit), "return_to": act.returnTo})
	return s.publish(ctx, act.card.ID, func(f *cards.SourceFacts) {
		setTuple(f, t)
		f.Correction, f.Held = nil, ""
	})
}

// markers returns the paths that still hold a conflict marker line.
func markers(root string, paths []string) []string {
	var out []string
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || line == "=======" || strings.HasPrefix(line, ">>>>>>> ") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
