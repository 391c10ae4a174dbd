package contacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentstack/agentstack/search"
)

// ResolveParams are the arguments of resolve_recipient.
type ResolveParams struct {
	Description string `json:"description" jsonschema:"who the message is for: a name, 'Anna from Polimi', 'my accountant', or an email address"`
	Limit       int    `json:"limit,omitempty" jsonschema:"candidates to return, default 5, at most 20"`
}

// Candidate is one possible recipient with the reasons it matched.
type Candidate struct {
	UID          string    `json:"uid"`
	Name         string    `json:"name"`
	Organization string    `json:"organization,omitempty"`
	Title        string    `json:"title,omitempty"`
	Emails       []Labeled `json:"emails"`
	Score        float64   `json:"score"`
	MatchedOn    []string  `json:"matchedOn"`
}

// Resolution is the result of resolve_recipient. It never selects a
// recipient: the agent (or the user) decides among the candidates.
type Resolution struct {
	Description string      `json:"description"`
	Candidates  []Candidate `json:"candidates"`
	Ambiguous   bool        `json:"ambiguous"`
	Note        string      `json:"note"`
	Warnings    []string    `json:"warnings,omitempty"`
}

// connectors introduce the context part of a description ("Anna from
// Polimi", "Marco at ACME", "Giulia di Fastweb").
var connectors = []string{"from", "at", "of", "in", "with", "di", "da", "del", "della", "presso", "von", "bei", "de", "chez"}

// fillers carry no identity ("my accountant", "send it to the lawyer").
var fillers = []string{"my", "our", "the", "a", "an", "to", "for", "mr", "mrs", "ms", "dr", "mio", "mia", "il", "la", "lo",
	"email", "mail", "send", "write", "contact", "someone", "person", "his", "her", "their"}

// ResolveRecipient implements resolve_recipient: it ranks email-bearing
// people against a description. Name words are matched against names, then
// against titles, organisations and notes (so "accountant" finds a role);
// words after "from", "at", "di"… must match the organisation, an email
// domain or an abbreviation such as "Polimi" for "Politecnico di Milano".
// Semantic neighbours add a bonus when an embedder is available. Several
// close candidates, or one with several addresses, are flagged ambiguous.
func (s *Service) ResolveRecipient(ctx context.Context, p ResolveParams) (*Resolution, error) {
	desc := strings.TrimSpace(p.Description)
	if desc == "" {
		return nil, errors.New("description is required")
	}
	if len(desc) > 500 {
		return nil, errors.New("description is longer than 500 characters; describe the person in a few words")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultResolveLimit
	}
	limit = min(limit, MaxResolveLimit)
	res := &Resolution{Description: desc, Candidates: []Candidate{}}

	who, where := splitDescription(desc)
	var ids []int64
	for _, f := range strings.Fields(desc) {
		if e := NormalizeEmail(strings.Trim(f, ",;()")); strings.Contains(e, "@") {
			rows, err := s.idx.db.QueryContext(ctx, `SELECT person_id FROM person_emails WHERE email = ?`, e)
			if err != nil {
				return nil, fmt.Errorf("look up %s: %w", e, err)
			}
			found, err := scanIDs(rows)
			if err != nil {
				return nil, err
			}
			ids = append(ids, found...)
		}
	}
	lex, err := s.idx.text.Candidates(ctx, strings.Join(append(slices.Clone(who), where...), " "), false, LexicalCandidates)
	if err != nil {
		return nil, err
	}
	ids = append(ids, lex...)
	near, err := s.idx.vectors.SearchText(ctx, s.emb, desc, VectorCandidates)
	if err != nil {
		res.Warnings = append(res.Warnings, err.Error())
	}
	semantic := map[int64]float64{}
	for _, n := range near {
		// Cosine distance 0 is identical, 1 unrelated.
		if bonus := 2 * (1 - n.Distance); bonus > 0 {
			semantic[n.ID] = bonus
		}
		ids = append(ids, n.ID)
	}
	people, err := s.idx.peopleByID(ctx, dedupe(ids))
	if err != nil {
		return nil, err
	}
	for id, person := range people {
		if len(person.Emails) == 0 {
			continue // a recipient needs an address
		}
		c, whoMatched := score(person, who, where, desc)
		if len(who) > 0 && !whoMatched && semantic[id] == 0 {
			continue // "Anna from Polimi" is not any colleague of Polimi
		}
		if b := semantic[id]; b > 0 {
			c.Score += b
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("similar in meaning (+%.2f)", b))
		}
		if c.Score > 0 {
			res.Candidates = append(res.Candidates, c)
		}
	}
	sort.Slice(res.Candidates, func(a, b int) bool {
		ca, cb := res.Candidates[a], res.Candidates[b]
		if ca.Score != cb.Score {
			return ca.Score > cb.Score
		}
		if ca.Name != cb.Name {
			return ca.Name < cb.Name
		}
		return ca.UID < cb.UID
	})
	if len(res.Candidates) > limit {
		res.Candidates = res.Candidates[:limit]
	}
	switch n := len(res.Candidates); {
	case n == 0:
		res.Note = "No contact with an email address matches; ask the user for the address."
	case n > 1 && res.Candidates[1].Score >= 0.8*res.Candidates[0].Score:
		res.Ambiguous = true
		res.Note = "Several contacts match similarly; ask the user which one is meant before proposing a message."
	case len(res.Candidates[0].Emails) > 1:
		res.Ambiguous = true
		res.Note = "The best match has several addresses; confirm which one to use with the user."
	default:
		res.Note = "Best match listed first; confirm the recipient with the user before sending."
	}
	return res, nil
}

func dedupe(ids []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// splitDescription separates the words naming the person from the context
// words after the first connector, dropping fillers and email addresses.
func splitDescription(desc string) (who, where []string) {
	var words []string
	for _, f := range strings.Fields(desc) {
		if !strings.Contains(f, "@") {
			words = append(words, f)
		}
	}
	inContext := false
	for _, t := range search.Terms(strings.Join(words, " ")) {
		switch {
		case !inContext && slices.Contains(connectors, t) && len(who) > 0:
			inContext = true
		case slices.Contains(fillers, t) || slices.Contains(connectors, t):
		case inContext:
			where = append(where, t)
		default:
			who = append(who, t)
		}
	}
	return who, where
}

func words(s string) []string { return search.Terms(s) }

// matchWord reports whether term equals a word or (three letters or more)
// starts one.
func matchWord(term string, ws []string) (exact, prefix bool) {
	for _, w := range ws {
		if w == term {
			return true, true
		}
		if len(term) >= 3 && strings.HasPrefix(w, term) {
			prefix = true
		}
	}
	return false, prefix
}

// score rates one person against the description and says whether any of
// the words naming the person matched.
func score(p *Person, who, where []string, desc string) (Candidate, bool) {
	c := Candidate{UID: p.UID, Name: p.Name, Organization: p.Org, Title: p.Title, Emails: p.Emails}
	nameWords := words(strings.Join([]string{p.Name, p.First, p.Last, p.Nickname}, " "))
	orgWords := words(p.Org + " " + p.Department)
	roleWords := words(p.Title + " " + p.Notes)
	var domains []string
	for _, e := range p.Emails {
		if _, d, ok := strings.Cut(NormalizeEmail(e.Value), "@"); ok {
			domains = append(domains, d)
		}
		if strings.Contains(strings.ToLower(desc), NormalizeEmail(e.Value)) {
			c.Score += 10
			c.MatchedOn = append(c.MatchedOn, "email address "+e.Value)
		}
	}
	whoMatched := false
	for _, t := range who {
		before := c.Score
		if exact, prefix := matchWord(t, nameWords); exact {
			c.Score += 5
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("name %q", t))
		} else if prefix {
			c.Score += 3
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("name starts with %q", t))
		} else if exact, prefix := matchWord(t, roleWords); exact || prefix {
			c.Score += 3
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("title or notes mention %q", t))
		} else if exact, prefix := matchWord(t, orgWords); exact || prefix {
			c.Score += 2
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("organization %q", t))
		}
		whoMatched = whoMatched || c.Score > before
	}
	for _, t := range where {
		switch exact, prefix := matchWord(t, orgWords); {
		case exact || prefix:
			c.Score += 4
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("organization %q", t))
		case slices.ContainsFunc(domains, func(d string) bool { return strings.Contains(d, t) }):
			c.Score += 4
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("email domain contains %q", t))
		case len(t) >= 3 && abbreviates(t, orgWords):
			c.Score += 3
			c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("%q abbreviates %q", t, p.Org))
		default:
			if exact, prefix := matchWord(t, roleWords); exact || prefix {
				c.Score += 2
				c.MatchedOn = append(c.MatchedOn, fmt.Sprintf("title or notes mention %q", t))
			}
		}
	}
	return c, whoMatched
}

// abbreviates reports whether abbr is built from leading letters of at
// least two words in order, starting with the first ("polimi" = "poli"tecnico
// di "mi"lano; "pdm" = initials). Only linking words may be skipped.
func abbreviates(abbr string, ws []string) bool {
	if len(ws) < 2 || abbr == "" || len(abbr) > 24 {
		return false
	}
	ws = ws[:min(len(ws), 8)]
	var rec func(a string, i int) bool
	rec = func(a string, i int) bool {
		if a == "" {
			return true
		}
		for j := i; j < len(ws); j++ {
			w := ws[j]
			for k := min(len(w), len(a)); k >= 1; k-- {
				if a[:k] == w[:k] && rec(a[k:], j+1) {
					return true
				}
			}
			if !slices.Contains(connectors, w) {
				return false
			}
		}
		return false
	}
	first := ws[0]
	for k := min(len(first), len(abbr)-1); k >= 1; k-- {
		if abbr[:k] == first[:k] && rec(abbr[k:], 1) {
			return true
		}
	}
	return false
}
