package gitsource

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestProvisioningAndUnprovision: every private ref is classified by
// whether its source reached the delivery branch (on the branch: g, root,
// e; delivered by a squash naming it, though later overwritten: t; adding
// nothing to it: z; none of these: n); preserved-rebase refs
// follow their card. Unprovision deletes exactly the listed refs, refuses
// as a whole when one moved since it was listed, and leaves the branch so
// that commissioning works again.
func TestProvisioningAndUnprovision(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r, _ := commission(t, dir)
	// z starts at the initial root and makes a change t2 delivers too.
	work(t, r, dir, "z", "root", map[string]string{"b.txt": "B\n"})
	if _, err := r.Enter(ctx, EnterOptions{Card: "g", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	// t's a.txt is overwritten by t2 later: only its squash's trailer
	// tells that it was delivered.
	reviewed := work(t, r, dir, "t", "g", map[string]string{"a.txt": "A\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "t", Parent: "g", Reviewed: reviewed, Title: "Task"}); err != nil {
		t.Fatal(err)
	}
	reviewed2 := work(t, r, dir, "t2", "g", map[string]string{"a.txt": "A2\n", "b.txt": "B\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "t2", Parent: "g", Reviewed: reviewed2, Title: "Task 2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: OID(gitT(t, dir, "rev-parse", "main"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Enter(ctx, EnterOptions{Card: "e", Parent: "g"}); err != nil { // entered, changed nothing
		t.Fatal(err)
	}
	pending := work(t, r, dir, "n", "g", map[string]string{"b.txt": "pending\n"})
	if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	marked := gitT(t, dir, "commit-tree", "-p", string(reviewed), "-m", "snapshot", gitT(t, dir, "rev-parse", string(reviewed)+"^{tree}"))
	gitT(t, dir, "update-ref", "refs/saivage/snapshots/t", marked)
	gitT(t, dir, "update-ref", "refs/saivage/snapshots/n", string(pending))

	refs, err := r.Provisioning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range refs {
		got[p.Ref] = p.Undelivered
		if want := gitT(t, dir, "rev-parse", p.Ref); string(p.Commit) != want {
			t.Errorf("%s listed at %s, is at %s", p.Ref, p.Commit, want)
		}
	}
	want := map[string]bool{
		"refs/saivage/cards/root": false, "refs/saivage/cards/g": false, "refs/saivage/cards/t": false, "refs/saivage/cards/t2": false,
		"refs/saivage/cards/e": false, "refs/saivage/cards/z": false, "refs/saivage/cards/n": true,
		"refs/saivage/snapshots/t": false, "refs/saivage/snapshots/n": true,
	}
	if len(got) != len(want) {
		t.Fatalf("provisioning = %v, want %v", got, want)
	}
	for ref, u := range want {
		if v, ok := got[ref]; !ok || v != u {
			t.Errorf("%s undelivered = %v (listed %v), want %v", ref, v, ok, u)
		}
	}

	mainTip := gitT(t, dir, "rev-parse", "main")
	// A ref that moved since the listing refuses the whole deletion.
	gitT(t, dir, "update-ref", "refs/saivage/cards/n", mainTip)
	if err := r.Unprovision(ctx, refs); err == nil {
		t.Fatal("unprovision over a moved ref succeeded")
	}
	if left := gitT(t, dir, "for-each-ref", "--format=%(refname)", "refs/saivage/"); strings.Count(left, "\n")+1 != len(want) {
		t.Fatalf("a refused unprovision deleted refs; left:\n%s", left)
	}
	if err := r.Unprovision(ctx, []PrivateRef{{Ref: "refs/heads/main", Commit: OID(mainTip)}}); err == nil {
		t.Fatal("unprovision of a branch succeeded")
	}
	refs, err = r.Provisioning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unprovision(ctx, refs); err != nil {
		t.Fatal(err)
	}
	if left := gitT(t, dir, "for-each-ref", "--format=%(refname)"); left != "refs/heads/main" {
		t.Fatalf("refs after unprovision: %q", left)
	}
	if gitT(t, dir, "rev-parse", "main") != mainTip || !slices.Equal(subjects(t, dir, "main"), []string{"Task 2 (card t2)", "Task (card t)", "initial"}) {
		t.Fatalf("main changed: %v", subjects(t, dir, "main"))
	}
	if refs, err := r.Provisioning(ctx); err != nil || len(refs) != 0 {
		t.Fatalf("provisioning after unprovision = %v, %v", refs, err)
	}
	// The checkout can be commissioned again.
	q, err := r.Qualify(ctx, "root")
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := r.Commission(ctx, "root", q); err != nil || string(rt.Commit) != mainTip {
		t.Fatalf("recommission = %+v, %v", rt, err)
	}
}
