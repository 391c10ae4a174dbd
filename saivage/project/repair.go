package project

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/state"
)

// RepairCandidate is one selector restoration repair proposes: the
// previous selector (name.prev.json) becomes current again, as a whole.
type RepairCandidate struct {
	// Selector is the current selector's path relative to .saivage.
	Selector string `json:"selector"`
	// Problem is the admission error the restoration cures.
	Problem string `json:"problem"`
	// CurrentMissing says the current selector is absent.
	CurrentMissing bool `json:"current_missing,omitempty"`
	// TornTail is the torn tail of the segment a restored session index
	// makes current again: truncated right after the index is published.
	TornTail *TailCut `json:"torn_tail,omitempty"`
	prevSum  [32]byte
	curSum   [32]byte
}

// TailCut is a torn (incomplete) tail of a current stream that repair
// reports before any effect and truncates as part of a restoration.
type TailCut struct {
	// Segment is the stream's path relative to .saivage.
	Segment string `json:"segment"`
	// Bytes is the length of the torn tail.
	Bytes int `json:"bytes"`
}

// RepairDiscard is the separate discard repair proposes for a non-root
// card whose selection is unusable now and before (no previous selector
// cures it): the card's own roots move to a fresh attic and a FAILED
// placeholder authored runtime:repair takes its place under its parent.
// It loses the card's records, sessions and mailbox, so it needs its own
// consent (--discard).
type RepairDiscard struct {
	Card   string `json:"card"`
	Parent string `json:"parent"`
	// Type is proven by the parent: its type permits only this child type.
	Type    string `json:"type"`
	Problem string `json:"problem"`
	// Roots are the card's own entries that move to the attic.
	Roots   []string `json:"roots"`
	headSum [32]byte
}

// RepairReport is made before any effect: what admission refuses and the
// restorations that cure it, each proven on a copy of the state.
type RepairReport struct {
	Healthy    bool              `json:"healthy"`
	Candidates []RepairCandidate `json:"candidates"`
	// Discards need the separate loss consent.
	Discards []RepairDiscard `json:"discards"`
	// Unrepaired is the admission error no candidate cures ("" when none).
	Unrepaired string `json:"unrepaired,omitempty"`
}

// RepairAttic is the directory under .saivage where discards keep what
// they moved away, one fresh directory per repair (reset keeps it).
const RepairAttic = "repair-attic"

// maxRepairSteps bounds the inspection: each step cures one selector.
const maxRepairSteps = 32

// InspectRepair admits the project read-only; for each refusal it looks
// for the selector of the damaged file (the file itself, or the head or
// index of its directory) whose immediate previous selector exists and,
// restored in a copy of the state, lets admission get past that damage.
// Nothing in the project is written. Work files are not copied.
func InspectRepair(ctx context.Context, opts Options) (RepairReport, error) {
	opts.fill()
	rep := RepairReport{Candidates: []RepairCandidate{}, Discards: []RepairDiscard{}}
	stateDir := filepath.Join(opts.Root, config.StateDir)
	sandbox, err := os.MkdirTemp("", "saivage-repair-")
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	defer os.RemoveAll(sandbox)
	sbState := filepath.Join(sandbox, config.StateDir)
	if err := copyState(stateDir, sbState); err != nil {
		return rep, fmt.Errorf("repair: copy the state for inspection: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(sbState, "work"), 0o755); err != nil {
		return rep, err
	}
	sbOpts := Options{Root: sandbox, ConfigPath: filepath.Join(sbState, strings.TrimPrefix(opts.ConfigPath, stateDir)), LookupEnv: opts.LookupEnv, ReadOnly: true}
	if !strings.HasPrefix(opts.ConfigPath, stateDir+string(filepath.Separator)) {
		sbOpts.ConfigPath = opts.ConfigPath
	}
	for range maxRepairSteps {
		_, err := Open(ctx, sbOpts)
		if err == nil {
			rep.Healthy = len(rep.Candidates) == 0 && len(rep.Discards) == 0
			return rep, nil
		}
		problem := strings.ReplaceAll(err.Error(), sbState, stateDir)
		cand, ok := restoreCandidate(sbState, err.Error())
		if !ok {
			d, why := discardCandidate(ctx, sbOpts, sbState, err.Error())
			if why != "" {
				rep.Unrepaired = problem + " (" + why + ")"
				return rep, nil
			}
			d.Problem = problem
			if err := applyDiscard(ctx, sbOpts, d, filepath.Join(sandbox, "attic")); err != nil {
				return rep, fmt.Errorf("repair: try the discard of %s: %w", d.Card, err)
			}
			if _, err2 := Open(ctx, sbOpts); err2 != nil && strings.ReplaceAll(err2.Error(), sbState, stateDir) == problem {
				rep.Unrepaired = problem + " (discarding " + d.Card + " does not cure it)"
				return rep, nil
			}
			rep.Discards = append(rep.Discards, d)
			continue
		}
		cand.Problem = problem
		cur, prev := filepath.Join(sbState, cand.Selector), filepath.Join(sbState, state.PrevName(cand.Selector))
		pb, err := os.ReadFile(prev)
		if err != nil {
			return rep, err
		}
		cb, _ := os.ReadFile(cur)
		cand.prevSum, cand.curSum = sha256.Sum256(pb), sha256.Sum256(cb)
		if err := os.WriteFile(cur, pb, 0o644); err != nil {
			return rep, err
		}
		// The same damage must be gone, or the candidate does not cure it.
		if _, err2 := Open(ctx, sbOpts); err2 != nil && strings.ReplaceAll(err2.Error(), sbState, stateDir) == problem {
			rep.Unrepaired = problem + " (the previous selector " + state.PrevName(cand.Selector) + " does not cure it)"
			return rep, nil
		}
		if cand.TornTail, err = currentTail(opts.Publisher, sbState, cand.Selector, state.TailIgnore, nil); err != nil {
			rep.Unrepaired = problem + " (the restored index's current segment is unreadable: " + strings.ReplaceAll(err.Error(), sbState, stateDir) + ")"
			return rep, nil
		}
		rep.Candidates = append(rep.Candidates, cand)
	}
	rep.Unrepaired = "too many damaged selectors; inspect the project by hand"
	return rep, nil
}

// restoreCandidate finds the selector to restore for an admission error:
// the named path's own selector or the head.json/index.json of the named
// file's directory or the one above, whose previous selector exists and
// differs from the current bytes.
func restoreCandidate(stateDir, msg string) (RepairCandidate, bool) {
	i := strings.Index(msg, stateDir+string(filepath.Separator))
	if i < 0 {
		return RepairCandidate{}, false
	}
	path := msg[i:]
	if j := strings.IndexAny(path, ": \n"); j >= 0 {
		path = path[:j]
	}
	var tries []string
	if b := filepath.Base(path); b == "head.json" || b == "index.json" {
		tries = append(tries, path)
	}
	for d, n := filepath.Dir(path), 0; n < 3 && strings.HasPrefix(d, stateDir+string(filepath.Separator)); d, n = filepath.Dir(d), n+1 {
		tries = append(tries, filepath.Join(d, "head.json"), filepath.Join(d, "index.json"))
	}
	for _, sel := range tries {
		pb, err := os.ReadFile(filepath.Join(filepath.Dir(sel), state.PrevName(filepath.Base(sel))))
		if err != nil {
			continue
		}
		cb, cerr := os.ReadFile(sel)
		if cerr == nil && bytes.Equal(cb, pb) {
			continue
		}
		rel, _ := filepath.Rel(stateDir, sel)
		return RepairCandidate{Selector: rel, CurrentMissing: errors.Is(cerr, fs.ErrNotExist)}, true
	}
	return RepairCandidate{}, false
}

// discardCandidate decides whether the damage named by msg is a non-root
// card's unusable selection that the separate discard may cure, and
// proves the card's place: its parent admits, lists it as a child at the
// right depth, and permits exactly one child type. It returns why not
// otherwise. Damage inside the card's records or sessions alone never
// qualifies.
func discardCandidate(ctx context.Context, sbOpts Options, sbState, msg string) (RepairDiscard, string) {
	cardsDir := filepath.Join(sbState, "cards") + string(filepath.Separator)
	i := strings.Index(msg, cardsDir)
	if i < 0 {
		return RepairDiscard{}, "no previous selector cures it and it is not a card's selection"
	}
	rel := msg[i+len(cardsDir):]
	if j := strings.IndexAny(rel, ": \n"); j >= 0 {
		rel = rel[:j]
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	id := parts[0]
	if len(parts) < 2 || (parts[1] != "head.json" && parts[1] != "history") {
		return RepairDiscard{}, "no previous selector cures it; only an unusable card selection may be discarded, not damage in its records or sessions"
	}
	if id == cards.RootID || cards.ParentOf(id) == "" {
		return RepairDiscard{}, "no previous selector cures it and the root card is never discarded"
	}
	_, set, err := Compile(ctx, sbOpts)
	if err != nil {
		return RepairDiscard{}, "the configuration does not compile: " + err.Error()
	}
	store := cards.New(cards.Options{StateDir: sbState, Publisher: state.New(state.Options{}), Workflows: set})
	parentID := cards.ParentOf(id)
	parent, err := store.Get(ctx, parentID)
	if err != nil {
		return RepairDiscard{}, "the parent " + parentID + " cannot prove the card's place: " + err.Error()
	}
	ptbl, ok := set.Table(parent.Type)
	switch types := ptbl.PermittedChildTypes(); {
	case !slices.Contains(parent.Children, id) || parent.Tombstoned():
		return RepairDiscard{}, "the parent " + parentID + " does not list " + id + " as a child"
	case cards.DepthOf(id) != parent.Depth+1 || cards.DepthOf(id) > cards.MaxDepth:
		return RepairDiscard{}, "the depth of " + id + " does not follow its parent's"
	case !ok || len(types) != 1:
		return RepairDiscard{}, "the type of " + id + " cannot be proven: its parent's type permits " + strings.Join(types, ", ")
	default:
		d := RepairDiscard{Card: id, Parent: parentID, Type: types[0], Roots: []string{}}
		dir := store.CardDir(id)
		for _, r := range cards.OwnRoots {
			if _, err := os.Lstat(filepath.Join(dir, r)); err == nil {
				d.Roots = append(d.Roots, r)
			}
		}
		head, _ := os.ReadFile(filepath.Join(dir, "head.json"))
		d.headSum = sha256.Sum256(head)
		return d, ""
	}
}

// applyDiscard moves the card's own roots to a fresh directory under
// attic (created exclusively) and publishes the placeholder.
func applyDiscard(ctx context.Context, opts Options, d RepairDiscard, attic string) error {
	_, set, err := Compile(ctx, opts)
	if err != nil {
		return err
	}
	stateDir := filepath.Join(opts.Root, config.StateDir)
	pub := opts.Publisher
	if pub == nil || opts.ReadOnly {
		pub = state.New(state.Options{SkipSync: true}) // the inspection's copy
	}
	dst := filepath.Join(attic, "cards", d.Card)
	for _, dir := range []string{attic, filepath.Dir(dst)} {
		if err := pub.Mkdir(dir, false); err != nil {
			return err
		}
	}
	if err := pub.Mkdir(dst, true); err != nil {
		return err
	}
	store := cards.New(cards.Options{StateDir: stateDir, Publisher: pub, Workflows: set, Now: opts.Now})
	for _, r := range d.Roots {
		if err := pub.Move(filepath.Join(store.CardDir(d.Card), r), filepath.Join(dst, r)); err != nil {
			return err
		}
	}
	_, err = store.PublishRepairPlaceholder(d.Card, d.Parent, d.Type)
	return err
}

// Repair applies the report's restorations under the project lock, after
// checking that neither selector changed since the inspection (byte
// absence of other changes), then its discards when discard (the
// separate loss consent) is set, then admits the project. A report with
// discards and no consent changes nothing.
func Repair(ctx context.Context, opts Options, rep RepairReport, discard bool) error {
	if len(rep.Discards) > 0 && !discard {
		return fmt.Errorf("repair refused: %d card(s) can only be discarded (see the report), which loses their records and sessions; give the separate consent --discard to apply it; nothing was changed", len(rep.Discards))
	}
	opts.fill()
	stateDir := filepath.Join(opts.Root, config.StateDir)
	lk, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: opts.Publisher, Now: opts.Now})
	if err != nil {
		return fmt.Errorf("repair refused: %w", err)
	}
	defer func() {
		if !opts.Publisher.Stopped() {
			_ = lk.Release()
		}
	}()
	for _, c := range rep.Candidates {
		cur := filepath.Join(stateDir, c.Selector)
		pb, err := os.ReadFile(filepath.Join(filepath.Dir(cur), state.PrevName(filepath.Base(cur))))
		if err != nil {
			return fmt.Errorf("repair %s: %w", c.Selector, err)
		}
		cb, _ := os.ReadFile(cur)
		if sha256.Sum256(pb) != c.prevSum || sha256.Sum256(cb) != c.curSum {
			return fmt.Errorf("repair %s: the selector changed since the inspection; nothing more was changed, inspect again", c.Selector)
		}
		if c.TornTail != nil {
			// The index is published first, then its now-current
			// segment loses exactly the reported torn tail.
			seen, err := currentTail(opts.Publisher, stateDir, c.Selector, state.TailIgnore, pb)
			if err != nil || seen == nil || *seen != *c.TornTail {
				return fmt.Errorf("repair %s: the torn tail of its current segment changed since the inspection (%v); nothing more was changed, inspect again", c.Selector, err)
			}
		}
		if err := opts.Publisher.Replace(cur, pb); err != nil {
			return fmt.Errorf("repair %s: %w", c.Selector, err)
		}
		if c.TornTail != nil {
			if _, err := currentTail(opts.Publisher, stateDir, c.Selector, state.TailTruncate, nil); err != nil {
				return fmt.Errorf("repair %s: truncate the torn tail of .saivage/%s: %w", c.Selector, c.TornTail.Segment, err)
			}
		}
	}
	var attic string
	for _, d := range rep.Discards {
		dir := filepath.Join(stateDir, "cards", d.Card)
		head, _ := os.ReadFile(filepath.Join(dir, "head.json"))
		var roots []string
		for _, r := range cards.OwnRoots {
			if _, err := os.Lstat(filepath.Join(dir, r)); err == nil {
				roots = append(roots, r)
			}
		}
		if sha256.Sum256(head) != d.headSum || !slices.Equal(roots, d.Roots) {
			return fmt.Errorf("repair: card %s changed since the inspection; inspect again", d.Card)
		}
		if attic == "" {
			if err := opts.Publisher.Mkdir(filepath.Join(stateDir, RepairAttic), false); err != nil {
				return fmt.Errorf("repair: %w", err)
			}
			attic = filepath.Join(stateDir, RepairAttic, opts.Now().UTC().Format("20060102T150405Z")+"-"+state.NewUUID()[:8])
		}
		if err := applyDiscard(ctx, opts, d, attic); err != nil {
			return fmt.Errorf("repair: discard %s: %w", d.Card, err)
		}
	}
	p, err := Open(ctx, Options{Root: opts.Root, ConfigPath: opts.ConfigPath, LookupEnv: opts.LookupEnv, Publisher: opts.Publisher})
	if err != nil {
		return fmt.Errorf("repair: the project is still refused: %w", err)
	}
	discarded := []string{}
	for _, d := range rep.Discards {
		discarded = append(discarded, d.Card)
	}
	return p.LogEvent("project_repaired", map[string]any{"author": "operator", "restored": len(rep.Candidates), "discarded": discarded, "attic": attic})
}

// currentTail returns the torn tail of the current segment a session index
// selects (nil: the selector is not a session index, or no tail is torn).
// index is the index's bytes (nil: read the selector); tail is how the
// segment is read: TailIgnore only looks, TailTruncate cuts the tail.
func currentTail(pub *state.Publisher, stateDir, selector string, tail state.TailPolicy, index []byte) (*TailCut, error) {
	if filepath.Base(selector) != "index.json" {
		return nil, nil
	}
	dir := filepath.Join(stateDir, filepath.Dir(selector))
	if index == nil {
		var err error
		if index, err = os.ReadFile(filepath.Join(dir, "index.json")); err != nil {
			return nil, err
		}
	}
	var idx conversations.Index
	if err := json.Unmarshal(index, &idx); err != nil || idx.Session == "" || len(idx.Segments) == 0 {
		return nil, nil // not a session index, or no segment yet
	}
	seg := filepath.Join(dir, "versions", strconv.Itoa(idx.Segments[len(idx.Segments)-1].N)+".jsonl")
	res, err := pub.ReadJSONL(seg, state.ReadOptions{Versions: []int{conversations.SegmentFormat}, Tail: tail})
	if err != nil {
		return nil, err
	}
	if res.Truncated == 0 {
		return nil, nil
	}
	rel, _ := filepath.Rel(stateDir, seg)
	return &TailCut{Segment: rel, Bytes: res.Truncated}, nil
}

// copyState copies .saivage without work/ and locks/ for inspection.
func copyState(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && (rel == "work" || rel == "locks") {
			return fs.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o600)
		}
		return nil
	})
}
