package trigram_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/trigram"
	"github.com/agentstack/agentstack/sqlitedb"
)

var people = []struct{ name, org string }{
	{"Anna Verdi", "Politecnico di Milano"},      // 1
	{"Al Bruni", "Fiat"},                         // 2
	{"Marco Rossi", "Studio Rossi"},              // 3
	{"Chiara Galli", "Università di Bologna"},    // 4
	{"Anna Bianchi", "Fiat"},                     // 5
	{"Giulia Neri", "Politecnico di Milano, 3D"}, // 6
}

func newIndex(t *testing.T, opts trigram.Options) *trigram.Index {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "index.sqlitedb"), sqlitedb.Options{Migrations: []string{
		`CREATE VIRTUAL TABLE people_fts USING fts5(name, organization, tokenize = 'trigram');`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i, p := range people {
		if _, err := db.Exec(`INSERT INTO people_fts (rowid, name, organization) VALUES (?, ?, ?)`, i+1, search.Fold(p.name), search.Fold(p.org)); err != nil {
			t.Fatal(err)
		}
	}
	opts.Table, opts.Columns, opts.Weights = "people_fts", []string{"name", "organization"}, []float64{10, 2}
	if opts.ScanLimit == 0 {
		opts.ScanLimit = 1000
	}
	return trigram.New(db, opts)
}

func TestCandidates(t *testing.T) {
	ctx := context.Background()
	x := newIndex(t, trigram.Options{})
	all := newIndex(t, trigram.Options{TermlessMatchesAll: true})
	for _, tc := range []struct {
		name  string
		index *trigram.Index
		text  string
		all   bool
		limit int
		want  []int64
		sort  bool // compare as a set: BM25 ties have no meaningful order
	}{
		{name: "one term", index: x, text: "anna", all: true, limit: 10, want: []int64{1, 5}, sort: true},
		{name: "every term must match", index: x, text: "anna polimi milano", all: true, limit: 10, want: nil},
		{name: "terms ANDed", index: x, text: "anna milano", all: true, limit: 10, want: []int64{1}},
		{name: "any term", index: x, text: "verdi rossi", all: false, limit: 10, want: []int64{1, 3}, sort: true},
		{name: "folded, accents ignored", index: x, text: "UNIVERSITÀ", all: true, limit: 10, want: []int64{4}},
		{name: "name outranks organization", index: x, text: "rossi", all: true, limit: 10, want: []int64{3}},
		{name: "short term checked on the text", index: x, text: "al", all: true, limit: 10, want: []int64{2}},
		{name: "short and long terms", index: x, text: "3d milano", all: true, limit: 10, want: []int64{6}},
		{name: "short term must be a whole word", index: x, text: "an", all: true, limit: 10, want: nil},
		{name: "FTS5 syntax is text", index: x, text: `"); DROP TABLE people_fts; --`, all: true, limit: 10, want: nil},
		{name: "column filter is text", index: x, text: "name:anna", all: true, limit: 10, want: nil},
		{name: "no terms, none", index: x, text: "?!", all: true, limit: 10, want: nil},
		{name: "no terms, all rows", index: all, text: "?!", all: true, limit: 4, want: []int64{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.index.Candidates(ctx, tc.text, tc.all, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if tc.sort {
				slices.Sort(got)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Candidates(%q, all=%t) = %v, want %v", tc.text, tc.all, got, tc.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	if got, err := newIndex(t, trigram.Options{}).Candidates(ctx, "fiat", true, 1); err != nil || len(got) != 1 || got[0] != 2 && got[0] != 5 {
		t.Errorf("limit 1: %v (%v), want one of the two Fiat rows", got, err)
	}
	// A short-only query reads rows one by one, at most ScanLimit of them.
	for _, tc := range []struct {
		scan int
		want []int64
	}{{scan: 6, want: []int64{6}}, {scan: 5, want: nil}} {
		got, err := newIndex(t, trigram.Options{ScanLimit: tc.scan}).Candidates(ctx, "3d", true, 10)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("scan limit %d: %v (%v), want %v (the row is the sixth)", tc.scan, got, err, tc.want)
		}
	}
}

func TestNewPanicsOnUnsafeNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts trigram.Options
	}{
		{"injected table", trigram.Options{Table: "t; DROP TABLE x", Columns: []string{"a"}, Weights: []float64{1}}},
		{"quoted column", trigram.Options{Table: "t", Columns: []string{`"a"`}, Weights: []float64{1}}},
		{"weights missing", trigram.Options{Table: "t", Columns: []string{"a", "b"}, Weights: []float64{1}}},
		{"no columns", trigram.Options{Table: "t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p == nil || !strings.HasPrefix(p.(string), "trigram.New") {
					t.Errorf("New did not panic usefully: %v", p)
				}
			}()
			trigram.New((*sql.DB)(nil), tc.opts)
		})
	}
}
