package calendar

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/sqlitedb"
)

// Embedder turns texts into vectors (the gateway's local-embed model in
// production). Without one the index and its searches are lexical only.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedBatchSize is how many texts go into one embedding request.
const EmbedBatchSize = 32

// maxEmbedChars bounds the text embedded per event.
const maxEmbedChars = 2000

func embedText(title, location, calendar, notes string) string {
	t := strings.TrimSpace(strings.Join([]string{title, location, calendar, notes}, "\n"))
	if r := []rune(t); len(r) > maxEmbedChars {
		t = string(r[:maxEmbedChars])
	}
	return t
}

// embedPending embeds rows whose text changed since their last vector, in
// batches; a failed batch is retried one item at a time so one bad input
// does not hold back the others. Vectors of a different dimension than the
// stored ones reset the vector table instead of mixing dimensions.
func (x *Index) embedPending(ctx context.Context, emb Embedder, log *slog.Logger) (int, error) {
	type pending struct {
		id         int64
		hash, text string
	}
	load := func() ([]pending, error) {
		rows, err := x.db.QueryContext(ctx, `SELECT id, content_hash, title, location, calendar, notes FROM events
			WHERE embedded_hash <> content_hash ORDER BY id`)
		if err != nil {
			return nil, fmt.Errorf("list events to embed: %w", err)
		}
		var todo []pending
		for rows.Next() {
			var p pending
			var title, loc, cal, notes string
			if err := rows.Scan(&p.id, &p.hash, &title, &loc, &cal, &notes); err != nil {
				rows.Close()
				return nil, err
			}
			p.text = embedText(title, loc, cal, notes)
			todo = append(todo, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return todo, nil
	}
	todo, err := load()
	if err != nil {
		return 0, err
	}
	// Check that the model still gives vectors of the stored dimension, so
	// a model swap re-embeds everything instead of mixing dimensions.
	if dim, err := x.meta(ctx, x.db, "vec_dim"); err != nil {
		return 0, err
	} else if dim != "" {
		v, err := emb.Embed(ctx, []string{"Steward embedding dimension check"})
		if err == nil && len(v) == 1 && len(v[0]) > 0 && strconv.Itoa(len(v[0])) != dim {
			if _, err := x.db.ExecContext(ctx, `UPDATE events SET embedded_hash = ''`); err != nil {
				return 0, err
			}
			if todo, err = load(); err != nil {
				return 0, err
			}
		}
	}
	done := 0
	var errs []error
	for start := 0; start < len(todo); start += EmbedBatchSize {
		batch := todo[start:min(start+EmbedBatchSize, len(todo))]
		texts := make([]string, len(batch))
		for i, p := range batch {
			texts[i] = p.text
		}
		vecs, err := emb.Embed(ctx, texts)
		if err == nil && len(vecs) != len(batch) {
			err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(batch))
		}
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			// Retry one by one so a single poisoned input only loses itself;
			// if every one fails the endpoint itself is down, so stop.
			vecs = make([][]float32, len(batch))
			ok := 0
			for i, p := range batch {
				v, err := emb.Embed(ctx, []string{p.text})
				if err != nil || len(v) != 1 {
					errs = append(errs, fmt.Errorf("embed event %d: %v", p.id, err))
					continue
				}
				vecs[i] = v[0]
				ok++
			}
			if ok == 0 {
				return done, fmt.Errorf("embedding endpoint unavailable, %d events pending: %w", len(todo)-done, errs[len(errs)-1])
			}
		}
		ids := make([]int64, len(batch))
		hashes := make([]string, len(batch))
		for i, p := range batch {
			ids[i], hashes[i] = p.id, p.hash
		}
		n, err := x.storeVectors(ctx, ids, hashes, vecs)
		done += n
		if err != nil {
			return done, err
		}
		log.Debug("calendar embeddings", "done", done, "of", len(todo))
	}
	if len(errs) > 0 {
		return done, fmt.Errorf("%d of %d events not embedded: %w", len(todo)-done, len(todo), errors.Join(errs[:min(3, len(errs))]...))
	}
	return done, nil
}

// storeVectors writes one batch of vectors in a transaction, (re)creating
// the vector table when the dimension changes; nil vectors are skipped.
func (x *Index) storeVectors(ctx context.Context, ids []int64, hashes []string, vecs [][]float32) (int, error) {
	dimOf := 0
	for _, v := range vecs {
		if len(v) > 0 {
			dimOf = len(v)
			break
		}
	}
	if dimOf == 0 {
		return 0, nil
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	dim, err := x.meta(ctx, tx, "vec_dim")
	if err != nil {
		return 0, err
	}
	if dim != strconv.Itoa(dimOf) {
		for _, s := range []string{
			`DROP TABLE IF EXISTS events_vec`,
			fmt.Sprintf(`CREATE VIRTUAL TABLE events_vec USING vec0(embedding float[%d] distance_metric=cosine)`, dimOf),
			`UPDATE events SET embedded_hash = ''`,
		} {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return 0, fmt.Errorf("reset vector table for dimension %d: %w", dimOf, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('vec_dim', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.Itoa(dimOf)); err != nil {
			return 0, err
		}
	}
	n := 0
	for i, v := range vecs {
		if len(v) != dimOf {
			continue // missing, or a stray dimension within one batch
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events_vec WHERE rowid = ?`, ids[i]); err != nil {
			return 0, fmt.Errorf("store vector %d: %w", ids[i], err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events_vec (rowid, embedding) VALUES (?, ?)`, ids[i], sqlitedb.EncodeVector(v)); err != nil {
			return 0, fmt.Errorf("store vector %d: %w", ids[i], err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE events SET embedded_hash = ? WHERE id = ?`, hashes[i], ids[i]); err != nil {
			return 0, err
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit vectors: %w", err)
	}
	return n, nil
}

// deleteVector removes an event's vector when the vector table exists.
func deleteVector(ctx context.Context, tx *sql.Tx, id int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'events_vec'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events_vec WHERE rowid = ?`, id); err != nil {
		return fmt.Errorf("delete vector of event %d: %w", id, err)
	}
	return nil
}

// vectorCandidates returns event ids nearest to the query vector, best
// first; nil when the index has no vectors or their dimension differs.
func (x *Index) vectorCandidates(ctx context.Context, q []float32, k int) ([]int64, error) {
	dim, err := x.meta(ctx, x.db, "vec_dim")
	if err != nil || dim == "" || dim != strconv.Itoa(len(q)) {
		return nil, err
	}
	rows, err := x.db.QueryContext(ctx, `SELECT rowid FROM events_vec WHERE embedding MATCH ? AND k = ? ORDER BY distance`,
		sqlitedb.EncodeVector(q), k)
	if err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
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
