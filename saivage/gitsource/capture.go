package gitsource

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// captureSpec says what to capture: the tree the private index starts from
// and the real index whose members are candidates too.
type captureSpec struct {
	name string // private index name in WorkDir
	base OID    // tree the private index starts from
}

// captureTree writes the checkout's eligible files into a tree through a
// private index started from base. Candidates are the base tree's paths, the
// real index's paths (so tracked-now-ignored source is kept) and untracked
// files that are not ignored; excluded paths keep their base entries. It
// returns the tree, the changed paths and the private index file.
func (r *Repo) captureTree(ctx context.Context, spec captureSpec) (OID, []string, string, error) {
	idx := filepath.Join(r.workDir, "index-"+spec.name)
	_ = os.Remove(idx)
	if _, err := r.run(ctx, Command{Args: []string{"read-tree", string(spec.base)}, IndexFile: idx}); err != nil {
		return "", nil, idx, fmt.Errorf("start private index from %s: %w", short(spec.base), err)
	}
	base, err := r.lsTree(ctx, spec.base)
	if err != nil {
		return "", nil, idx, err
	}
	real, err := r.lsIndex(ctx, "")
	if err != nil {
		return "", nil, idx, err
	}
	others, err := r.others(ctx, idx)
	if err != nil {
		return "", nil, idx, err
	}
	cands := make([]string, 0, len(base)+len(others))
	for p, e := range base {
		if e.mode == "160000" {
			return "", nil, idx, &UnsupportedError{Feature: "submodule", Detail: p}
		}
		cands = append(cands, p)
	}
	for p := range real {
		if _, ok := base[p]; !ok {
			cands = append(cands, p)
		}
	}
	cands = append(cands, others...)
	slices.Sort(cands)
	cands = slices.Compact(cands)
	if err := r.transformAttrs(ctx, cands); err != nil {
		return "", nil, idx, err
	}
	var changed []string
	var in bytes.Buffer
	for _, p := range cands {
		if r.isExcluded(p) {
			continue
		}
		mode, oid, err := r.fileBlob(p)
		if err != nil {
			return "", nil, idx, err
		}
		b, inBase := base[p]
		switch {
		case mode == "" && !inBase:
			continue // gone, or a directory: a container, not a leaf
		case inBase && mode == b.mode && oid == b.oid:
			continue
		}
		changed = append(changed, p)
		in.WriteString(p)
		in.WriteByte(0)
	}
	if len(changed) > 0 {
		// update-index hashes and writes the blobs itself, records modes
		// and symlinks, and removes paths whose files are gone.
		if _, err := r.run(ctx, Command{Args: []string{"update-index", "--add", "--remove", "--replace", "-z", "--stdin"},
			IndexFile: idx, Stdin: in.Bytes(), HasStdin: true}); err != nil {
			return "", nil, idx, fmt.Errorf("capture %d changed paths: %w", len(changed), err)
		}
	}
	tree, err := r.writeTree(ctx, idx)
	if err != nil {
		return "", nil, idx, err
	}
	return tree, changed, idx, nil
}

func (r *Repo) writeTree(ctx context.Context, idx string) (OID, error) {
	out, err := r.run(ctx, Command{Args: []string{"write-tree"}, IndexFile: idx})
	if err != nil {
		return "", fmt.Errorf("write captured tree: %w", err)
	}
	return OID(strings.TrimSpace(string(out.Stdout))), nil
}

// commitTree writes a commit object.
func (r *Repo) commitTree(ctx context.Context, tree OID, msg string, parents ...OID) (OID, error) {
	args := []string{"commit-tree", string(tree)}
	for _, p := range parents {
		args = append(args, "-p", string(p))
	}
	out, err := r.run(ctx, Command{Args: args, Stdin: []byte(msg), HasStdin: true})
	if err != nil {
		return "", fmt.Errorf("write commit: %w", err)
	}
	return OID(strings.TrimSpace(string(out.Stdout))), nil
}

// Capture writes the checkout's files into a tree through a private index
// started from the card's exact tuple: tracked files, modes and symlinks;
// new files that are not ignored; tracked files even when now ignored;
// excluded paths and GeneratedDir left as they are in the tuple. It changes
// neither the real index nor any ref.
func (r *Repo) Capture(ctx context.Context, card string) (Capture, error) {
	t, err := r.Lookup(ctx, card)
	if err != nil {
		return Capture{}, err
	}
	tree, changed, idx, err := r.captureTree(ctx, captureSpec{name: "capture-" + card, base: t.Tree})
	_ = os.Remove(idx)
	if err != nil {
		return Capture{}, fmt.Errorf("capture card %s: %w", card, err)
	}
	return Capture{Base: t, Tree: tree, Changed: changed}, nil
}

// Checkpoint captures the selected card and commits the capture onto its
// ref with a message naming the card. The repository's pre-commit hook runs
// on the private index (as git commit would run it); its effects are part
// of the commit and seen by the next Check. Nothing changed: no commit, the
// ref stays.
func (r *Repo) Checkpoint(ctx context.Context, opts CheckpointOptions) (Checkpoint, error) {
	cp, err := r.checkpoint(ctx, opts)
	if err != nil {
		return cp, fmt.Errorf("checkpoint card %s: %w", opts.Card, err)
	}
	return cp, nil
}

func (r *Repo) checkpoint(ctx context.Context, opts CheckpointOptions) (Checkpoint, error) {
	if r.rebaseInProgress() {
		return Checkpoint{}, &RebaseInProgressError{}
	}
	t, err := r.Lookup(ctx, opts.Card)
	if err != nil {
		return Checkpoint{}, err
	}
	cp := Checkpoint{Before: t, After: t}
	head, headRef, err := r.head(ctx)
	if err != nil {
		return cp, err
	}
	if head != t.Commit || headRef != "" {
		return cp, fmt.Errorf("card %s is not selected in the checkout (HEAD %s %s); enter it first", opts.Card, headRef, short(head))
	}
	tree, changed, idx, err := r.captureTree(ctx, captureSpec{name: "checkpoint-" + opts.Card, base: t.Tree})
	defer os.Remove(idx)
	if err != nil {
		return cp, err
	}
	if _, err := r.run(ctx, Command{Args: []string{"hook", "run", "--ignore-missing", "pre-commit"}, IndexFile: idx}); err != nil {
		return cp, fmt.Errorf("pre-commit hook: %w", err)
	}
	if tree, err = r.writeTree(ctx, idx); err != nil { // the hook may have rewritten the private index
		return cp, err
	}
	if tree == t.Tree {
		return cp, nil
	}
	msg := opts.Message
	if msg == "" {
		msg = "saivage: checkpoint card " + opts.Card
	}
	c, err := r.commitTree(ctx, tree, msg+"\n\nSaivage-Card: "+opts.Card+"\n", t.Commit)
	if err != nil {
		return cp, err
	}
	if err := r.updateRef(ctx, t.Ref, c, t.Commit, "saivage: checkpoint "+opts.Card); err != nil {
		return cp, err
	}
	r.step(StepCheckpointRef)
	cp.After, cp.Changed, cp.Paths = Tuple{Ref: t.Ref, Commit: c, Tree: tree}, true, changed
	// The checkout now selects the checkpoint: HEAD there and the real
	// index taken from the private one (which has the stat data of every
	// file it hashed) so that nothing shows as uncommitted.
	if err := r.updateRef(ctx, "HEAD", c, t.Commit, "saivage: checkpoint "+opts.Card); err != nil {
		return cp, err
	}
	if err := r.adoptIndex(ctx, idx, tree); err != nil {
		return cp, err
	}
	return cp, nil
}

// adoptIndex makes a private index holding tree the checkout's real index,
// under Git's own index.lock protocol; when it cannot, the real index is
// read from the tree instead.
func (r *Repo) adoptIndex(ctx context.Context, idx string, tree OID) error {
	real := filepath.Join(r.gitDir, "index")
	b, err := os.ReadFile(idx)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(real+".lock", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(real+".lock", real)
			}
			if err != nil {
				_ = os.Remove(real + ".lock")
			}
		}
	}
	if err != nil {
		if _, rerr := r.run(ctx, Command{Args: []string{"read-tree", string(tree)}}); rerr != nil {
			return fmt.Errorf("update the real index: %w (after %v)", rerr, err)
		}
	}
	return nil
}
