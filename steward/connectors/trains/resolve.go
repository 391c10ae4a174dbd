package trains

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/search"
)

// Resolver thresholds (spec: Dictated Station Resolution).
const (
	SoleCandidateMin = 0.68 // a lone candidate is accepted at this score
	MultiBestMin     = 0.86 // with several, the best must reach this
	MultiLeadMin     = 0.08 // … and lead the runner-up by this much
	MaxAmbiguous     = 8    // candidates returned for clarification
	maxBroadTokens   = 4    // tokens broadened into extra queries
)

// Resolution statuses.
const (
	StatusResolved  = "resolved"
	StatusAmbiguous = "ambiguous_station"
	StatusNotFound  = "station_not_found"
)

// Match kinds of a resolved station.
const (
	MatchCanonical = "canonical_exact" // the name or short name is the query
	MatchLabel     = "label_exact"     // the generic label is the query
	MatchRanked    = "ranked"          // similarity with enough confidence and margin
)

// Candidate is a station with its similarity to the query.
type Candidate struct {
	Station
	Score float64 `json:"score"`
}

// Resolution is the resolver's answer for one dictated station name.
type Resolution struct {
	Status     string      `json:"status"`
	Query      string      `json:"query"`
	Station    *Station    `json:"station,omitempty"`
	Match      string      `json:"match,omitempty"`
	Score      float64     `json:"score,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
}

// StationSearcher is the autocomplete the resolver sits above.
type StationSearcher interface {
	SearchStations(ctx context.Context, prefix string) ([]Station, error)
}

// Resolver turns a dictated station name into one station, or an explicit
// ambiguity. It is stateless: every query derives only from the utterance,
// never from a history of stations, memory or conversation.
type Resolver struct{ src StationSearcher }

// NewResolver returns a resolver over src.
func NewResolver(src StationSearcher) *Resolver { return &Resolver{src: src} }

// Resolve resolves query: the exact request first, then — only when it
// returns nothing — token and 3-character-prefix queries; candidates are
// de-duplicated by station id and decided by canonical exact, label exact,
// then ranked similarity.
func (r *Resolver) Resolve(ctx context.Context, query string) (*Resolution, error) {
	query = strings.Join(strings.Fields(query), " ")
	if query == "" {
		return nil, errors.New("a station name is required")
	}
	if len([]rune(query)) > 120 {
		return nil, errors.New("a station name is at most 120 characters")
	}
	cands, err := r.src.SearchStations(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("search station %q: %w", query, err)
	}
	if len(cands) == 0 {
		if cands, err = r.broaden(ctx, query); err != nil {
			return nil, err
		}
	}
	return decide(query, dedupe(cands)), nil
}

// broaden queries each normalised token of at least three characters and its
// 3-character prefix.
func (r *Resolver) broaden(ctx context.Context, query string) ([]Station, error) {
	var queries []string
	seen := map[string]bool{}
	add := func(q string) {
		if !seen[q] {
			seen[q] = true
			queries = append(queries, q)
		}
	}
	n := 0
	for _, tok := range tokens(query) {
		if len([]rune(tok)) < 3 || n >= maxBroadTokens {
			continue
		}
		n++
		add(tok)
		add(string([]rune(tok)[:3]))
	}
	if len(queries) == 0 {
		return nil, nil
	}
	type result struct {
		st  []Station
		err error
	}
	results := make([]result, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Go(func() {
			st, err := r.src.SearchStations(ctx, q)
			results[i] = result{st, err}
		})
	}
	wg.Wait()
	var out []Station
	var errs []error
	for _, res := range results {
		out = append(out, res.st...)
		if res.err != nil {
			errs = append(errs, res.err)
		}
	}
	if len(errs) == len(queries) {
		return nil, fmt.Errorf("search station %q: %w", query, errors.Join(errs...))
	}
	return out, nil
}

func dedupe(in []Station) []Station {
	seen := map[string]int{}
	var out []Station
	for _, s := range in {
		if i, ok := seen[s.ID]; ok {
			// Keep the richer record (JSON form has short name and label).
			if out[i].ShortName == "" && out[i].Label == "" {
				out[i] = s
			}
			continue
		}
		seen[s.ID] = len(out)
		out = append(out, s)
	}
	return out
}

func decide(query string, cands []Station) *Resolution {
	res := &Resolution{Query: query}
	if len(cands) == 0 {
		res.Status = StatusNotFound
		return res
	}
	q := compact(query)
	if s := uniqueWhere(cands, func(s Station) bool { return compact(s.Name) == q || (s.ShortName != "" && compact(s.ShortName) == q) }); s != nil {
		res.Status, res.Station, res.Match, res.Score = StatusResolved, s, MatchCanonical, 1
		return res
	}
	if s := uniqueWhere(cands, func(s Station) bool { return s.Label != "" && compact(s.Label) == q }); s != nil {
		res.Status, res.Station, res.Match, res.Score = StatusResolved, s, MatchLabel, 1
		return res
	}
	ranked := make([]Candidate, len(cands))
	for i, s := range cands {
		best := Similarity(query, s.Name)
		for _, alt := range []string{s.ShortName, s.Label} {
			if alt != "" {
				best = max(best, Similarity(query, alt))
			}
		}
		ranked[i] = Candidate{Station: s, Score: round3(best)}
	}
	sort.SliceStable(ranked, func(a, b int) bool {
		if ranked[a].Score != ranked[b].Score {
			return ranked[a].Score > ranked[b].Score
		}
		return ranked[a].Name < ranked[b].Name
	})
	top := ranked[0]
	ok := (len(ranked) == 1 && top.Score >= SoleCandidateMin) ||
		(len(ranked) > 1 && top.Score >= MultiBestMin && top.Score-ranked[1].Score >= MultiLeadMin)
	if ok {
		s := top.Station
		res.Status, res.Station, res.Match, res.Score = StatusResolved, &s, MatchRanked, top.Score
		return res
	}
	res.Status = StatusAmbiguous
	res.Candidates = ranked[:min(len(ranked), MaxAmbiguous)]
	return res
}

func uniqueWhere(cands []Station, pred func(Station) bool) *Station {
	var found *Station
	for i := range cands {
		if pred(cands[i]) {
			if found != nil {
				return nil
			}
			found = &cands[i]
		}
	}
	return found
}

func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

// tokens normalises s: diacritics removed, punctuation as spaces, lower case.
func tokens(s string) []string { return search.Terms(s) }

// normal is the spaced normal form; compact drops the spaces.
func normal(s string) string  { return strings.Join(tokens(s), " ") }
func compact(s string) string { return strings.Join(tokens(s), "") }

// Similarity scores a dictated query against a station name in [0, 1]: the
// greater of 0.55·Levenshtein + 0.35·padded-trigram Dice + 0.10·token overlap
// and 0.92·containment (when one compact form contains the other).
func Similarity(query, name string) float64 {
	a, b := normal(query), normal(name)
	if a == "" || b == "" {
		return 0
	}
	blend := 0.55*levenshteinSim(a, b) + 0.35*trigramDice(a, b) + 0.10*tokenOverlap(a, b)
	ca, cb := compact(query), compact(name)
	contain := 0.0
	if strings.Contains(ca, cb) || strings.Contains(cb, ca) {
		la, lb := len([]rune(ca)), len([]rune(cb))
		contain = 0.92 * float64(min(la, lb)) / float64(max(la, lb))
	}
	return max(blend, contain)
}

func levenshteinSim(a, b string) float64 {
	ra, rb := []rune(a), []rune(b)
	if len(ra) == 0 && len(rb) == 0 {
		return 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return 1 - float64(prev[len(rb)])/float64(max(len(ra), len(rb)))
}

// trigramDice compares the trigram sets of the strings padded with two
// leading spaces and one trailing space.
func trigramDice(a, b string) float64 {
	ta, tb := trigrams(a), trigrams(b)
	if len(ta) == 0 || len(tb) == 0 {
		return 0
	}
	common := 0
	for t := range ta {
		if tb[t] {
			common++
		}
	}
	return 2 * float64(common) / float64(len(ta)+len(tb))
}

func trigrams(s string) map[string]bool {
	r := []rune("  " + s + " ")
	out := map[string]bool{}
	for i := 0; i+3 <= len(r); i++ {
		out[string(r[i:i+3])] = true
	}
	return out
}

// tokenOverlap is the share of query tokens present in the name.
func tokenOverlap(query, name string) float64 {
	q := strings.Fields(query)
	have := map[string]bool{}
	for _, t := range strings.Fields(name) {
		have[t] = true
	}
	n := 0
	for _, t := range q {
		if have[t] {
			n++
		}
	}
	return float64(n) / float64(len(q))
}
