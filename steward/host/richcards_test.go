package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/pathguard"
)

func TestRichDataUnwrapsStructuredContent(t *testing.T) {
	tests := []struct{ in, kind, data string }{
		{`{"kind":"email","subject":"x"}`, "email", `{"kind":"email","subject":"x"}`},
		{`{"content":[{"type":"text","text":"{}"}],"structuredContent":{"kind":"train","status":"found"}}`, "train", `{"kind":"train","status":"found"}`},
		{`{"content":[{"type":"text","text":"{}"}],"structuredContent":{"status":"found"}}`, "", `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"status":"found"}}`},
		{``, "", ``},
	}
	for _, tt := range tests {
		data, kind := richData(json.RawMessage(tt.in))
		if kind != tt.kind || string(data) != tt.data {
			t.Errorf("richData(%s) = %s, %q", tt.in, data, kind)
		}
	}
}

func TestFileCardsGetTokensOnlyForAllowedFiles(t *testing.T) {
	ctx := context.Background()
	home, data := t.TempDir(), t.TempDir()
	store, err := chats.Open(ctx, filepath.Join(data, "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ok := filepath.Join(home, "report.pdf")
	secret := filepath.Join(home, ".ssh", "id_ed25519")
	inData := filepath.Join(data, "chats.db")
	os.WriteFile(ok, []byte("report"), 0o600)
	os.MkdirAll(filepath.Dir(secret), 0o700)
	os.WriteFile(secret, []byte("key"), 0o600)
	o := &fileOpener{store: store, guard: pathguard.New(pathguard.Options{Home: home, DataDir: data})}
	card, _ := json.Marshal(map[string]any{"kind": "search_results", "files": []map[string]any{
		{"kind": "file", "path": ok}, {"kind": "file", "path": secret}, {"kind": "file", "path": inData}, {"kind": "file", "path": filepath.Join(home, "absent")}}})

	var out struct {
		Files []struct{ Path, Token string } `json:"files"`
	}
	json.Unmarshal(o.addTokens(ctx, "mcp__shell__find_files", card), &out)
	if len(out.Files) != 4 || out.Files[0].Token == "" || out.Files[1].Token != "" || out.Files[2].Token != "" || out.Files[3].Token != "" {
		t.Fatalf("tokens %+v: only the ordinary existing file may be opened", out.Files)
	}
	rec, err := store.File(ctx, out.Files[0].Token)
	if err != nil || rec.Path != ok || rec.Name != "report.pdf" {
		t.Errorf("registered %+v %v", rec, err)
	}
	if got := o.addTokens(ctx, "mcp__someone__find_files", card); string(got) != string(card) {
		t.Errorf("another server's card was changed: %s", got)
	}
}
