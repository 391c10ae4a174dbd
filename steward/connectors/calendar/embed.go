package calendar

import (
	"database/sql"
	"strings"

	"github.com/agentstack/agentstack/search/vecindex"
)

// Embedder turns texts into vectors (the gateway's local-embed model in
// production). Without one the index and its searches are lexical only.
type Embedder = vecindex.Embedder

// newVectors returns the vector side of the index open in db: one vector
// per event, made from its title, location, calendar and notes.
func newVectors(db *sql.DB) *vecindex.Store {
	return vecindex.New(db, vecindex.Options{
		Rows: "events", Vectors: "events_vec", Meta: "meta",
		TextColumns: []string{"title", "location", "calendar", "notes"},
		Text:        func(c []string) (string, error) { return strings.TrimSpace(strings.Join(c, "\n")), nil },
		Item:        "event", Items: "events", Name: "calendar",
	})
}
