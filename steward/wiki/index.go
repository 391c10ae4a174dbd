package wiki

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/trigram"
	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/sqlitedb"
)

// IndexFileName is the index's file in the index directory.
const IndexFileName = "index.sqlitedb"

// maxSourceIndexBytes bounds a raw text source copied into the index.
const maxSourceIndexBytes = 4 << 20

// indexMigrations is the schema of the rebuildable index. pages_fts holds
// folded text with CJK runs split into bigrams (unicode61 keeps a CJK run
// as one token, so without bigrams a word inside a sentence never matches);
// pages_tri holds folded text for substring search.
var indexMigrations = []string{`
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pages (
	id INTEGER PRIMARY KEY,
	path TEXT NOT NULL UNIQUE,
	kind TEXT NOT NULL,          -- page | source
	title TEXT NOT NULL,
	type TEXT NOT NULL DEFAULT '',
	body TEXT NOT NULL,
	content_hash TEXT NOT NULL,
	embedded_hash TEXT NOT NULL DEFAULT ''
);
` + textTables}

// textTables creates the two FTS5 tables (also when a rebuild recreates them).
const textTables = `
CREATE VIRTUAL TABLE pages_fts USING fts5(title, body, tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE pages_tri USING fts5(title, body, tokenize='trigram');
`

// Index is the SQLite side of a vault: full text, trigram and vectors.
type Index struct {
	db   *sql.DB
	tri  *trigram.Index
	vecs *vecindex.Store
}

// OpenIndex opens (creating) the index file at path.
func OpenIndex(ctx context.Context, path string) (*Index, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: indexMigrations}.SearchTuning())
	if err != nil {
		return nil, fmt.Errorf("open wiki index: %w", err)
	}
	return newIndex(db), nil
}

func newIndex(db *sql.DB) *Index {
	return &Index{db: db,
		tri: trigram.New(db, trigram.Options{Table: "pages_tri", Columns: []string{"title", "body"}, Weights: []float64{5, 1}, ScanLimit: 2000}),
		vecs: vecindex.New(db, vecindex.Options{Rows: "pages", Vectors: "pages_vec", Meta: "meta",
			TextColumns: []string{"title", "body"},
			Text:        func(c []string) (string, error) { return c[0] + "\n" + c[1], nil },
			Item:        "page", Items: "pages", Name: "wiki"}),
	}
}

// Close closes the index.
func (x *Index) Close() error { return x.db.Close() }

// DB returns the index's database (the benchmarks open the same file
// through C SQLite and run the same statements).
func (x *Index) DB() *sql.DB { return x.db }

// ftsText prepares text for pages_fts and queries against it.
func ftsText(s string) string { return cjkBigrams(search.Fold(s)) }

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// cjkBigrams replaces each run of CJK characters by its overlapping
// bigrams, separated by spaces ("東京都" → " 東京 京都 ").
func cjkBigrams(s string) string {
	has := false
	for _, r := range s {
		if isCJK(r) {
			has = true
			break
		}
	}
	if !has {
		return s
	}
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); {
		if !isCJK(rs[i]) {
			b.WriteRune(rs[i])
			i++
			continue
		}
		j := i
		for j < len(rs) && isCJK(rs[j]) {
			j++
		}
		b.WriteByte(' ')
		if j-i == 1 {
			b.WriteRune(rs[i])
		}
		for k := i; k+1 < j; k++ {
			b.WriteRune(rs[k])
			b.WriteRune(rs[k+1])
			b.WriteByte(' ')
		}
		b.WriteByte(' ')
		i = j
	}
	return b.String()
}

// indexDoc is one row to index.
type indexDoc struct {
	path, kind, title, typ, body, hash string
}

// SyncStats counts what a sync did.
type SyncStats struct {
	Added   int `json:"added"`
	Updated int `json:"updated"`
	Removed int `json:"removed"`
	Total   int `json:"total"`
}

// sync brings the index to docs: rows whose hash differs are rewritten,
// rows without a doc removed — every such row, or with scope only those
// whose path is in scope. It runs in one transaction; full clears the
// index first (a rebuild).
func (x *Index) sync(ctx context.Context, docs []indexDoc, full bool, scope map[string]bool) (SyncStats, error) {
	var st SyncStats
	st.Total = len(docs)
	if scope != nil && len(scope) == 0 {
		return st, nil
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return st, fmt.Errorf("sync wiki index: %w", err)
	}
	defer tx.Rollback()
	if full {
		// Dropping the text tables is far cheaper than deleting their rows
		// one by one; the vectors go too, because row ids start again.
		for _, q := range []string{"DELETE FROM pages", "DROP TABLE pages_fts", "DROP TABLE pages_tri",
			"DROP TABLE IF EXISTS pages_vec", "DELETE FROM meta WHERE key = '" + vecindex.DimKey + "'", textTables} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return st, fmt.Errorf("clear wiki index: %w", err)
			}
		}
	}
	have := map[string][2]string{} // path → id, hash
	q, args := "SELECT id, path, content_hash FROM pages", []any{}
	if scope != nil {
		// An update of a few files reads only their rows, not the index.
		marks := make([]string, 0, len(scope))
		for p := range scope {
			marks, args = append(marks, "?"), append(args, p)
		}
		q += " WHERE path IN (" + strings.Join(marks, ",") + ")"
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return st, fmt.Errorf("read wiki index: %w", err)
	}
	for rows.Next() {
		var id, p, h string
		if err := rows.Scan(&id, &p, &h); err != nil {
			rows.Close()
			return st, err
		}
		have[p] = [2]string{id, h}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	// The plain tables are written before the text tables are touched. A
	// statement that needs a statement savepoint (the upsert below) makes
	// every FTS5 table already in the transaction flush its pending terms
	// to disk: interleaved, each page became a tiny segment of each text
	// table, and merging those was most of a rebuild.
	ins, err := tx.PrepareContext(ctx, `INSERT INTO pages(path, kind, title, type, body, content_hash) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT(path) DO UPDATE SET kind=excluded.kind, title=excluded.title, type=excluded.type, body=excluded.body, content_hash=excluded.content_hash
		RETURNING id`)
	if err != nil {
		return st, err
	}
	defer ins.Close()
	type written struct {
		id          int64
		path        string
		update      bool
		title, body string // folded
	}
	var changed []written
	var gone []int64 // removed rows, whose text goes too
	seen := make(map[string]bool, len(docs))
	for _, d := range docs {
		seen[d.path] = true
		old, ok := have[d.path]
		if ok && old[1] == d.hash {
			continue
		}
		if ok {
			st.Updated++
		} else {
			st.Added++
		}
		w := written{path: d.path, update: ok, title: search.Fold(d.title), body: search.Fold(d.body)}
		if err := ins.QueryRowContext(ctx, d.path, d.kind, d.title, d.typ, d.body, d.hash).Scan(&w.id); err != nil {
			return st, fmt.Errorf("index %s: %w", d.path, err)
		}
		changed = append(changed, w)
	}
	for p, old := range have {
		if seen[p] || (scope != nil && !scope[p]) {
			continue
		}
		st.Removed++
		var id int64
		fmt.Sscan(old[0], &id)
		if err := x.vecs.Delete(ctx, tx, id); err != nil {
			return st, err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM pages WHERE id = ?", id); err != nil {
			return st, err
		}
		gone = append(gone, id)
	}
	// One text table after the other, each with its old rows deleted
	// before the new ones go in.
	for _, table := range []string{"pages_fts", "pages_tri"} {
		del, err := tx.PrepareContext(ctx, "DELETE FROM "+table+" WHERE rowid = ?")
		if err != nil {
			return st, err
		}
		defer del.Close()
		put, err := tx.PrepareContext(ctx, "INSERT INTO "+table+"(rowid, title, body) VALUES (?, ?, ?)")
		if err != nil {
			return st, err
		}
		defer put.Close()
		for _, id := range gone {
			if _, err := del.ExecContext(ctx, id); err != nil {
				return st, fmt.Errorf("unindex page %d: %w", id, err)
			}
		}
		for _, w := range changed {
			if w.update {
				if _, err := del.ExecContext(ctx, w.id); err != nil {
					return st, fmt.Errorf("unindex page %d: %w", w.id, err)
				}
			}
		}
		for _, w := range changed {
			title, body := w.title, w.body
			if table == "pages_fts" {
				title, body = cjkBigrams(title), cjkBigrams(body)
			}
			if _, err := put.ExecContext(ctx, w.id, title, body); err != nil {
				return st, fmt.Errorf("index %s: %w", w.path, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return st, fmt.Errorf("commit wiki index: %w", err)
	}
	return st, nil
}

// vaultDocs returns the rows the index should hold for the vault: every page,
// and the text sources under raw/ (Markdown and plain text).
func vaultDocs(v *Vault) []indexDoc {
	pages := v.Pages()
	docs := make([]indexDoc, 0, len(pages))
	for _, p := range pages {
		docs = append(docs, pageDoc(p))
	}
	for _, s := range v.Sources() {
		if d, ok := sourceDoc(v.Dir(), s); ok {
			docs = append(docs, d)
		}
	}
	return docs
}

func pageDoc(p *Page) indexDoc {
	return indexDoc{path: p.Path, kind: "page", title: p.Title, typ: p.Frontmatter.Type, body: p.Body, hash: p.Hash}
}

// sourceDoc returns the row of a text source under raw/ (Markdown or plain
// text up to maxSourceIndexBytes); other sources are not indexed.
func sourceDoc(dir, rel string) (indexDoc, bool) {
	switch strings.ToLower(path.Ext(rel)) {
	case ".md", ".txt", ".markdown":
	default:
		return indexDoc{}, false
	}
	full := filepath.Join(dir, filepath.FromSlash(rel))
	if st, err := os.Stat(full); err != nil || st.Size() > maxSourceIndexBytes {
		return indexDoc{}, false
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return indexDoc{}, false
	}
	return indexDoc{path: rel, kind: "source", title: path.Base(rel), typ: "raw", body: strings.ToValidUTF8(string(b), "\uFFFD"), hash: Hash(b)}, true
}

// lexical returns the best FTS5 matches for q (all terms, then any term
// when none match all), as page ids.
func (x *Index) lexical(ctx context.Context, q string, kinds string, limit int) ([]int64, error) {
	var ids []int64
	for _, any := range []bool{false, true} {
		match := search.FTSQuery(ftsText(q), any, 1)
		if match == "" {
			return nil, nil
		}
		rows, err := x.db.QueryContext(ctx, `SELECT f.rowid FROM pages_fts f JOIN pages p ON p.id = f.rowid
			WHERE pages_fts MATCH ? AND (? = '' OR p.kind = ?) ORDER BY bm25(pages_fts, 5.0, 1.0) LIMIT ?`, match, kinds, kinds, limit)
		if err != nil {
			return nil, fmt.Errorf("search wiki text: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) > 0 {
			break
		}
	}
	return ids, nil
}

// SubstringSQL is the statement a substring search runs (the benchmarks
// time it through both SQLite builds).
const SubstringSQL = `SELECT rowid FROM pages_tri WHERE pages_tri MATCH ? ORDER BY bm25(pages_tri, 5.0, 1.0) LIMIT ?`

type row struct {
	id                     int64
	path, kind, title, typ string
	body                   string
}

func (x *Index) rows(ctx context.Context, ids []int64) (map[int64]row, error) {
	out := make(map[int64]row, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	marks := make([]string, len(ids))
	for i, id := range ids {
		args[i], marks[i] = id, "?"
	}
	rs, err := x.db.QueryContext(ctx, "SELECT id, path, kind, title, type, body FROM pages WHERE id IN ("+strings.Join(marks, ",")+")", args...)
	if err != nil {
		return nil, fmt.Errorf("read wiki rows: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.id, &r.path, &r.kind, &r.title, &r.typ, &r.body); err != nil {
			return nil, err
		}
		out[r.id] = r
	}
	return out, rs.Err()
}
