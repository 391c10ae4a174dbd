// Package trigram finds candidate rows for free text in an SQLite FTS5 table
// with tokenize='trigram' whose text was stored folded (search.Fold).
//
// A trigram index matches only terms of three or more characters. Longer
// terms therefore go through MATCH (quoted, so user text is never FTS5
// syntax) and rank by BM25; shorter ones ("Al", "3D") are checked on the
// candidates' text instead of being dropped, so every term the user typed
// still has to match.
package trigram

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/search"
)

// minTerm is the shortest term a trigram index can match.
const minTerm = 3

// Options describe one FTS5 table.
type Options struct {
	// Table is the FTS5 table.
	Table string
	// Columns are its text columns, in the table's order.
	Columns []string
	// Weights are the BM25 weights of Columns, in the same order.
	Weights []float64
	// ScanLimit bounds the rows read when no term is long enough for the
	// index and the text must be checked row by row.
	ScanLimit int
	// TermlessMatchesAll makes a text without any term (only punctuation)
	// match every row, up to the limit, instead of none.
	TermlessMatchesAll bool
}

// Index is the text side of one index.
type Index struct {
	db          *sql.DB
	opts        Options
	match, scan string // the MATCH and the row-by-row queries
	nCols       int
}

var identifier = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// New returns the text index over the FTS5 table of opts in db. It panics
// when a name is not a plain SQL identifier or the weights do not match the
// columns: they are the program's constants, spliced into SQL.
func New(db *sql.DB, opts Options) *Index {
	for _, name := range append([]string{opts.Table}, opts.Columns...) {
		if !identifier().MatchString(name) {
			panic(fmt.Sprintf("trigram.New: %q is not a plain SQL identifier", name))
		}
	}
	if len(opts.Columns) == 0 || len(opts.Weights) != len(opts.Columns) {
		panic("trigram.New: one weight per column is required")
	}
	weights := make([]string, len(opts.Weights))
	for i, w := range opts.Weights {
		weights[i] = strconv.FormatFloat(w, 'f', 1, 64)
	}
	cols := "rowid, " + strings.Join(opts.Columns, ", ")
	return &Index{db: db, opts: opts, nCols: len(opts.Columns),
		match: `SELECT ` + cols + ` FROM ` + opts.Table + ` WHERE ` + opts.Table + ` MATCH ?
			ORDER BY bm25(` + opts.Table + `, ` + strings.Join(weights, ", ") + `) LIMIT ?`,
		scan: `SELECT ` + cols + ` FROM ` + opts.Table + ` LIMIT ` + strconv.Itoa(opts.ScanLimit),
	}
}

// Candidates returns the rowids of rows matching text, best BM25 first, at
// most limit. With all set every term must match (short terms checked on
// the text); otherwise any long term may, and short terms do not filter.
func (x *Index) Candidates(ctx context.Context, text string, all bool, limit int) ([]int64, error) {
	var short []string
	for _, t := range search.Terms(text) {
		if len([]rune(t)) < minTerm {
			short = append(short, t)
		}
	}
	var rows *sql.Rows
	var err error
	switch expr := search.FTSQuery(text, !all, minTerm); {
	case expr != "":
		rows, err = x.db.QueryContext(ctx, x.match, expr, limit)
	case len(short) > 0 || x.opts.TermlessMatchesAll:
		rows, err = x.db.QueryContext(ctx, x.scan)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keyword search: %w", err)
	}
	defer rows.Close()
	cols := make([]string, x.nCols)
	dest := make([]any, 1+x.nCols)
	for i := range cols {
		dest[1+i] = &cols[i]
	}
	var out []int64
	for rows.Next() {
		var id int64
		dest[0] = &id
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("keyword search: %w", err)
		}
		if all && len(short) > 0 {
			words := search.Terms(strings.Join(cols, " "))
			if slices.ContainsFunc(short, func(t string) bool { return !slices.Contains(words, t) }) {
				continue
			}
		}
		out = append(out, id)
		if len(out) >= limit {
			break
		}
	}
	return out, rows.Err()
}
