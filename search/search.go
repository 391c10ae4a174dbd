// Package search holds the hybrid-search helpers shared by the mail,
// calendar, contacts, documents and wiki indexes: reciprocal rank fusion,
// FTS5 query quoting, text folding and cosine similarity.
package search

import (
	"math"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// DefaultRRFK is the reciprocal rank fusion constant the spec uses.
const DefaultRRFK = 60

// Fused is one item of a fused ranking.
type Fused struct {
	ID    string
	Score float64
	// Ranks holds the 1-based rank of the item in each input list, 0 where absent.
	Ranks []int
}

// RRF merges rankings (best first, IDs unique within a list) by reciprocal
// rank fusion: score = Σ 1/(k + rank). It compares rank positions, never raw
// scores, because BM25 and vector distances live on incompatible scales.
// Ties keep the order of first appearance, so the result is deterministic.
func RRF(k int, lists ...[]string) []Fused {
	if k <= 0 {
		k = DefaultRRFK
	}
	index := map[string]int{}
	var out []Fused
	for li, list := range lists {
		for r, id := range list {
			i, ok := index[id]
			if !ok {
				i = len(out)
				index[id] = i
				out = append(out, Fused{ID: id, Ranks: make([]int, len(lists))})
			}
			if out[i].Ranks[li] != 0 {
				continue // duplicate within one list: keep the better rank
			}
			out[i].Ranks[li] = r + 1
			out[i].Score += 1 / float64(k+r+1)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Score > out[b].Score })
	return out
}

// Fold lowercases s and strips diacritics ("Città" → "citta") for
// accent-insensitive matching.
func Fold(s string) string {
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return strings.ToLower(out)
}

// Terms splits s into folded word terms (letters and digits).
func Terms(s string) []string {
	return strings.FieldsFunc(Fold(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// FTSQuery turns free user text into a safe FTS5 MATCH expression: every
// term becomes a quoted string, so operators, column filters and stray quotes
// in the input are matched literally instead of being parsed as syntax.
// Terms are ANDed; with any=true they are ORed. An input with no terms gives "".
// minLen drops shorter terms (a trigram index cannot match terms under 3 characters).
func FTSQuery(text string, any bool, minLen int) string {
	var parts []string
	seen := map[string]bool{}
	for _, t := range Terms(text) {
		if len([]rune(t)) < minLen || seen[t] {
			continue
		}
		seen[t] = true
		parts = append(parts, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
	}
	sep := " AND "
	if any {
		sep = " OR "
	}
	return strings.Join(parts, sep)
}

// Cosine returns the cosine similarity of a and b, or 0 when their lengths
// differ or either is zero.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
