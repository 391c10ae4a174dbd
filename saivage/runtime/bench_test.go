package runtime

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// BenchmarkSessionContext measures rebuilding a provider context from a
// persisted session, which every model call does: read the current
// segment strictly and project its rows (500 rows: 100 rounds of an
// assistant message, a tool call and a 1 KiB result, plus user text).
func BenchmarkSessionContext(b *testing.B) {
	pub := state.New(state.Options{SkipSync: true})
	store := conversations.New(pub)
	dir := filepath.Join(b.TempDir(), "sess")
	id := conversations.SessionID("executor", "project.a")
	if err := store.Establish(dir, id); err != nil {
		b.Fatal(err)
	}
	result := rawJSON(map[string]any{"content": string(make([]byte, 1024)), "is_error": false})
	for i := range 100 {
		src := fmt.Sprintf("s%d", i)
		rows := []conversations.Row{
			userRow(src, "", "continue with step "+fmt.Sprint(i)),
			{ID: src + ":assistant:1", Kind: "assistant", Content: rawJSON(map[string]string{"text": "working"})},
			{ID: src + ":1:tool-call:c", Kind: "tool_call", CallID: "c", Name: "read", Content: rawJSON(map[string]string{"arguments": `{"path":"main.go"}`})},
			{ID: src + ":1:tool-result:c", Kind: "tool_result", CallID: "c", Name: "read", Content: result},
			{ID: src + ":assistant:2", Kind: "assistant", Content: rawJSON(map[string]string{"text": "next"})},
		}
		if err := store.Append(dir, id, rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		cur, err := store.LoadCurrent(dir, id, state.TailIgnore)
		if err != nil {
			b.Fatal(err)
		}
		if msgs := rowsToMessages(cur.Rows); len(msgs) != 400 {
			b.Fatalf("%d messages", len(msgs))
		}
	}
}
