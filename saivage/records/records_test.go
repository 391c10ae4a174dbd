package records_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
)

func newRef(t *testing.T) (*records.Store, records.Ref) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/records", 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := records.New(records.Options{Publisher: state.New(state.Options{}), Now: func() time.Time { return now }})
	return s, records.Ref{CardDir: dir, Card: "project.a", Name: "plan"}
}

func TestRecordLifecycle(t *testing.T) {
	s, r := newRef(t)
	h, err := s.Initialize(r, "# Plan\n")
	if err != nil {
		t.Fatal(err)
	}
	if h.Revision != 0 || h.Selection != records.SelBaseline {
		t.Fatalf("baseline head = %+v", h)
	}
	if _, err := s.Initialize(r, "again"); !errors.Is(err, records.ErrExists) {
		t.Fatalf("re-initialise: %v", err)
	}
	// Nothing to accept yet: no draft.
	if _, err := s.Accept(r, "agent:planner"); !errors.Is(err, records.ErrNoDraft) {
		t.Fatalf("accept without draft: %v", err)
	}
	if _, err := s.OpenDraft(r, "agent:planner"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenDraft(r, "agent:planner"); !errors.Is(err, records.ErrDraftOpen) {
		t.Fatalf("second draft: %v", err)
	}
	// Draft 0 (a copy of the baseline) is not accepted.
	if _, err := s.Accept(r, "agent:planner"); !errors.Is(err, records.ErrUnchanged) {
		t.Fatalf("accept draft0: %v", err)
	}
	// Writing the same content is not a change.
	if h, _ := s.WriteDraft(r, "# Plan\n", "agent:planner"); h.Draft.Changed {
		t.Fatal("identical write marked the draft changed")
	}
	// Empty content is never accepted.
	if _, err := s.WriteDraft(r, "  \n", "agent:planner"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(r, "agent:planner"); !errors.Is(err, records.ErrEmpty) {
		t.Fatalf("accept empty: %v", err)
	}
	if _, err := s.WriteDraft(r, "# Plan\n1. build\n", "agent:planner"); err != nil {
		t.Fatal(err)
	}
	a, err := s.Accept(r, "agent:planner")
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != 1 || a.Author != "agent:planner" {
		t.Fatalf("accepted = %+v", a)
	}
	// A direct acceptance conflicts with an open draft and otherwise
	// advances by exactly one.
	if _, err := s.OpenDraft(r, "agent:planner"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptContent(r, "x", "operator"); !errors.Is(err, records.ErrDraftOpen) {
		t.Fatalf("direct accept with draft: %v", err)
	}
	if h, err := s.DiscardDraft(r); err != nil || h.Selection != records.SelAccepted {
		t.Fatalf("discard: %+v %v", h, err)
	}
	a2, err := s.AcceptContent(r, "# Plan\n1. build\n2. test\n", "operator")
	if err != nil || a2.Version != 2 {
		t.Fatalf("direct accept: %+v %v", a2, err)
	}
	hist, err := s.History(r)
	if err != nil || len(hist) != 2 || hist[0].Version != 1 || hist[1].Version != 2 {
		t.Fatalf("history = %+v %v", hist, err)
	}
	cur, err := s.Current(r)
	if err != nil || cur.Version != 2 || !strings.Contains(cur.Content, "2. test") {
		t.Fatalf("current = %+v %v", cur, err)
	}
	base, err := s.Content(r, 0)
	if err != nil || base != "# Plan\n" {
		t.Fatalf("baseline read = %q %v", base, err)
	}
	if _, err := s.Version(r, 3); !errors.Is(err, records.ErrNoVersion) {
		t.Fatalf("version 3: %v", err)
	}
	if got := records.Diff("v1", "v2", hist[0].Content, hist[1].Content); got != "--- v1\n+++ v2\n # Plan\n 1. build\n+2. test\n" {
		t.Fatalf("diff = %q", got)
	}
	prev2 := latestFile(t, s, r, 2)
	// A crash after publishing a version-3 document but before its head
	// leaves an unselected document that blocks nothing and is never read.
	if err := os.WriteFile(r.DocPath("3-deadbeef.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	a3, err := s.AcceptContent(r, "new", "operator")
	if err != nil || a3.Version != 3 || a3.Previous != prev2 {
		t.Fatalf("accept after orphan: %+v %v", a3, err)
	}
	if hist, err := s.History(r); err != nil || len(hist) != 3 || hist[2].Content != "new" {
		t.Fatalf("history after orphan: %+v %v", hist, err)
	}
}

func latestFile(t *testing.T, s *records.Store, r records.Ref, want int) string {
	t.Helper()
	h, err := s.ReadHead(r)
	if err != nil || h.Latest != want {
		t.Fatalf("head = %+v %v", h, err)
	}
	return h.LatestFile
}

func TestRecordStrictReads(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(r records.Ref)
		wantErr string
	}{
		{"head unknown field", func(r records.Ref) {
			b, _ := os.ReadFile(r.HeadPath())
			os.WriteFile(r.HeadPath(), []byte(strings.Replace(string(b), "{", `{"extra":1,`, 1)), 0o644)
		}, "unknown field"},
		{"head of another record", func(r records.Ref) {
			b, _ := os.ReadFile(r.HeadPath())
			os.WriteFile(r.HeadPath(), []byte(strings.Replace(string(b), `"record":"plan"`, `"record":"other"`, 1)), 0o644)
		}, "belongs to"},
		{"accepted version mismatch", func(r records.Ref) {
			p := onlyDoc(r)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"version":1`, `"version":2`, 1)), 0o644)
		}, "does not match"},
		{"accepted version missing", func(r records.Ref) { os.Remove(onlyDoc(r)) }, "accepted version 1 is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := newRef(t)
			if _, err := s.Initialize(r, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AcceptContent(r, "v1", "operator"); err != nil {
				t.Fatal(err)
			}
			tt.corrupt(r)
			_, err := s.Current(r)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func onlyDoc(r records.Ref) string {
	m, _ := filepath.Glob(r.DocPath("1-*.json"))
	return m[0]
}

func TestDiffLarge(t *testing.T) {
	a := strings.Repeat("a\n", 3000)
	b := strings.Repeat("b\n", 3000)
	if got := records.Diff("x", "y", a, b); !strings.Contains(got, "too large") {
		t.Fatalf("large diff = %.80q", got)
	}
	if records.Diff("x", "y", "same", "same") != "" {
		t.Fatal("identical diff not empty")
	}
}
