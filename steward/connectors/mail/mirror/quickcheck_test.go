package mirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// CheckUnchanged answers "unchanged" exactly when an incremental reconcile
// would list no folder and write nothing, and names the reason for every
// kind of change that gives a reconcile work.
func TestCheckUnchangedAgreesWithReconcile(t *testing.T) {
	ctx := context.Background()
	acct, md := maildirAccount(t, "m", false)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "mail.db")
	check := func(accts ...mail.Account) Freshness {
		t.Helper()
		if len(accts) == 0 {
			accts = []mail.Account{acct}
		}
		return CheckUnchanged(ctx, CheckOptions{DBPath: dbPath, Accounts: accts})
	}
	if f := check(); f.Unchanged || !strings.Contains(f.Reason, "no mail mirror yet") {
		t.Fatalf("before the mirror exists: %+v", f)
	}
	s, err := Open(ctx, Options{DBPath: dbPath, BlobDir: filepath.Join(dir, "blobs"), Accounts: []mail.Account{acct}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	inbox := addN(t, md, "INBOX", "in", 3, "S")
	addN(t, md, "Archive", "ar", 4, "S")
	ageDirs(t, acct.Root, time.Now().Add(-time.Hour))
	if f := check(); f.Unchanged || !strings.Contains(f.Reason, "a full reconcile is due") {
		t.Fatalf("before the first reconcile: %+v", f)
	}
	reconcile(t, s, SyncOptions{})

	changes := func() (n int64) {
		t.Helper()
		if err := s.db.QueryRow("SELECT total_changes()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// settle records the current state and shows that check and reconcile
	// agree that nothing is left to do.
	settle := func(step string) {
		t.Helper()
		ageDirs(t, acct.Root, time.Now().Add(-time.Hour))
		reconcile(t, s, SyncOptions{})
		f := check()
		if !f.Unchanged || f.Reason != "" || f.Folders == 0 {
			t.Fatalf("%s: settled tree checked as %+v", step, f)
		}
		before := changes()
		st := reconcile(t, s, SyncOptions{})
		if st.Scanned != 0 || st.SkippedFolders != f.Folders || changes() != before {
			t.Fatalf("%s: the check said unchanged (%d folders) but the reconcile found %+v, %d row changes", step, f.Folders, st, changes()-before)
		}
	}
	settle("first reconcile")

	cases := []struct {
		name   string
		change func()
		reason string
	}{
		{"new message", func() { addN(t, md, "INBOX", "late", 1, "") }, "changed since the last reconcile"},
		{"flag rename", func() {
			if err := os.Rename(inbox[0], strings.TrimSuffix(inbox[0], ":2,S")+":2,FS"); err != nil {
				t.Fatal(err)
			}
		}, "changed since the last reconcile"},
		{"deletion", func() {
			if err := os.Remove(inbox[1]); err != nil {
				t.Fatal(err)
			}
		}, "changed since the last reconcile"},
		{"new folder", func() { addN(t, md, "Fresh", "fr", 1, "S") }, "is new"},
		{"folder removed", func() {
			if err := os.RemoveAll(md.Dir("Fresh")); err != nil {
				t.Fatal(err)
			}
		}, "is gone"},
		{"file event", func() {
			// A file whose folder times were put back: only the file event
			// that ingested it marks the folder for listing.
			var times []time.Time
			subs := []string{filepath.Join(md.Dir("Archive"), "new"), filepath.Join(md.Dir("Archive"), "cur")}
			for _, d := range subs {
				st, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				times = append(times, st.ModTime())
			}
			p := addN(t, md, "Archive", "ev", 1, "S")[0]
			for i, d := range subs {
				if err := os.Chtimes(d, times[i], times[i]); err != nil {
					t.Fatal(err)
				}
			}
			if f := check(); !f.Unchanged {
				t.Fatalf("times put back: %+v", f)
			}
			if _, err := s.IngestPaths(ctx, []string{p}); err != nil {
				t.Fatal(err)
			}
		}, "changed since the last reconcile"},
		{"same-tick change", func() {
			// Listed while its time was recent (a minute ahead, so that a
			// slow machine cannot make it old): recorded untrusted.
			addN(t, md, "INBOX", "tick", 1, "S")
			soon := time.Now().Add(time.Minute)
			for _, sub := range []string{"cur", "new"} {
				if err := os.Chtimes(filepath.Join(md.Dir("INBOX"), sub), soon, soon); err != nil {
					t.Fatal(err)
				}
			}
			reconcile(t, s, SyncOptions{})
		}, "changed since the last reconcile"},
	}
	for _, c := range cases {
		c.change()
		if f := check(); f.Unchanged || !strings.Contains(f.Reason, c.reason) {
			t.Errorf("%s: checked as %+v, want a reconcile (%q)", c.name, f, c.reason)
		}
		st := reconcile(t, s, SyncOptions{})
		if st.Scanned+st.Removed+st.SoftDeleted == 0 && st.SkippedFolders == 4 && c.name != "same-tick change" {
			t.Errorf("%s: the reconcile found nothing either: %+v", c.name, st)
		}
		settle(c.name)
	}
	checkConsistent(t, s)

	if f := CheckUnchanged(ctx, CheckOptions{DBPath: dbPath, Accounts: []mail.Account{acct}, Now: func() time.Time { return time.Now().Add(DefaultFullAfter + time.Minute) }}); f.Unchanged || !strings.Contains(f.Reason, "full reconcile is due") {
		t.Errorf("full pass due: %+v", f)
	}
	moved := acct
	moved.Root = t.TempDir()
	if f := check(moved); f.Unchanged || !strings.Contains(f.Reason, "new or moved account") {
		t.Errorf("moved account: %+v", f)
	}
	apple := mail.Account{Name: "apple", Kind: mail.KindAppleMail, Root: t.TempDir()}
	if f := check(acct, apple); f.Unchanged || !strings.Contains(f.Reason, "Apple Mail") {
		t.Errorf("Apple Mail account: %+v", f)
	}
	if f := check(); !f.Unchanged {
		t.Errorf("nothing changed after the probes: %+v", f)
	}
}
