package sqlitedb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/sqlitedb"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, filepath.Join(dir, "notes.db"), sqlitedb.Options{Migrations: []string{
		`CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)`,
		`CREATE VIRTUAL TABLE notes_fts USING fts5(body, tokenize='trigram')`,
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.Exec(`INSERT INTO notes_fts(body) VALUES ('Frecciarossa 9544 to Torino')`)
	var body string
	db.QueryRow(`SELECT body FROM notes_fts WHERE notes_fts MATCH '"9544"'`).Scan(&body)
	v, _ := sqlitedb.Version(ctx, db)
	fmt.Println(v, body)
	// Output: 2 Frecciarossa 9544 to Torino
}
