package contacts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/search/vecindex"
)

// Limits of the read tools.
const (
	DefaultLimit        = 10
	MaxLimit            = 50
	DefaultResolveLimit = 5
	MaxResolveLimit     = 20
	LexicalCandidates   = 200
	VectorCandidates    = 20
)

// ErrNotFound reports an unknown contact.
var ErrNotFound = errors.New("not found")

// Service answers the contacts tools from an index.
type Service struct {
	idx *Index
	emb Embedder
}

// NewService returns the read tools over idx; emb may be nil (lexical only).
func NewService(idx *Index, emb Embedder) *Service { return &Service{idx: idx, emb: emb} }

// SearchParams are the arguments of search_contacts.
type SearchParams struct {
	Query  string `json:"query,omitempty" jsonschema:"name, organization, role, email, phone or any remembered detail; empty lists everyone alphabetically"`
	Limit  int    `json:"limit,omitempty" jsonschema:"results per page, default 10, at most 50"`
	Offset int    `json:"offset,omitempty" jsonschema:"results to skip, for the next page"`
}

// ContactSummary is one compact search result.
type ContactSummary struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind         string    `json:"kind"`
	UID          string    `json:"uid"`
	Name         string    `json:"name"`
	Organization string    `json:"organization,omitempty"`
	Title        string    `json:"title,omitempty"`
	Emails       []Labeled `json:"emails,omitempty"`
	Phones       []Labeled `json:"phones,omitempty"`
	Sources      int       `json:"sources"`
	Score        float64   `json:"score,omitempty"`
}

// SearchResult is one page of search_contacts.
type SearchResult struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind       string           `json:"kind"`
	Ranking    string           `json:"ranking"` // alphabetical, lexical or hybrid
	Total      int              `json:"total"`
	Offset     int              `json:"offset"`
	Limit      int              `json:"limit"`
	NextOffset *int             `json:"nextOffset,omitempty"`
	Contacts   []ContactSummary `json:"contacts"`
	Warnings   []string         `json:"warnings,omitempty"`
}

func summarize(p *Person, score float64) ContactSummary {
	return ContactSummary{UID: p.UID, Name: p.Name, Organization: p.Org, Title: p.Title, Emails: p.Emails, Phones: p.Phones,
		Sources: len(p.Sources), Score: score}
}

// SearchContacts implements search_contacts: keyword candidates (every term
// must match) fused with semantic neighbours when an embedder is available.
func (s *Service) SearchContacts(ctx context.Context, p SearchParams) (*SearchResult, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return nil, errors.New("limit and offset must not be negative")
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	res := &SearchResult{Offset: p.Offset, Limit: limit, Contacts: []ContactSummary{}}
	var order []int64
	scores := map[int64]float64{}
	query := strings.TrimSpace(p.Query)
	if query == "" {
		res.Ranking = "alphabetical"
		rows, err := s.idx.db.QueryContext(ctx, `SELECT id FROM people ORDER BY name COLLATE NOCASE, uid`)
		if err != nil {
			return nil, fmt.Errorf("list contacts: %w", err)
		}
		order, err = scanIDs(rows)
		if err != nil {
			return nil, err
		}
	} else {
		lex, err := s.idx.text.Candidates(ctx, query, true, LexicalCandidates)
		if err != nil {
			return nil, err
		}
		res.Ranking = "lexical"
		near, err := s.idx.vectors.SearchText(ctx, s.emb, query, VectorCandidates)
		if err != nil {
			res.Warnings = append(res.Warnings, err.Error())
		}
		if near != nil {
			res.Ranking = "hybrid"
		}
		order, scores = vecindex.Fuse(lex, near)
	}
	res.Total = len(order)
	end := min(p.Offset+limit, len(order))
	if p.Offset < end {
		people, err := s.idx.peopleByID(ctx, order[p.Offset:end])
		if err != nil {
			return nil, err
		}
		for _, id := range order[p.Offset:end] {
			if person, ok := people[id]; ok {
				res.Contacts = append(res.Contacts, summarize(person, scores[id]))
			}
		}
	}
	if end < len(order) {
		res.NextOffset = &end
	}
	return res, nil
}

func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (x *Index) peopleByID(ctx context.Context, ids []int64) (map[int64]*Person, error) {
	out := map[int64]*Person{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := x.db.QueryContext(ctx, `SELECT id, data FROM people WHERE id IN (?`+strings.Repeat(",?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("load contacts: %w", err)
		}
		for rows.Next() {
			var id int64
			var data string
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return nil, err
			}
			var p Person
			if err := json.Unmarshal([]byte(data), &p); err != nil {
				rows.Close()
				return nil, fmt.Errorf("decode contact %d: %w", id, err)
			}
			out[id] = &p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReadParams are the arguments of read_contact.
type ReadParams struct {
	UID string `json:"uid" jsonschema:"the contact's uid from search_contacts, a native person id, or an email address"`
}

// ReadContact implements read_contact: the full merged record, including
// every contributing source's native person id.
func (s *Service) ReadContact(ctx context.Context, p ReadParams) (*Person, error) {
	key := strings.TrimSpace(p.UID)
	if key == "" {
		return nil, errors.New("uid is required")
	}
	rows, err := s.idx.db.QueryContext(ctx, `SELECT id FROM people WHERE uid = ?
		UNION SELECT person_id FROM person_sources WHERE native_id = ?
		UNION SELECT person_id FROM person_emails WHERE email = ? LIMIT 2`, key, key, NormalizeEmail(key))
	if err != nil {
		return nil, fmt.Errorf("read contact: %w", err)
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no contact with uid, native id or email %q", ErrNotFound, key)
	}
	people, err := s.idx.peopleByID(ctx, ids[:1])
	if err != nil {
		return nil, err
	}
	return people[ids[0]], nil
}
