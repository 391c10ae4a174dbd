// Package vecindex keeps sqlite-vec vectors beside the rows of a local
// search index and fills them through an embedding model.
//
// The rows live in the index's own table; vecindex only needs three of its
// columns: an INTEGER PRIMARY KEY id, content_hash (the row's current
// content) and embedded_hash (the content its vector was made from, empty for
// none). Rows whose two hashes differ are embedded in batches; a failed batch
// is retried one row at a time so one poisoned input loses only itself; and a
// model whose vectors have another dimension than the stored ones resets the
// vec0 table and re-embeds everything instead of mixing dimensions. Queries
// embed the user's text and return the nearest rows, degrading to "no
// neighbours" with an explanation when the model is unreachable, so that
// lexical search still answers.
package vecindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/search"

	"github.com/agentstack/agentstack/sqlitedb"
)

// Embedder is the shared search.Embedder.
type Embedder = search.Embedder

// BatchSize is how many texts go into one embedding request.
const BatchSize = 32

// DefaultMaxChars bounds the text embedded per row.
const DefaultMaxChars = 2000

// DimKey is the key under which the vector dimension is recorded in the
// meta table; it is absent until the first vector is stored.
const DimKey = "vec_dim"

// dimensionProbe is embedded to learn the current model's dimension.
const dimensionProbe = "Steward embedding dimension check"

// Options describe the tables of one index.
type Options struct {
	// Rows is the table of indexed rows (id, content_hash, embedded_hash).
	Rows string
	// Vectors is the vec0 table holding one vector per row id, created on
	// the first store with the model's dimension and cosine distance.
	Vectors string
	// Meta is a key/value table (key TEXT PRIMARY KEY, value TEXT NOT NULL)
	// where the dimension is recorded under DimKey.
	Meta string
	// TextColumns are the columns of Rows that Text receives, in order.
	TextColumns []string
	// Text returns what a row's vector represents, from the values of
	// TextColumns.
	Text func(columns []string) (string, error)
	// MaxChars cuts longer texts to this many characters (default
	// DefaultMaxChars): the start of a long note says what it is about, and
	// the model's input is bounded.
	MaxChars int
	// Item and Items name one row and several rows in errors and logs
	// ("event", "events").
	Item, Items string
	// Name names the index in logs ("calendar").
	Name string
}

// Store is the vector side of one index.
type Store struct {
	db   *sql.DB
	opts Options
}

var identifier = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// New returns the vector store of the index open in db. It panics when a
// table or column name is not a plain SQL identifier, or Text is missing:
// the names are spliced into SQL, and they are the program's constants, not
// input.
func New(db *sql.DB, opts Options) *Store {
	for _, name := range append([]string{opts.Rows, opts.Vectors, opts.Meta}, opts.TextColumns...) {
		if !identifier().MatchString(name) {
			panic(fmt.Sprintf("vecindex.New: %q is not a plain SQL identifier", name))
		}
	}
	if len(opts.TextColumns) == 0 || opts.Text == nil {
		panic("vecindex.New: TextColumns and Text are required")
	}
	if opts.Item == "" {
		opts.Item, opts.Items = "row", "rows"
	}
	if opts.MaxChars <= 0 {
		opts.MaxChars = DefaultMaxChars
	}
	return &Store{db: db, opts: opts}
}

// Dim returns the dimension of the stored vectors, 0 before the first.
func (s *Store) Dim(ctx context.Context) (int, error) {
	return s.dim(ctx, s.db)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) dim(ctx context.Context, q queryRower) (int, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM `+s.opts.Meta+` WHERE key = ?`, DimKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read vector dimension: %w", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("read vector dimension: %q is not a number", v)
	}
	return n, nil
}

type pending struct {
	id         int64
	hash, text string
}

// pending lists the rows whose content changed since their vector was made.
func (s *Store) pending(ctx context.Context) ([]pending, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, content_hash, `+strings.Join(s.opts.TextColumns, ", ")+` FROM `+s.opts.Rows+`
		WHERE embedded_hash <> content_hash ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list %s to embed: %w", s.opts.Items, err)
	}
	defer rows.Close()
	cols := make([]string, len(s.opts.TextColumns))
	dest := make([]any, 2+len(cols))
	for i := range cols {
		dest[2+i] = &cols[i]
	}
	var todo []pending
	for rows.Next() {
		var p pending
		dest[0], dest[1] = &p.id, &p.hash
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("list %s to embed: %w", s.opts.Items, err)
		}
		if p.text, err = s.opts.Text(cols); err != nil {
			return nil, fmt.Errorf("embedding text of %s %d: %w", s.opts.Item, p.id, err)
		}
		if r := []rune(p.text); len(r) > s.opts.MaxChars {
			p.text = string(r[:s.opts.MaxChars])
		}
		todo = append(todo, p)
	}
	return todo, rows.Err()
}

// EmbedPending embeds every row whose content changed since its vector was
// made and returns how many vectors it stored. A failed batch is retried
// one row at a time; rows that still fail are named in the error, which
// also reports an endpoint that fails every row of a batch as unavailable
// (the rows stay pending for the next run). The stored vectors of earlier
// batches are kept either way.
func (s *Store) EmbedPending(ctx context.Context, emb Embedder, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	done, err := s.embedPending(ctx, emb, log)
	if err != nil {
		log.Warn(s.opts.Name+" embeddings incomplete; search stays lexical for the rest", "err", err)
	}
	return done, err
}

func (s *Store) embedPending(ctx context.Context, emb Embedder, log *slog.Logger) (int, error) {
	todo, err := s.pending(ctx)
	if err != nil {
		return 0, err
	}
	// Check that the model still gives vectors of the stored dimension, so
	// a model swap re-embeds everything instead of mixing dimensions.
	if dim, err := s.Dim(ctx); err != nil {
		return 0, err
	} else if dim != 0 {
		v, err := emb.Embed(ctx, []string{dimensionProbe})
		if err == nil && len(v) == 1 && len(v[0]) > 0 && len(v[0]) != dim {
			if _, err := s.db.ExecContext(ctx, `UPDATE `+s.opts.Rows+` SET embedded_hash = ''`); err != nil {
				return 0, fmt.Errorf("mark %s for re-embedding: %w", s.opts.Items, err)
			}
			if todo, err = s.pending(ctx); err != nil {
				return 0, err
			}
		}
	}
	done := 0
	var errs []error
	for start := 0; start < len(todo); start += BatchSize {
		batch := todo[start:min(start+BatchSize, len(todo))]
		vecs, failed, err := s.embedBatch(ctx, emb, batch)
		errs = append(errs, failed...)
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			return done, fmt.Errorf("embedding endpoint unavailable, %d %s pending: %w", len(todo)-done, s.opts.Items, err)
		}
		n, err := s.store(ctx, batch, vecs)
		done += n
		if err != nil {
			return done, err
		}
		log.Debug(s.opts.Name+" embeddings", "done", done, "of", len(todo))
	}
	if len(errs) > 0 {
		return done, fmt.Errorf("%d of %d %s not embedded: %w", len(todo)-done, len(todo), s.opts.Items, errors.Join(errs[:min(3, len(errs))]...))
	}
	return done, nil
}

// embedBatch embeds one batch, falling back to one request per row when the
// batch fails. It returns the vectors (nil where a row failed), the rows'
// errors, and an error when no row could be embedded at all.
func (s *Store) embedBatch(ctx context.Context, emb Embedder, batch []pending) ([][]float32, []error, error) {
	texts := make([]string, len(batch))
	for i, p := range batch {
		texts[i] = p.text
	}
	vecs, err := emb.Embed(ctx, texts)
	if err == nil && len(vecs) != len(batch) {
		err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(batch))
	}
	if err == nil {
		return vecs, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	// Retry one by one so a single poisoned input only loses itself; if
	// every one fails the endpoint itself is down.
	vecs = make([][]float32, len(batch))
	var errs []error
	for i, p := range batch {
		v, err := emb.Embed(ctx, []string{p.text})
		if err != nil || len(v) != 1 {
			errs = append(errs, fmt.Errorf("embed %s %d: %v", s.opts.Item, p.id, err))
			continue
		}
		vecs[i] = v[0]
	}
	if len(errs) == len(batch) {
		return nil, errs, errs[len(errs)-1]
	}
	return vecs, errs, nil
}

// store writes one batch of vectors in a transaction, (re)creating the
// vector table when the dimension changes; nil vectors are skipped.
func (s *Store) store(ctx context.Context, batch []pending, vecs [][]float32) (int, error) {
	dim := 0
	for _, v := range vecs {
		if len(v) > 0 {
			dim = len(v)
			break
		}
	}
	if dim == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store vectors: %w", err)
	}
	defer tx.Rollback()
	stored, err := s.dim(ctx, tx)
	if err != nil {
		return 0, err
	}
	if stored != dim {
		for _, q := range []string{
			`DROP TABLE IF EXISTS ` + s.opts.Vectors,
			fmt.Sprintf(`CREATE VIRTUAL TABLE %s USING vec0(embedding float[%d] distance_metric=cosine)`, s.opts.Vectors, dim),
			`UPDATE ` + s.opts.Rows + ` SET embedded_hash = ''`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return 0, fmt.Errorf("reset vector table for dimension %d: %w", dim, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.opts.Meta+` (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, DimKey, strconv.Itoa(dim)); err != nil {
			return 0, fmt.Errorf("record vector dimension: %w", err)
		}
	}
	n := 0
	for i, v := range vecs {
		if len(v) != dim {
			continue // missing, or a stray dimension within one batch
		}
		id := batch[i].id
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+s.opts.Vectors+` WHERE rowid = ?`, id); err != nil {
			return 0, fmt.Errorf("store vector %d: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.opts.Vectors+` (rowid, embedding) VALUES (?, ?)`, id, sqlitedb.EncodeVector(v)); err != nil {
			return 0, fmt.Errorf("store vector %d: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+s.opts.Rows+` SET embedded_hash = ? WHERE id = ?`, batch[i].hash, id); err != nil {
			return 0, fmt.Errorf("store vector %d: %w", id, err)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit vectors: %w", err)
	}
	return n, nil
}

// Delete removes the vector of row id, if the vector table exists, inside
// the caller's transaction (the one deleting the row).
func (s *Store) Delete(ctx context.Context, tx *sql.Tx, id int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = ?`, s.opts.Vectors).Scan(&n); err != nil || n == 0 {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+s.opts.Vectors+` WHERE rowid = ?`, id); err != nil {
		return fmt.Errorf("delete vector of %s %d: %w", s.opts.Item, id, err)
	}
	return nil
}

// Neighbor is one row near a query vector.
type Neighbor struct {
	ID int64
	// Distance is the cosine distance: 0 for the same direction, 1 for
	// unrelated, up to 2 for opposite.
	Distance float64
}

// Nearest returns up to k rows nearest to q, nearest first; nil when the
// index has no vectors or they have another dimension than q.
func (s *Store) Nearest(ctx context.Context, q []float32, k int) ([]Neighbor, error) {
	dim, err := s.Dim(ctx)
	if err != nil || dim == 0 || dim != len(q) {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT rowid, distance FROM `+s.opts.Vectors+` WHERE embedding MATCH ? AND k = ? ORDER BY distance`,
		sqlitedb.EncodeVector(q), k)
	if err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
	defer rows.Close()
	var out []Neighbor
	for rows.Next() {
		var n Neighbor
		if err := rows.Scan(&n.ID, &n.Distance); err != nil {
			return nil, fmt.Errorf("vector search: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// SearchText embeds text with emb and returns up to k nearest rows. Without
// an embedder it returns nothing. A failure returns no rows and an error
// worded as a warning for the user ("semantic search unavailable…"): the
// caller reports it and answers from lexical search alone.
func (s *Store) SearchText(ctx context.Context, emb Embedder, text string, k int) ([]Neighbor, error) {
	if emb == nil {
		return nil, nil
	}
	vecs, err := emb.Embed(ctx, []string{text})
	if err != nil || len(vecs) != 1 {
		return nil, fmt.Errorf("semantic search unavailable, results are keyword matches only (%v)", err)
	}
	near, err := s.Nearest(ctx, vecs[0], k)
	if err != nil {
		return nil, fmt.Errorf("semantic search unavailable: %w", err)
	}
	return near, nil
}
