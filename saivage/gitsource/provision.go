package gitsource

import (
	"context"
	"fmt"
	"strings"
)

// PrivateRef is one ref of the private namespace as a reset sees it.
type PrivateRef struct {
	Ref    string `json:"ref"`
	Commit OID    `json:"commit"`
	// Undelivered is true when the ref holds source the delivery branch
	// does not have: its commit is not on the branch, no commit of the
	// branch's first-parent history delivers it (Saivage-Reviewed
	// trailer), and merging it into the branch would change the branch's
	// tree. A snapshot or original ref follows its card's ref.
	Undelivered bool `json:"undelivered"`
}

// Provisioning lists every ref of the private namespace, read-only, and
// tells for each whether its source reached the delivery branch. A reset
// preflights with it: removing a ref that holds undelivered source loses
// that work.
func (r *Repo) Provisioning(ctx context.Context) ([]PrivateRef, error) {
	refs, err := r.privateRefs(ctx, "")
	if err != nil || len(refs) == 0 {
		return refs, err
	}
	branch, err := r.tuple(ctx, r.branch)
	if err != nil {
		return nil, fmt.Errorf("read the delivery branch: %w", err)
	}
	onBranch, err := r.privateRefs(ctx, "--merged="+string(branch.Commit))
	if err != nil {
		return nil, err
	}
	merged := map[string]bool{}
	for _, p := range onBranch {
		merged[p.Ref] = true
	}
	out, err := r.run(ctx, Command{Args: []string{"log", "--first-parent", "--format=%(trailers:key=Saivage-Reviewed,valueonly)", string(branch.Commit), "--"}})
	if err != nil {
		return nil, fmt.Errorf("read the delivery branch's history: %w", err)
	}
	delivered := map[OID]bool{}
	for _, f := range strings.Fields(string(out.Stdout)) {
		delivered[OID(f)] = true
	}
	undelivered := map[string]bool{}
	for i, p := range refs {
		if !merged[p.Ref] && !delivered[p.Commit] {
			tree, conflicts, err := r.mergeTrees(ctx, branch.Commit, p.Commit)
			if err != nil {
				return nil, fmt.Errorf("compare %s with the delivery branch: %w", p.Ref, err)
			}
			refs[i].Undelivered = conflicts != nil || tree != branch.Tree
		}
		undelivered[p.Ref] = refs[i].Undelivered
	}
	// A preserved rebase's refs belong to their card: once the card's work
	// is delivered, its snapshot (which may hold conflict markers) is not
	// undelivered work.
	for i, p := range refs {
		for _, kind := range []string{"/snapshots/", "/original/"} {
			if card, ok := strings.CutPrefix(p.Ref, r.ns+kind); ok {
				if still, known := undelivered[r.CardRef(card)]; known {
					refs[i].Undelivered = still
				}
			}
		}
	}
	return refs, nil
}

// privateRefs lists the namespace's refs (with a for-each-ref filter).
func (r *Repo) privateRefs(ctx context.Context, filter string) ([]PrivateRef, error) {
	args := []string{"for-each-ref", "--format=%(objectname) %(refname)"}
	if filter != "" {
		args = append(args, filter)
	}
	out, err := r.run(ctx, Command{Args: append(args, r.ns+"/")})
	if err != nil {
		return nil, fmt.Errorf("list the private refs under %s: %w", r.ns, err)
	}
	refs := []PrivateRef{}
	for _, line := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		if oid, ref, ok := strings.Cut(line, " "); ok {
			refs = append(refs, PrivateRef{Ref: ref, Commit: OID(oid)})
		}
	}
	return refs, nil
}

// Unprovision deletes exactly the given private refs in one transaction,
// each only if it still points where the caller saw it (a ref that moved
// meanwhile refuses the whole deletion). The delivery branch, its commits
// and every other ref stay; afterwards Qualify and Commission can
// commission the checkout again.
func (r *Repo) Unprovision(ctx context.Context, refs []PrivateRef) error {
	if len(refs) == 0 {
		return nil
	}
	var in strings.Builder
	in.WriteString("start\n")
	for _, p := range refs {
		if !strings.HasPrefix(p.Ref, r.ns+"/") {
			return fmt.Errorf("unprovision: %s is not under the private namespace %s", p.Ref, r.ns)
		}
		fmt.Fprintf(&in, "delete %s %s\n", p.Ref, p.Commit)
	}
	in.WriteString("prepare\ncommit\n")
	if _, err := r.run(ctx, Command{Args: []string{"update-ref", "-m", "saivage: reset", "--stdin"}, Stdin: []byte(in.String()), HasStdin: true}); err != nil {
		return fmt.Errorf("unprovision: delete %d private refs under %s: %w", len(refs), r.ns, err)
	}
	return nil
}
