package conversations

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/state"
)

// TestCachedRowsSurviveAnAppendDuringAUse reproduces the cockpit's
// "tool result call_N has no earlier call": a row appended while another
// use of the same segment was between touching the file and remembering
// it. The remembered rows then lacked that row while the remembered size
// included it, so the next append built on rows without the tool call and
// the following read refused its result. Each case lands the tool call at
// that exact moment, then appends the result and reads the session back.
func TestCachedRowsSurviveAnAppendDuringAUse(t *testing.T) {
	call := Row{ID: "c", Kind: "tool_call", CallID: "call_7", Name: "create_card"}
	result := Row{ID: "r", Kind: "tool_result", CallID: "call_7", Name: "create_card"}
	tests := []struct {
		name string
		// arm makes one later operation of s land appendCall at the
		// racy moment, and runs that operation.
		arm func(t *testing.T, s *Store, pub *hooks, dir, id string, appendCall func())
	}{
		{"a read (the cockpit's transcript fetch) overlaps the turn's append", func(t *testing.T, s *Store, _ *hooks, dir, id string, appendCall func()) {
			s.readHook = func(string) { s.readHook = nil; appendCall() }
			s.forget(segmentPath(dir, 1)) // the next read goes to the file
			if _, err := s.LoadCurrent(dir, id, state.TailIgnore); err != nil {
				t.Fatal(err)
			}
		}},
		{"another writer appends right after this store's append", func(t *testing.T, s *Store, h *hooks, dir, id string, appendCall func()) {
			h.after = func(step state.Step, _ string) {
				if step == state.StepAppendWrite {
					h.after = nil
					appendCall()
				}
			}
			if err := s.Append(dir, id, []Row{{ID: "a2", Kind: "assistant"}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "analyst")
			h := &hooks{}
			s := New(state.New(state.Options{AfterStep: h.step}))
			other := New(state.New(state.Options{}))
			id := SessionID("analyst", "")
			if err := s.Establish(dir, id); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(dir, id, []Row{{ID: "m", Kind: "marker"}, {ID: "u", Kind: "user"}, {ID: "a", Kind: "assistant"}}); err != nil {
				t.Fatal(err)
			}
			tt.arm(t, s, h, dir, id, func() {
				if err := other.Append(dir, id, []Row{call}); err != nil {
					t.Fatal(err)
				}
			})
			if err := s.Append(dir, id, []Row{result}); err != nil {
				t.Fatalf("append the result: %v", err)
			}
			cur, err := s.LoadCurrent(dir, id, state.TailTruncate)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			var kinds []string
			for _, r := range cur.Rows {
				kinds = append(kinds, r.ID)
			}
			if got := strings.Join(kinds, " "); !strings.HasSuffix(got, "c r") {
				t.Fatalf("rows %s: the call is missing before its result", got)
			}
			fresh, err := New(state.New(state.Options{})).LoadCurrent(dir, id, state.TailFail)
			if err != nil || len(fresh.Rows) != len(cur.Rows) {
				t.Fatalf("a fresh read gives %d rows (%v), the store %d", len(fresh.Rows), err, len(cur.Rows))
			}
		})
	}
}

// hooks lets a test change the publisher's AfterStep callback after the
// publisher is built.
type hooks struct{ after func(state.Step, string) }

func (h *hooks) step(s state.Step, p string) {
	if h.after != nil {
		h.after(s, p)
	}
}
