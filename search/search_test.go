package search_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/sqlitedb"
)

func TestRRF(t *testing.T) {
	lexical := []string{"a", "b", "c"}
	semantic := []string{"c", "a", "d"}
	got := search.RRF(60, lexical, semantic)
	order := []string{}
	for _, f := range got {
		order = append(order, f.ID)
	}
	// a: 1/61+1/62, c: 1/63+1/61, b: 1/62, d: 1/63
	want := []string{"a", "c", "b", "d"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	if w := 1.0/61 + 1.0/62; math.Abs(got[0].Score-w) > 1e-12 {
		t.Errorf("score of a = %v, want %v", got[0].Score, w)
	}
	if got[3].Ranks[0] != 0 || got[3].Ranks[1] != 3 {
		t.Errorf("ranks of d = %v, want [0 3]", got[3].Ranks)
	}
	if len(search.RRF(0)) != 0 {
		t.Error("RRF of no lists is not empty")
	}
}

func ExampleRRF() {
	for _, f := range search.RRF(search.DefaultRRFK, []string{"mail-1", "mail-2"}, []string{"mail-2", "mail-3"}) {
		fmt.Println(f.ID, f.Ranks)
	}
	// Output:
	// mail-2 [2 1]
	// mail-1 [1 0]
	// mail-3 [0 2]
}

func TestFold(t *testing.T) {
	for in, want := range map[string]string{"Città": "citta", "ÉCOLE Müller": "ecole muller", "plain": "plain"} {
		if got := search.Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFTSQueryIsSafe runs hostile input through a real trigram FTS5 table:
// every query must parse and match literally.
func TestFTSQueryIsSafe(t *testing.T) {
	db, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), sqlitedb.Options{Migrations: []string{
		`CREATE VIRTUAL TABLE d USING fts5(body, tokenize='trigram')`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Exec(`INSERT INTO d(body) VALUES ('invoice NEAR payment from Polimi'), ('body: "quoted" text OR stuff')`)
	tests := []struct {
		in   string
		any  bool
		want int
	}{
		{`invoice polimi`, false, 1},
		{`NEAR(invoice`, false, 1},
		{`body: "quoted`, false, 1},
		{`invoice quoted`, false, 0},
		{`invoice quoted`, true, 2},
		{`*)(^`, false, -1}, // no terms: no query
	}
	for _, tc := range tests {
		q := search.FTSQuery(tc.in, tc.any, 3)
		if tc.want < 0 {
			if q != "" {
				t.Errorf("FTSQuery(%q) = %q, want empty", tc.in, q)
			}
			continue
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM d WHERE d MATCH ?`, q).Scan(&n); err != nil {
			t.Errorf("MATCH %q (from %q): %v", q, tc.in, err)
			continue
		}
		if n != tc.want {
			t.Errorf("MATCH %q = %d rows, want %d", q, n, tc.want)
		}
	}
}

func TestCosine(t *testing.T) {
	if c := search.Cosine([]float32{1, 0}, []float32{1, 0}); math.Abs(c-1) > 1e-9 {
		t.Errorf("identical = %v", c)
	}
	if c := search.Cosine([]float32{1, 0}, []float32{0, 1}); c != 0 {
		t.Errorf("orthogonal = %v", c)
	}
	if c := search.Cosine([]float32{1, 0}, []float32{1, 0, 0}); c != 0 {
		t.Errorf("mismatched dims = %v", c)
	}
}
