package contacts

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/search/vecindex"
)

// Embedder turns texts into vectors (the gateway's local-embed model in
// production). Without one the index and its searches are lexical only.
type Embedder = vecindex.Embedder

// embedText is what a person's vector represents: who they are and where
// they work, not their phone numbers.
func embedText(p *Person) string {
	var emails []string
	for _, e := range p.Emails {
		emails = append(emails, e.Value)
	}
	return strings.Join(nonEmpty(p.Name, p.Nickname, p.Title, p.Org, p.Department, strings.Join(emails, " "), p.Notes), "\n")
}

// newVectors returns the vector side of the index open in db: one vector
// per person, made from the stored merged record.
func newVectors(db *sql.DB) *vecindex.Store {
	return vecindex.New(db, vecindex.Options{
		Rows: "people", Vectors: "people_vec", Meta: "meta",
		TextColumns: []string{"data"},
		Text: func(c []string) (string, error) {
			var p Person
			if err := json.Unmarshal([]byte(c[0]), &p); err != nil {
				return "", fmt.Errorf("decode stored person: %w", err)
			}
			return embedText(&p), nil
		},
		Item: "person", Items: "people", Name: "contacts",
	})
}
