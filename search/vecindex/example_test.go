package vecindex_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/search/vecindex/vecindextest"
	"github.com/agentstack/agentstack/sqlitedb"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "vecindex-example-")
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(ctx, filepath.Join(dir, "index.sqlitedb"), sqlitedb.Options{Migrations: []string{`
		CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
			content_hash TEXT NOT NULL, embedded_hash TEXT NOT NULL DEFAULT '');
		CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
		INSERT INTO notes (title, content_hash) VALUES
			('Dinner at the trattoria', 'h1'), ('ISO audit', 'h2'), ('Piano lesson', 'h3');`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	store := vecindex.New(db, vecindex.Options{
		Rows: "notes", Vectors: "notes_vec", Meta: "meta",
		TextColumns: []string{"title"},
		Text:        func(c []string) (string, error) { return c[0], nil },
		Item:        "note", Items: "notes", Name: "notes",
	})
	// A stand-in for local-embed that places texts by topic.
	emb := &vecindextest.Topics{Topics: [][]string{{"dinner", "lunch", "restaurant"}, {"audit", "certification"}, {"piano", "music"}}}
	n, err := store.EmbedPending(ctx, emb, nil)
	fmt.Println("embedded", n, err)

	near, err := store.SearchText(ctx, emb, "certification", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	order, _ := vecindex.Fuse([]int64{3}, near) // fuse with a lexical hit on row 3
	fmt.Println("nearest", near[0].ID, "fused", order)
	// Output:
	// embedded 3 <nil>
	// nearest 2 fused [3 2]
}
