package gitsource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The crash helper: when the test binary is re-executed with these
// variables it runs one delivery and SIGKILLs itself right after the Nth
// durable step.
const (
	envCrashDir      = "GITSOURCE_CRASH_DIR"
	envCrashAt       = "GITSOURCE_CRASH_AT"
	envCrashReviewed = "GITSOURCE_CRASH_REVIEWED"
	envCrashOp       = "GITSOURCE_CRASH_OP" // "checkpoint": checkpoint card b instead of delivering it; "squash": advance goal h (base GITSOURCE_CRASH_REVIEWED) with the squash fallback
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envCrashDir); dir != "" {
		os.Exit(crashHelper(dir))
	}
	os.Exit(m.Run())
}

func crashHelper(dir string) int {
	at, _ := strconv.Atoi(os.Getenv(envCrashAt))
	n := 0
	r, err := Open(context.Background(), Options{Dir: dir, DeliveryBranch: "main", Environ: testEnv, QueryDeadline: time.Minute,
		AfterStep: func(s Step) {
			n++
			if n == at {
				_ = os.WriteFile(dir+"/.git/crash-step", []byte(s), 0o644)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	if os.Getenv(envCrashOp) == "checkpoint" {
		if _, err := r.Checkpoint(ctx, CheckpointOptions{Card: "b"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 5
		}
		fmt.Printf("steps=%d\n", n)
		return 0
	}
	if os.Getenv(envCrashOp) == "squash" {
		_, err = r.AdvanceParent(ctx, AdvanceOptions{Child: "h", Parent: "root", Base: OID(os.Getenv(envCrashReviewed)), Squash: true})
	} else {
		_, err = r.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: OID(os.Getenv(envCrashReviewed))})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	fmt.Printf("steps=%d\n", n)
	return 0
}

// TestCrashAtEachDeliveryStep kills a real child process after each
// durable step of a delivery (squash onto the advanced parent, switching
// the checkout, the branch move, HEAD) and then recovers by running the
// delivery again: the reviewed change lands exactly once, the unreviewed
// later checkpoint never does, nothing is left uncommitted.
func TestCrashAtEachDeliveryStep(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var crashed []string
	defer func() {
		t.Logf("killed after: %v", crashed)
		for _, s := range []Step{StepSquashParent, StepSelectTree, StepSelectHead, StepBranchRef} {
			if !t.Failed() && !slices.Contains(crashed, string(s)) {
				t.Errorf("no crash after step %s", s)
			}
		}
	}()
	for at := 1; ; at++ {
		dir := newCheckout(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
		r, _ := commission(t, dir)
		reviewedA := work(t, r, dir, "a", "root", map[string]string{"a.txt": "A\n"})
		reviewedB := work(t, r, dir, "b", "root", map[string]string{"b.txt": "B reviewed\n"})
		if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "a", Parent: "root", Reviewed: reviewedA}); err != nil {
			t.Fatal(err)
		}
		// Back on b: the Executor's later, unreviewed checkpoint exists too.
		if _, err := r.Enter(ctx, EnterOptions{Card: "b"}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashAt+"="+strconv.Itoa(at), envCrashReviewed+"="+string(reviewedB))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if !killed {
			if err != nil {
				t.Fatalf("crash at step %d: helper failed: %v\n%s", at, err, out)
			}
			if at < 4 {
				t.Fatalf("only %d steps: %s", at-1, out)
			}
			break // the helper ran past the last step: every step was covered
		}
		b, _ := os.ReadFile(dir + "/.git/crash-step")
		crashed = append(crashed, string(b))
		// Restart: inspect, then rerun the same delivery.
		r2 := openRepo(t, dir)
		st, err := r2.Inspect(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: reviewedB})
		if err != nil {
			t.Fatalf("step %d: inspect: %v", at, err)
		}
		d, err := r2.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: reviewedB})
		if err != nil {
			t.Fatalf("step %d: resume to parent (state %+v): %v", at, st, err)
		}
		if (st.InParent != "") != d.Resumed {
			t.Fatalf("step %d: inspect said %+v, resume %+v", at, st, d)
		}
		if _, err := r2.DeliverToBranch(ctx, "root"); err != nil {
			t.Fatalf("step %d: resume to branch: %v", at, err)
		}
		if s := subjects(t, dir, "main"); !slices.Equal(s, []string{"card b (card b)", "card a (card a)", "initial"}) {
			t.Fatalf("step %d: main history %v", at, s)
		}
		files := treeFiles(t, dir, "main")
		if files["a.txt"] != "100644 A" || files["b.txt"] != "100644 B reviewed" {
			t.Fatalf("step %d: main tree %v", at, files)
		}
		if s := porcelain(t, dir); s != "" {
			t.Fatalf("step %d: uncommitted %q", at, s)
		}
		// An unreviewed later checkpoint is never delivered.
		unreviewed := work(t, r2, dir, "b", "", map[string]string{"b.txt": "not reviewed\n"})
		_, err = r2.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: reviewedB})
		if err != nil {
			t.Fatalf("step %d: redelivering the reviewed commit: %v", at, err)
		}
		if files := treeFiles(t, dir, "refs/saivage/cards/root"); files["b.txt"] != "100644 B reviewed" {
			t.Fatalf("step %d: unreviewed %s reached the parent", at, unreviewed)
		}
	}
}

// killHelper re-executes the test binary as the crash helper and requires
// it to die by SIGKILL after step at; it returns the step's name.
func killHelper(t *testing.T, dir string, at int, env ...string) Step {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envCrashDir+"="+dir, envCrashAt+"="+strconv.Itoa(at)), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed after step %d: %v\n%s", at, err, out)
	}
	b, _ := os.ReadFile(dir + "/.git/crash-step")
	return Step(b)
}

// TestCrashAfterCheckpointRef kills a real checkpoint right after it moved
// the card's ref (HEAD still at the previous tip, the real index old, the
// files the new checkpoint's). Enter, of the card itself or of another
// card (the runtime enters the root first), finishes the checkpoint;
// a checkout that differs from the checkpoint in any way stays refused.
func TestCrashAfterCheckpointRef(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, enter string
		tamper      map[string]string // written after the crash
		refused     bool
	}{
		{name: "enter the card", enter: "b"},
		{name: "enter the root", enter: "root"},
		{name: "files changed after the crash", enter: "b", tamper: map[string]string{"new.txt": "edited after the crash\n"}, refused: true},
		{name: "untracked file added after the crash", enter: "root", tamper: map[string]string{"stray.txt": "x\n"}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCheckout(t, map[string]string{"a.txt": "a\n", "gone.txt": "g\n"})
			r, root := commission(t, dir)
			before := work(t, r, dir, "b", "root", map[string]string{"a.txt": "A1\n"})
			write(t, dir, map[string]string{"a.txt": "A2\n", "new.txt": "new\n"})
			if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
				t.Fatal(err)
			}
			if s := killHelper(t, dir, 1, envCrashOp+"=checkpoint"); s != StepCheckpointRef {
				t.Fatalf("killed after %q, want %q", s, StepCheckpointRef)
			}
			cp := OID(gitT(t, dir, "rev-parse", "refs/saivage/cards/b"))
			if cp == before || gitT(t, dir, "rev-parse", "HEAD") != string(before) || gitT(t, dir, "rev-parse", string(cp)+"^") != string(before) {
				t.Fatalf("not the interrupted state: ref %s, HEAD %s, before %s", cp, gitT(t, dir, "rev-parse", "HEAD"), before)
			}
			write(t, dir, tc.tamper)
			r2 := openRepo(t, dir)
			got, err := r2.Enter(ctx, EnterOptions{Card: tc.enter})
			if tc.refused {
				var dirty *DirtyError
				if !errors.As(err, &dirty) {
					t.Fatalf("Enter = %v, want a DirtyError", err)
				}
				if h := gitT(t, dir, "rev-parse", "HEAD"); h != string(before) {
					t.Fatalf("refused Enter moved HEAD to %s", h)
				}
				for p, c := range tc.tamper {
					if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != c {
						t.Fatalf("refused Enter changed %s to %q", p, b)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Enter %s after the crash: %v", tc.enter, err)
			}
			want := cp
			if tc.enter == "root" {
				want = root.Commit
			}
			if got.Commit != want || gitT(t, dir, "rev-parse", "HEAD") != string(want) {
				t.Fatalf("Enter selected %s (HEAD %s), want %s", got.Commit, gitT(t, dir, "rev-parse", "HEAD"), want)
			}
			if s := porcelain(t, dir); s != "" {
				t.Fatalf("uncommitted after recovery: %q", s)
			}
			if files := treeFiles(t, dir, string(cp)); !maps.Equal(files, map[string]string{"a.txt": "100644 A2", "new.txt": "100644 new"}) {
				t.Fatalf("checkpoint tree %v", files)
			}
			// The card's work continues from the finished checkpoint.
			next := work(t, r2, dir, "b", "", map[string]string{"a.txt": "A3\n"})
			if p := gitT(t, dir, "rev-parse", string(next)+"^"); p != string(cp) {
				t.Fatalf("next checkpoint's parent %s, want %s", p, cp)
			}
		})
	}
}

// TestCrashDuringSquashFallback kills a real child after each durable step
// of a goal's squash fallback (its parent moved) and of the delivery to the
// branch, then reruns both: the goal's change lands exactly once, as one
// squash commit naming it, and nothing is left uncommitted.
func TestCrashDuringSquashFallback(t *testing.T) {
	ctx := context.Background()
	var crashed []Step
	for at := 1; ; at++ {
		dir := newCheckout(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
		r, root := commission(t, dir)
		for _, g := range []struct{ goal, task, file string }{{"g", "t", "a.txt"}, {"h", "u", "b.txt"}} {
			if _, err := r.Enter(ctx, EnterOptions{Card: g.goal, Parent: "root"}); err != nil {
				t.Fatal(err)
			}
			reviewed := work(t, r, dir, g.task, g.goal, map[string]string{g.file: "new " + g.file + "\n"})
			if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: g.task, Parent: g.goal, Reviewed: reviewed}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: root.Commit}); err != nil {
			t.Fatal(err)
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashAt+"="+strconv.Itoa(at), envCrashOp+"=squash", envCrashReviewed+"="+string(root.Commit))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			if err != nil {
				t.Fatalf("crash at step %d: helper failed: %v\n%s", at, err, out)
			}
			break // the helper ran past the last step
		}
		b, _ := os.ReadFile(dir + "/.git/crash-step")
		crashed = append(crashed, Step(b))
		r2 := openRepo(t, dir)
		if _, err := r2.AdvanceParent(ctx, AdvanceOptions{Child: "h", Parent: "root", Base: root.Commit, Squash: true}); err != nil {
			t.Fatalf("step %d (%s): resume the squash: %v", at, b, err)
		}
		if _, err := r2.DeliverToBranch(ctx, "root"); err != nil {
			t.Fatalf("step %d (%s): resume to branch: %v", at, b, err)
		}
		if s := subjects(t, dir, "main"); !slices.Equal(s, []string{"card h (card h)", "card t (card t)", "initial"}) {
			t.Fatalf("step %d (%s): main history %v", at, b, s)
		}
		if files := treeFiles(t, dir, "main"); files["a.txt"] != "100644 new a.txt" || files["b.txt"] != "100644 new b.txt" {
			t.Fatalf("step %d (%s): main tree %v", at, b, files)
		}
		if s := porcelain(t, dir); s != "" {
			t.Fatalf("step %d (%s): uncommitted %q", at, b, s)
		}
	}
	t.Logf("killed after: %v", crashed)
	for _, s := range []Step{StepSquashParent, StepBranchRef} {
		if !slices.Contains(crashed, s) {
			t.Errorf("no crash after step %s (crashed after %v)", s, crashed)
		}
	}
}
