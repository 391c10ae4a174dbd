package conversations_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

func row(id, kind, call string) conversations.Row {
	return conversations.Row{ID: id, Kind: kind, CallID: call}
}

func TestValidatePairs(t *testing.T) {
	tests := []struct {
		name string
		rows []conversations.Row
		want string
	}{
		{"paired", []conversations.Row{row("1", "user", ""), row("2", "tool_call", "a"), row("3", "tool_result", "a"), row("4", "assistant", "")}, ""},
		{"sole final call unmatched", []conversations.Row{row("1", "user", ""), row("2", "tool_call", "a")}, ""},
		{"result without call", []conversations.Row{row("1", "tool_result", "a")}, "no earlier call"},
		{"result before call", []conversations.Row{row("1", "tool_result", "a"), row("2", "tool_call", "a")}, "no earlier call"},
		{"unmatched call not final", []conversations.Row{row("1", "tool_call", "a"), row("2", "assistant", "")}, "not final"},
		{"two unmatched calls", []conversations.Row{row("1", "tool_call", "a"), row("2", "tool_call", "b")}, "2 unanswered"},
		{"duplicate row id", []conversations.Row{row("1", "user", ""), row("1", "user", "")}, "duplicate row id"},
		{"call without id", []conversations.Row{row("1", "tool_call", "")}, "without call_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := conversations.ValidatePairs(tt.rows)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSessionAppendLoadAndTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "planner")
	s := conversations.New(state.New(state.Options{}))
	id := conversations.SessionID("planner", "project.a")
	if id != "agent:planner:project.a" || conversations.SessionID("analyst", "") != "agent:analyst:global" {
		t.Fatalf("session ids: %s", id)
	}
	if err := s.Establish(dir, id); err != nil {
		t.Fatal(err)
	}
	if segs, err := s.Load(dir, id, state.TailFail); err != nil || len(segs) != 0 {
		t.Fatalf("empty session: %v %v", segs, err)
	}
	if err := s.Append(dir, id, []conversations.Row{row("1", "user", ""), row("2", "tool_call", "a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(dir, id, []conversations.Row{row("3", "tool_result", "a")}); err != nil {
		t.Fatal(err)
	}
	// A result for an unknown call is refused on the next load.
	seg := filepath.Join(dir, "versions", "1.jsonl")
	good, _ := os.ReadFile(seg)
	os.WriteFile(seg, append(append([]byte{}, good...), `{"v":2,"rows":[{"id":"4","kind":"tool_result","call_id":"zz"}]}`+"\n"...), 0o644)
	if _, err := s.Load(dir, id, state.TailFail); err == nil || !strings.Contains(err.Error(), "no earlier call") {
		t.Fatalf("orphan result: %v", err)
	}
	// A torn tail of the current segment is cut by the owner.
	os.WriteFile(seg, append(append([]byte{}, good...), `{"v":2,"rows":[{"id":"4"`...), 0o644)
	segs, err := s.Load(dir, id, state.TailTruncate)
	if err != nil || len(segs) != 1 || len(segs[0]) != 3 {
		t.Fatalf("after torn tail: %v %v", segs, err)
	}
	if got, _ := os.ReadFile(seg); string(got) != string(good) {
		t.Fatal("torn tail not truncated")
	}
	// The index is bound to its session identity.
	if _, err := s.ReadIndex(dir, "agent:executor:project.a"); err == nil {
		t.Fatal("index admitted for another session")
	}
	for _, bad := range []string{"planner:x", "agent:planner", "agent::x"} {
		if _, _, err := conversations.ParseSessionID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestAppendRevalidatesAFileChangedByOthers: appends skip re-reading a
// segment only while it is exactly as this store left it; a torn tail
// written behind its back is cut before the next append, and an orphan
// result written behind its back stops it.
func TestAppendRevalidatesAFileChangedByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "executor")
	s := conversations.New(state.New(state.Options{}))
	id := conversations.SessionID("executor", "project.a")
	if err := s.Establish(dir, id); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(dir, id, []conversations.Row{row("1", "user", ""), row("2", "tool_call", "a")}); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "versions", "1.jsonl")
	good, _ := os.ReadFile(seg)

	os.WriteFile(seg, append(append([]byte{}, good...), `{"v":2,"rows":[{"id":"x"`...), 0o644)
	if err := s.Append(dir, id, []conversations.Row{row("3", "tool_result", "a")}); err != nil {
		t.Fatalf("append after a torn tail: %v", err)
	}
	segs, err := s.Load(dir, id, state.TailFail)
	if err != nil || len(segs[0]) != 3 {
		t.Fatalf("after append: %v %v", segs, err)
	}

	now, _ := os.ReadFile(seg)
	os.WriteFile(seg, append(append([]byte{}, now...), `{"v":2,"rows":[{"id":"9","kind":"tool_result","call_id":"zz"}]}`+"\n"...), 0o644)
	if err := s.Append(dir, id, []conversations.Row{row("4", "user", "")}); err == nil || !strings.Contains(err.Error(), "no earlier call") {
		t.Fatalf("append after an orphan written by another: %v", err)
	}
}

// TestLoadCurrentMatchesAFreshRead: the rows LoadCurrent serves from memory
// (unchanged file) are exactly what a store reading the file anew decodes,
// callers cannot alter them, and an append by another writer is seen.
func TestLoadCurrentMatchesAFreshRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "executor")
	pub := state.New(state.Options{})
	s := conversations.New(pub)
	id := conversations.SessionID("executor", "project.a")
	if err := s.Establish(dir, id); err != nil {
		t.Fatal(err)
	}
	call := row("2", "tool_call", "a")
	call.Name, call.Content = "read", json.RawMessage(`{ "arguments" : "{\"path\": \"main.go\"}" }`) // compacted on disk
	if err := s.Append(dir, id, []conversations.Row{row("1", "user", ""), call}); err != nil {
		t.Fatal(err)
	}
	fresh := func() []conversations.Row {
		t.Helper()
		cur, err := conversations.New(pub).LoadCurrent(dir, id, state.TailFail)
		if err != nil {
			t.Fatal(err)
		}
		return cur.Rows
	}
	load := func() []conversations.Row {
		t.Helper()
		cur, err := s.LoadCurrent(dir, id, state.TailTruncate)
		if err != nil {
			t.Fatal(err)
		}
		return cur.Rows
	}
	if got, want := load(), fresh(); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Fatalf("after append: %+v, a fresh read gives %+v", got, want)
	}
	got := load()
	got[0].ID = "changed"
	if again := load(); again[0].ID != "1" {
		t.Fatal("a caller's change reached the store's rows")
	}

	other := conversations.New(pub)
	if err := other.Append(dir, id, []conversations.Row{row("3", "tool_result", "a")}); err != nil {
		t.Fatal(err)
	}
	if got := load(); len(got) != 3 || got[2].ID != "3" {
		t.Fatalf("an append by another writer is not seen: %+v", got)
	}
	if err := s.Append(dir, id, []conversations.Row{row("4", "user", "")}); err != nil {
		t.Fatal(err)
	}
	if got, want := load(), fresh(); !reflect.DeepEqual(got, want) || len(got) != 4 {
		t.Fatalf("after both: %+v, a fresh read gives %+v", got, want)
	}
}
