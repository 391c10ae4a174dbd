package cards_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
)

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func docFile(t *testing.T, f *fixture, id string) string {
	t.Helper()
	h, _, err := f.s.GetHead(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f.s.CardDir(id), "history", h.Document)
}

// TestAdmissionNamesTheBrokenFile damages one file at a time and checks that
// admission fails naming exactly that file, and changes nothing.
func TestAdmissionNamesTheBrokenFile(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, f *fixture) string // returns the file admission must name
		want   string
	}{
		{"root head missing", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.CardDir("project"), "head.json")
			os.Remove(p)
			return p
		}, "root card head is missing"},
		{"head not JSON", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.CardDir("project.a"), "head.json")
			os.WriteFile(p, []byte("{"), 0o644)
			return p
		}, "invalid card head"},
		{"head unknown field", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.CardDir("project.a"), "head.json")
			replaceIn(t, p, `"format":1`, `"format":1,"legacy":true`)
			return p
		}, "unknown field"},
		{"selected document missing", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			os.Remove(p)
			return p
		}, "no such file"},
		{"document for another card", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			replaceIn(t, p, `"id":"project.a.a"`, `"id":"project.a.b"`)
			return p
		}, "document is project.a.b"},
		{"unknown status", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			replaceIn(t, p, `"status":"backlog"`, `"status":"paused"`)
			return p
		}, "unknown status"},
		{"type no longer configured", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			replaceIn(t, p, `"type":"task"`, `"type":"bug"`)
			return p
		}, "not in the compiled configuration"},
		{"type not permitted under parent", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			replaceIn(t, p, `"type":"task"`, `"type":"goal"`)
			return p
		}, "not a permitted child"},
		{"listed child without head", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.CardDir("project.a.a"), "head.json")
			os.Remove(p)
			return p
		}, "listed child has no head"},
		{"dependency on non-sibling", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.b")
			replaceIn(t, p, `"dependencies":["project.a.a"]`, `"dependencies":["project.b"]`)
			return p
		}, "not an active sibling"},
		{"dependency cycle", func(t *testing.T, f *fixture) string {
			p := docFile(t, f, "project.a.a")
			replaceIn(t, p, `"dependencies":[]`, `"dependencies":["project.a.b"]`)
			// The cycle is reported on the parent whose children it spans.
			return docFile(t, f, "project.a")
		}, "cycle"},
		{"record head missing", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.CardDir("project.a.a"), "records", "summary", "head.json")
			os.Remove(p)
			return p
		}, "has no head"},
		{"selected record version missing", func(t *testing.T, f *fixture) string {
			m, _ := filepath.Glob(filepath.Join(f.s.CardDir("project"), "records", "objective", "accepted", "1-*.json"))
			os.Remove(m[0])
			return m[0]
		}, "accepted version 1 is missing"},
		{"session index missing", func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.s.SessionDir("project.a.a", "executor"), "index.json")
			os.Remove(p)
			return p
		}, "required session index is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			goal := f.create(t, "project", "goal").ID
			f.create(t, "project", "goal")
			t1 := f.create(t, goal, "task").ID
			f.create(t, goal, "task", t1)
			mustAdmit(t, f)
			path := tt.damage(t, f)
			_, err := f.store(t).Admit(context.Background())
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant %q naming %s", err, tt.want, path)
			}
		})
	}
}

// TestAdmissionAfterCrashPoints reproduces the state a crash leaves between
// the steps of a child creation and checks admission's exact answer.
func TestAdmissionAfterCrashPoints(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	goal := f.create(t, "project", "goal").ID
	// Crash after claiming project.b and preparing records, before its head:
	// the parent does not list it, so admission ignores the namespace.
	if err := os.MkdirAll(filepath.Join(f.s.CardDir("project.b"), "records", "plan"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Crash after the child head and the parent's new document, before the
	// parent's head: the complete child is unreachable and ignored, its
	// identifier stays consumed, and the orphan parent document blocks
	// nothing.
	c := f.create(t, goal, "task")
	rootHead := filepath.Join(f.s.CardDir(goal), "head.json")
	prev := filepath.Join(f.s.CardDir(goal), "head.prev.json")
	data, err := os.ReadFile(prev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rootHead, data, 0o644); err != nil { // select the pre-snapshot parent
		t.Fatal(err)
	}
	// Leftover publication temporaries are never read.
	if err := os.WriteFile(filepath.Join(f.s.CardDir(goal), ".tmp-0000"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := mustAdmit(t, f)
	if _, ok := g.Cards[c.ID]; ok || g.Active != 2 {
		t.Fatalf("unlisted child admitted (active=%d)", g.Active)
	}
	next := f.create(t, "project", "goal")
	if next.ID != "project.c" {
		t.Fatalf("claimed namespace reused: %s", next.ID)
	}
	again := f.create(t, goal, "task")
	if again.ID == c.ID {
		t.Fatal("identifier of the unreachable child reused")
	}
	if _, err := f.s.Get(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, f)
	_ = cards.RootID
}
