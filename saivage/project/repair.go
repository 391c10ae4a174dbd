package project

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
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
	prevSum        [32]byte
	curSum         [32]byte
}

// RepairReport is made before any effect: what admission refuses and the
// restorations that cure it, each proven on a copy of the state.
type RepairReport struct {
	Healthy    bool              `json:"healthy"`
	Candidates []RepairCandidate `json:"candidates"`
	// Unrepaired is the admission error no candidate cures ("" when none).
	Unrepaired string `json:"unrepaired,omitempty"`
}

// maxRepairSteps bounds the inspection: each step cures one selector.
const maxRepairSteps = 32

// InspectRepair admits the project read-only; for each refusal it looks
// for the selector of the damaged file (the file itself, or the head or
// index of its directory) whose immediate previous selector exists and,
// restored in a copy of the state, lets admission get past that damage.
// Nothing in the project is written. Work files are not copied.
func InspectRepair(ctx context.Context, opts Options) (RepairReport, error) {
	opts.fill()
	rep := RepairReport{Candidates: []RepairCandidate{}}
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
			rep.Healthy = len(rep.Candidates) == 0
			return rep, nil
		}
		problem := strings.ReplaceAll(err.Error(), sbState, stateDir)
		cand, ok := restoreCandidate(sbState, err.Error())
		if !ok {
			rep.Unrepaired = problem
			return rep, nil
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

// Repair applies the report's restorations under the project lock, after
// checking that neither selector changed since the inspection (byte
// absence of other changes), then admits the project.
func Repair(ctx context.Context, opts Options, rep RepairReport) error {
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
		if err := opts.Publisher.Replace(cur, pb); err != nil {
			return fmt.Errorf("repair %s: %w", c.Selector, err)
		}
	}
	p, err := Open(ctx, Options{Root: opts.Root, ConfigPath: opts.ConfigPath, LookupEnv: opts.LookupEnv, Publisher: opts.Publisher})
	if err != nil {
		return fmt.Errorf("repair: the project is still refused: %w", err)
	}
	return p.LogEvent("project_repaired", map[string]any{"author": "operator", "restored": len(rep.Candidates)})
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
