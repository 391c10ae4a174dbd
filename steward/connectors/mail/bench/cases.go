package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
	"github.com/agentstack/agentstack/steward/connectors/mail/search"
)

// Case is one retrieval measurement.
type Case struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Spec    string `json:"specRow,omitempty"` // the reference table row it sits beside
	SQL     string `json:"sql,omitempty"`     // SQL-bound cases, also run through C SQLite
	Prepare bool   `json:"prepared,omitempty"`
	// Informational cases include start-up work in their first query by
	// design (an unprepared worker builds its index then) and are not held
	// to the first-query target.
	Informational bool `json:"informational,omitempty"`
	kind          string
}

// Cases lists the retrieval cases in the order they run.
func Cases(subjectWord, bodyWord string) []Case {
	return []Case{
		{Name: "fts50", Title: "Mail FTS5 candidates, cap 50", Spec: "Mail FTS5 candidates, cap 50", kind: "sql",
			SQL: fmt.Sprintf(`SELECT rowid FROM message_fts WHERE message_fts MATCH '"%s"' ORDER BY rank LIMIT 50`, bodyWord)},
		{Name: "subject_trigram500", Title: "Mail subject trigram candidates, cap 500", Spec: "Mail subject trigram candidates, cap 500", kind: "sql",
			SQL: fmt.Sprintf(`SELECT rowid FROM message_tri WHERE message_tri MATCH 'subject : "%s"' ORDER BY rowid DESC LIMIT 500`, subjectWord[:7])},
		{Name: "body_trigram500", Title: "Mail body trigram candidates, cap 500", Spec: "Mail body trigram candidates, cap 500", kind: "sql",
			SQL: fmt.Sprintf(`SELECT rowid FROM message_tri WHERE message_tri MATCH 'body : "%s"' ORDER BY rowid DESC LIMIT 500`, bodyWord)},
		{Name: "recent_unread20", Title: "Mail recent unread IDs, cap 20", Spec: "Mail recent unread IDs, cap 20", kind: "sql",
			SQL: `SELECT id FROM messages WHERE seen = 0 AND deleted_at IS NULL ORDER BY id DESC LIMIT 20`},
		{Name: "lexical_search12", Title: "Mail lexical search + summaries, cap 12", Spec: "Mail lexical search + summaries, cap 12", kind: "lexical"},
		{Name: "body_substring_search12", Title: "Mail body substring search + summaries, cap 12", Spec: "Mail body substring search + summaries, cap 12", kind: "substring"},
		{Name: "knn50_index_prepared", Title: "Mail vector KNN, cap 50 (in-memory index, prepared)", Spec: "Mail synchronous vector KNN, cap 50", kind: "knn", Prepare: true},
		{Name: "knn50_index_unprepared", Title: "Mail vector KNN, cap 50 (in-memory index, unprepared)", Spec: "Worker, unprepared", kind: "knn", Informational: true},
		{Name: "knn50_vec0_exact", Title: "Mail vector KNN, cap 50 (sqlite-vec exact vec0 scan)", Spec: "Mail synchronous vector KNN, cap 50", kind: "vec0",
			SQL: `SELECT rowid, distance FROM message_vec WHERE embedding MATCH ? AND k = 50`},
		{Name: "hybrid12_prepared", Title: "Mail prepared hybrid, precomputed query vector", Spec: "Mail prepared hybrid, precomputed query vector", kind: "hybrid", Prepare: true},
		{Name: "hybrid12_unprepared", Title: "Mail unprepared hybrid, precomputed query vector", Spec: "Hybrid, unprepared precomputed vector", kind: "hybrid", Informational: true},
		{Name: "absent_trigram", Title: "Absent body substring, trigram", Spec: "Absent body substring, trigram", kind: "sql",
			SQL: fmt.Sprintf(`SELECT rowid FROM message_tri WHERE message_tri MATCH 'body : "%s"' ORDER BY rowid DESC LIMIT 500`, Absent)},
		{Name: "absent_like", Title: "Absent body substring, LIKE scan", Spec: "Absent body substring, LIKE scan", kind: "sql",
			SQL: fmt.Sprintf(`SELECT id FROM messages WHERE body LIKE '%%%s%%' LIMIT 500`, Absent)},
	}
}

// Timing is what one case measured.
type Timing struct {
	Returned  int       `json:"returned"`
	PrepareMS float64   `json:"prepareMs,omitempty"`
	FirstMS   float64   `json:"firstMs"`
	SamplesMS []float64 `json:"samplesMs"`
	MedianMS  float64   `json:"medianMs"`
	P95MS     float64   `json:"p95Ms"`
}

// summarise fills the median (of the warm samples, excluding the first
// query) and the nearest-rank 95th percentile.
func (t *Timing) summarise() {
	s := append([]float64(nil), t.SamplesMS...)
	sort.Float64s(s)
	if len(s) == 0 {
		return
	}
	if len(s)%2 == 1 {
		t.MedianMS = s[len(s)/2]
	} else {
		t.MedianMS = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rank := (95*len(s) + 99) / 100
	t.P95MS = s[max(0, rank-1)]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Engine says which SQLite runs a case's SQL.
type Engine string

const (
	// EngineGo is the product's pure-Go SQLite (modernc.org/sqlite).
	EngineGo Engine = "go"
	// EngineC is C SQLite of the same release through cgo (package
	// sqlitedb/csqlite), present only in binaries built with its tags.
	EngineC Engine = "c"
)

// CaseOptions says how RunCase measures.
type CaseOptions struct {
	// Engine runs SQL cases; EngineC runs only those, through the same
	// harness as EngineGo.
	Engine Engine
	// DBPath is the mail mirror.
	DBPath string
	// Query is the precomputed query vector of the vector cases.
	Query []float32
	// Samples is the number of warm samples after the first query.
	Samples int
	// Cold skips, for SQL cases, the production warm-up of the connection
	// (search.Warm, which the search engine's Prepare runs on each of its
	// connections at start-up), so the first query meets a fresh connection.
	Cold bool
}

// RunCase measures one case: one first query and o.Samples warm ones, in
// this process. Connection set-up is excluded and preparation is reported
// separately, as in the reference method: SQL cases run on a connection
// warmed the way the search engine warms its own at start-up (unless
// o.Cold), the prepared vector and hybrid cases after the engine's Prepare.
func RunCase(ctx context.Context, c Case, o CaseOptions) (*Timing, error) {
	t := &Timing{}
	var op func() (int, error)
	if o.Engine == EngineC && c.kind != "sql" {
		return nil, fmt.Errorf("%s: only SQL cases run through C SQLite", c.Name)
	}
	dbPath, query := o.DBPath, o.Query
	switch c.kind {
	case "sql", "vec0":
		// The search engine's connection settings, in both engines.
		opts := sqlitedb.Options{ReadOnly: true, MaxOpenConns: 1}.SearchTuning()
		var db *sql.DB
		var err error
		if o.Engine == EngineC {
			db, err = csqlite.Open(ctx, dbPath, opts.TuningPragmas()...)
		} else {
			db, err = sqlitedb.Open(ctx, dbPath, opts)
		}
		if err != nil {
			return nil, err
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		if c.kind == "sql" && !o.Cold {
			start := time.Now()
			if err := search.Warm(ctx, conn); err != nil {
				return nil, err
			}
			t.PrepareMS = ms(time.Since(start))
		}
		stmt, err := conn.PrepareContext(ctx, c.SQL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		defer stmt.Close()
		var args []any
		if c.kind == "vec0" {
			args = []any{sqlitedb.EncodeVector(query)}
		}
		op = func() (int, error) {
			rows, err := stmt.QueryContext(ctx, args...)
			if err != nil {
				return 0, err
			}
			return countRows(rows)
		}
	default:
		var emb fixedEmbedder
		if c.kind == "hybrid" || c.kind == "knn" {
			emb = query
		}
		opts := search.Options{DBPath: dbPath, Conns: 4}
		if emb != nil {
			opts.Embedder = emb
		} else {
			opts.SemanticOff = "benchmark: lexical case"
		}
		e, err := search.Open(ctx, opts)
		if err != nil {
			return nil, err
		}
		defer e.Close()
		if c.Prepare {
			start := time.Now()
			if _, err := e.Prepare(ctx); err != nil {
				return nil, err
			}
			t.PrepareMS = ms(time.Since(start))
		}
		switch c.kind {
		case "knn":
			op = func() (int, error) {
				ids, err := e.KNN(ctx, query, 50)
				return len(ids), err
			}
		case "lexical", "hybrid":
			op = func() (int, error) {
				r, err := e.Search(ctx, search.Query{Query: "project", PerMessage: true, Limit: 12})
				if err != nil {
					return 0, err
				}
				if c.kind == "hybrid" && r.Page.Semantic != "used" {
					return 0, fmt.Errorf("hybrid case ran without semantics: %s", r.Page.Notice)
				}
				return len(r.Messages), nil
			}
		case "substring":
			op = func() (int, error) {
				r, err := e.Search(ctx, search.Query{BodyContains: "project", PerMessage: true, Limit: 12})
				if err != nil {
					return 0, err
				}
				return len(r.Messages), nil
			}
		default:
			return nil, fmt.Errorf("unknown case kind %q", c.kind)
		}
	}
	start := time.Now()
	n, err := op()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	t.FirstMS, t.Returned = ms(time.Since(start)), n
	for i := 0; i < o.Samples; i++ {
		start := time.Now()
		if _, err := op(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		t.SamplesMS = append(t.SamplesMS, ms(time.Since(start)))
	}
	t.summarise()
	return t, nil
}

func countRows(rows *sql.Rows) (int, error) {
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(any)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// findCase returns the named case.
func findCase(cases []Case, name string) (Case, bool) {
	for _, c := range cases {
		if c.Name == name {
			return c, true
		}
	}
	return Case{}, false
}

// CaseNames lists the case names, for usage messages.
func CaseNames() string {
	var n []string
	for _, c := range Cases("quarterly", "project") {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}
