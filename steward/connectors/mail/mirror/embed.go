package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// DefaultEmbedBatch is how many texts one embedding request carries (MAIL_EMBED_BATCH).
const DefaultEmbedBatch = 32

// ErrEmbedUnavailable reports that the embedding endpoint rejected a batch
// and every item of it retried alone: the worker should back off.
var ErrEmbedUnavailable = errors.New("embedding endpoint unavailable")

// EmbedOptions configure an embedding run.
type EmbedOptions struct {
	Embedder mail.Embedder
	// Model is recorded with each vector (default local-embed).
	Model string
	// Batch is the request size (default 32).
	Batch int
	// Limit stops after this many messages were attempted; 0 drains the backlog.
	Limit int
	// Progress, when set, is called after each batch.
	Progress func(EmbedStats)
}

// EmbedStats reports an embedding run.
type EmbedStats struct {
	Embedded int `json:"embedded"`
	Failed   int `json:"failed"`
	// Pending is the backlog left when the run stopped.
	Pending     int  `json:"pending"`
	Dimension   int  `json:"dimension,omitempty"`
	Reset       bool `json:"reset,omitempty"`
	Unavailable bool `json:"unavailable,omitempty"`
	// LastError is the last failure the endpoint reported, if any.
	LastError string        `json:"lastError,omitempty"`
	Duration  time.Duration `json:"durationNs"`
}

type embedItem struct {
	id   int64
	text string
	hash string
}

// Embed embeds pending messages, newest first: those without a vector, or
// whose source text (subject + body, capped) changed since. Requests carry
// Batch texts; when some results are missing or invalid only those items
// are retried alone, and when the whole batch fails every item is retried
// alone, so one bad input cannot block the others. A failed item stays
// pending. When a batch and all its retries fail the run stops with
// ErrEmbedUnavailable. A vector dimension different from the stored one
// resets all vector state rather than mixing embedding spaces.
func (s *Store) Embed(ctx context.Context, opts EmbedOptions) (EmbedStats, error) {
	start := time.Now()
	var st EmbedStats
	if opts.Embedder == nil {
		return st, errors.New("embed mail: no embedder configured")
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultEmbedBatch
	}
	if opts.Model == "" {
		opts.Model = mail.DefaultEmbedModel
	}
	cursor := int64(1<<62 - 1)
	attempted := 0
	backlog := -1 // counted once, for progress reports
	if opts.Progress != nil {
		backlog, _ = s.PendingEmbeds(ctx)
	}
	defer func() { st.Duration = time.Since(start) }()
	for opts.Limit <= 0 || attempted < opts.Limit {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n := opts.Batch
		if opts.Limit > 0 {
			n = min(n, opts.Limit-attempted)
		}
		items, err := s.pendingEmbeds(ctx, cursor, n)
		if err != nil {
			return st, err
		}
		if len(items) == 0 {
			break
		}
		cursor = items[len(items)-1].id
		attempted += len(items)
		vecs, unavailable, lastErr := embedBatch(ctx, opts.Embedder, items)
		if lastErr != nil {
			st.LastError = lastErr.Error()
		}
		if unavailable {
			st.Unavailable = true
			st.Failed += len(items)
			st.Pending, _ = s.PendingEmbeds(ctx)
			return st, ErrEmbedUnavailable
		}
		ok, reset, dim, err := s.storeVectors(ctx, items, vecs, opts.Model)
		if err != nil {
			return st, err
		}
		st.Embedded += ok
		st.Failed += len(items) - ok
		st.Reset = st.Reset || reset
		if dim > 0 {
			st.Dimension = dim
		}
		if opts.Progress != nil {
			p := st
			p.Pending = max(0, backlog-attempted)
			opts.Progress(p)
		}
	}
	var err error
	st.Pending, err = s.PendingEmbeds(ctx)
	return st, err
}

// embedBatch embeds items, retrying failed members alone. unavailable
// reports that nothing succeeded at all; lastErr is the last error seen.
func embedBatch(ctx context.Context, e mail.Embedder, items []embedItem) (vecs [][]float32, unavailable bool, lastErr error) {
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.text
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil || len(vecs) != len(items) {
		lastErr = err
		vecs = make([][]float32, len(items))
	}
	dim := majorityDim(vecs)
	succeeded := 0
	for i := range items {
		if mail.ValidVector(vecs[i]) && len(vecs[i]) == dim {
			succeeded++
			continue
		}
		if ctx.Err() != nil {
			return vecs, false, ctx.Err()
		}
		one, err := e.Embed(ctx, texts[i:i+1])
		if err != nil {
			lastErr = err
		}
		vecs[i] = nil
		if err == nil && len(one) == 1 && mail.ValidVector(one[0]) && (dim == 0 || len(one[0]) == dim) {
			vecs[i] = one[0]
			dim = len(one[0])
			succeeded++
		}
	}
	return vecs, succeeded == 0, lastErr
}

func majorityDim(vecs [][]float32) int {
	count := map[int]int{}
	best, bestN := 0, 0
	for _, v := range vecs {
		if !mail.ValidVector(v) {
			continue
		}
		count[len(v)]++
		if count[len(v)] > bestN {
			best, bestN = len(v), count[len(v)]
		}
	}
	return best
}

func (s *Store) pendingEmbeds(ctx context.Context, below int64, n int) ([]embedItem, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT m.id, m.subject, m.body FROM messages m
		LEFT JOIN embed_state e ON e.message_id = m.id
		WHERE m.deleted_at IS NULL AND m.id < ? AND (e.message_id IS NULL OR e.source_hash != m.embed_hash)
		ORDER BY m.id DESC LIMIT ?`, below, n)
	if err != nil {
		return nil, fmt.Errorf("list messages to embed: %w", err)
	}
	defer rows.Close()
	var out []embedItem
	for rows.Next() {
		var it embedItem
		var subject, body string
		if err := rows.Scan(&it.id, &subject, &body); err != nil {
			return nil, err
		}
		it.text = EmbedSource(subject, body, s.maxChars)
		it.hash = SourceHash(it.text)
		out = append(out, it)
	}
	return out, rows.Err()
}

// PendingEmbeds counts active messages without a current vector.
func (s *Store) PendingEmbeds(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM messages m LEFT JOIN embed_state e ON e.message_id = m.id
		WHERE m.deleted_at IS NULL AND (e.message_id IS NULL OR e.source_hash != m.embed_hash)`).Scan(&n)
	return n, err
}

// storeVectors writes the valid vectors, creating or resetting the vector
// table for their dimension first.
func (s *Store) storeVectors(ctx context.Context, items []embedItem, vecs [][]float32, model string) (stored int, reset bool, dim int, err error) {
	dim = majorityDim(vecs)
	if dim == 0 {
		return 0, false, 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, 0, err
	}
	defer tx.Rollback()
	reset, err = s.ensureVectorTable(ctx, tx, dim, model)
	if err != nil {
		return 0, false, 0, err
	}
	seq, err := s.nextSeq(ctx, tx)
	if err != nil {
		return 0, false, 0, err
	}
	now := s.now().Unix()
	for i, it := range items {
		v := vecs[i]
		if !mail.ValidVector(v) || len(v) != dim {
			continue
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM message_vec WHERE rowid = ?", it.id); err != nil {
			return 0, false, 0, fmt.Errorf("replace vector %d: %w", it.id, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO message_vec(rowid, embedding) VALUES(?, ?)", it.id, sqlitedb.EncodeVector(mail.Normalize(v))); err != nil {
			return 0, false, 0, fmt.Errorf("store vector %d: %w", it.id, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO embed_state(message_id, source_hash, model, dim, embedded_at, seq, q) VALUES(?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(message_id) DO UPDATE SET source_hash = excluded.source_hash, model = excluded.model, dim = excluded.dim,
			embedded_at = excluded.embedded_at, seq = excluded.seq, q = excluded.q`,
			it.id, it.hash, model, dim, now, seq, mail.QuantizeInt8(v)); err != nil {
			return 0, false, 0, fmt.Errorf("record embedding %d: %w", it.id, err)
		}
		// The stored hash is the one the ingest computed; keep them equal.
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET embed_hash = ? WHERE id = ? AND embed_hash != ?", it.hash, it.id, it.hash); err != nil {
			return 0, false, 0, err
		}
		stored++
	}
	return stored, reset, dim, tx.Commit()
}

func (s *Store) nextSeq(ctx context.Context, tx *sql.Tx) (int64, error) {
	v, err := s.meta(ctx, tx, "vec_seq")
	if err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	n++
	return n, s.setMeta(ctx, tx, "vec_seq", strconv.FormatInt(n, 10))
}

// ensureVectorTable makes message_vec hold vectors of dim. A different
// stored dimension means another model: all vectors are dropped and the
// generation bumped so that search workers reload.
func (s *Store) ensureVectorTable(ctx context.Context, tx *sql.Tx, dim int, model string) (reset bool, err error) {
	cur, err := s.meta(ctx, tx, "vec_dim")
	if err != nil {
		return false, err
	}
	if cur == strconv.Itoa(dim) {
		return false, s.setMeta(ctx, tx, "vec_model", model)
	}
	if cur != "" {
		reset = true
		s.log.Warn("embedding dimension changed; resetting all mail vectors", "old", cur, "new", dim)
		if _, err := tx.ExecContext(ctx, "DELETE FROM embed_state"); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS message_vec"); err != nil {
		return false, fmt.Errorf("drop vector table: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("CREATE VIRTUAL TABLE message_vec USING vec0(embedding float[%d] distance_metric=cosine)", dim)); err != nil {
		return false, fmt.Errorf("create vector table: %w", err)
	}
	gen, _ := s.meta(ctx, tx, "vec_generation")
	g, _ := strconv.Atoi(gen)
	for k, v := range map[string]string{"vec_dim": strconv.Itoa(dim), "vec_model": model, "vec_generation": strconv.Itoa(g + 1)} {
		if err := s.setMeta(ctx, tx, k, v); err != nil {
			return false, err
		}
	}
	return reset, nil
}

// ensureEmbedHashes recomputes every message's embedding source hash when
// the character cap changed since they were computed, so that the next
// embedding run re-embeds exactly the messages whose source text changed.
func (s *Store) ensureEmbedHashes(ctx context.Context) error {
	cur, err := s.meta(ctx, s.db, "embed_max_chars")
	if err != nil {
		return err
	}
	want := strconv.Itoa(s.maxChars)
	if cur == want {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if cur != "" {
		rows, err := tx.QueryContext(ctx, "SELECT id, subject, body FROM messages")
		if err != nil {
			return err
		}
		type upd struct {
			id   int64
			hash string
		}
		var ups []upd
		for rows.Next() {
			var id int64
			var subject, body string
			if err := rows.Scan(&id, &subject, &body); err != nil {
				rows.Close()
				return err
			}
			ups = append(ups, upd{id, SourceHash(EmbedSource(subject, body, s.maxChars))})
		}
		rows.Close()
		for _, u := range ups {
			if _, err := tx.ExecContext(ctx, "UPDATE messages SET embed_hash = ? WHERE id = ?", u.hash, u.id); err != nil {
				return err
			}
		}
	}
	if err := s.setMeta(ctx, tx, "embed_max_chars", want); err != nil {
		return err
	}
	return tx.Commit()
}

// EmbedLoopOptions pace a continuous embedding worker.
type EmbedLoopOptions struct {
	EmbedOptions
	// Busy is the pause while a backlog remains (default 2 s), Idle the pause
	// when nothing is pending (default 15 min), and Backoff the first pause
	// after the endpoint failed, doubled up to MaxBackoff (1 min, 30 min).
	Busy, Idle, Backoff, MaxBackoff time.Duration
	// OnRun is called after every run.
	OnRun func(EmbedStats, error)
	// Sleep replaces the pause in tests; it returns false when ctx ended.
	Sleep func(ctx context.Context, d time.Duration) bool
}

// EmbedLoop runs Embed until ctx ends: quickly again while a backlog remains,
// slowly when idle, and with exponential back-off while the endpoint is down.
func (s *Store) EmbedLoop(ctx context.Context, opts EmbedLoopOptions) error {
	if opts.Busy <= 0 {
		opts.Busy = 2 * time.Second
	}
	if opts.Idle <= 0 {
		opts.Idle = 15 * time.Minute
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Minute
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Minute
	}
	if opts.Limit <= 0 {
		opts.Limit = 20 * max(opts.Batch, DefaultEmbedBatch)
	}
	sleep := opts.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return false
			case <-t.C:
				return true
			}
		}
	}
	backoff := opts.Backoff
	for {
		st, err := s.Embed(ctx, opts.EmbedOptions)
		if opts.OnRun != nil {
			opts.OnRun(st, err)
		}
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrEmbedUnavailable):
			wait = backoff
			backoff = min(2*backoff, opts.MaxBackoff)
		case err != nil:
			return err
		case st.Pending > 0 && st.Embedded > 0:
			wait, backoff = opts.Busy, opts.Backoff
		default:
			wait, backoff = opts.Idle, opts.Backoff
		}
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}
