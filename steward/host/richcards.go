package host

import (
	"context"
	"encoding/json"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/pathguard"
)

// fileCardTools are the built-in connectors' tools whose file cards may be
// opened from the web app: their paths passed the connector's own
// sensitive-path guard. Another MCP server's paths are never served.
var fileCardTools = map[string]bool{
	"mcp__documents__document_info": true,
	"mcp__shell__find_files":        true,
}

// richData returns the card data of a tool result and its kind: the
// result's own {"kind": …}, or an MCP result's structuredContent when that
// carries a kind (as the connectors emit it).
func richData(data json.RawMessage) (json.RawMessage, string) {
	// A card carries the structured data, not the MCP wrapper.
	var wrapped struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if len(data) > 0 && json.Unmarshal(data, &wrapped) == nil {
		if k := dataKind(wrapped.StructuredContent); k != "" {
			return wrapped.StructuredContent, k
		}
	}
	return data, dataKind(data)
}

// fileOpener registers the files of file cards in the upload registry, so
// the web app opens them as GET /file/{token} and never by path.
type fileOpener struct {
	store *chats.Store
	guard *pathguard.Guard
}

// addTokens sets "token" on each file of a file or search_results card from
// one of fileCardTools whose path is a regular file the guard allows.
func (o *fileOpener) addTokens(ctx context.Context, tool string, data json.RawMessage) json.RawMessage {
	if o == nil || o.store == nil || !fileCardTools[tool] {
		return data
	}
	var card map[string]any
	if json.Unmarshal(data, &card) != nil {
		return data
	}
	changed := false
	visit := func(item map[string]any) {
		if item["kind"] != "file" {
			return
		}
		if tok := o.register(ctx, item["path"]); tok != "" {
			item["token"], changed = tok, true
		}
	}
	visit(card)
	for _, key := range []string{"items", "files"} {
		if list, ok := card[key].([]any); ok {
			for _, it := range list {
				if m, ok := it.(map[string]any); ok {
					visit(m)
				}
			}
		}
	}
	if !changed {
		return data
	}
	out, err := json.Marshal(card)
	if err != nil {
		return data
	}
	return out
}

func (o *fileOpener) register(ctx context.Context, p any) string {
	path, _ := p.(string)
	clean, err := o.guard.Check(path)
	if err != nil {
		return ""
	}
	info, err := os.Stat(clean)
	if err != nil || !info.Mode().IsRegular() {
		return ""
	}
	typ := mime.TypeByExtension(filepath.Ext(clean))
	if typ == "" || strings.HasPrefix(typ, "text/html") {
		typ = "application/octet-stream"
	}
	tok := newToken()
	if err := o.store.RegisterFile(ctx, chats.File{Token: tok, Name: displayName(clean), MIME: typ, Size: info.Size(), Path: clean, CreatedAt: time.Now()}); err != nil {
		return ""
	}
	return tok
}
