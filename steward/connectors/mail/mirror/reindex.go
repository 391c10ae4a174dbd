package mirror

import (
	"context"
	"fmt"
	"time"
)

// ReindexOptions select what Reindex rebuilds.
type ReindexOptions struct {
	// Vectors also drops every vector, so the next embedding run rebuilds
	// them from the message rows.
	Vectors bool
}

// ReindexStats reports a rebuild.
type ReindexStats struct {
	Messages int           `json:"messages"`
	Threads  int           `json:"threads"`
	Vectors  bool          `json:"vectorsDropped"`
	Duration time.Duration `json:"durationNs"`
}

// Reindex rebuilds the derived structures from the message rows: the FTS5
// and trigram indexes, thread counts and activity spans, and (optionally)
// the vectors. Vectors of soft-deleted messages are always removed.
func (s *Store) Reindex(ctx context.Context, opts ReindexOptions) (ReindexStats, error) {
	start := time.Now()
	var st ReindexStats
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return st, err
	}
	defer tx.Rollback()
	steps := []string{
		"DELETE FROM fts_queue",
		"INSERT INTO message_fts(message_fts) VALUES('delete-all')",
		"INSERT INTO message_tri(message_tri) VALUES('delete-all')",
		`INSERT INTO message_fts(rowid, subject, sender, recipients, body)
		   SELECT id, subject, from_name || ' ' || from_addr, to_text || ' ' || cc_text, body FROM messages WHERE deleted_at IS NULL`,
		`INSERT INTO message_tri(rowid, sender, recipient, cc, subject, body)
		   SELECT id, from_name || ' ' || from_addr, to_text, cc_text, subject, body FROM messages WHERE deleted_at IS NULL`,
		`UPDATE threads SET
		   message_count = (SELECT count(*) FROM messages m WHERE m.thread_id = threads.id AND m.deleted_at IS NULL),
		   first_at = coalesce((SELECT min(date) FROM messages m WHERE m.thread_id = threads.id AND m.deleted_at IS NULL), first_at),
		   last_at = coalesce((SELECT max(date) FROM messages m WHERE m.thread_id = threads.id AND m.deleted_at IS NULL), last_at)`,
		"DELETE FROM embed_state WHERE message_id IN (SELECT id FROM messages WHERE deleted_at IS NOT NULL)",
	}
	for _, q := range steps {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return st, fmt.Errorf("reindex mail: %w", err)
		}
	}
	if dim, _ := s.meta(ctx, tx, "vec_dim"); dim != "" {
		if opts.Vectors {
			if _, err := tx.ExecContext(ctx, "DELETE FROM embed_state"); err != nil {
				return st, err
			}
			if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS message_vec"); err != nil {
				return st, err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM meta WHERE key IN ('vec_dim', 'vec_model')"); err != nil {
				return st, err
			}
			st.Vectors = true
		} else if _, err := tx.ExecContext(ctx, "DELETE FROM message_vec WHERE rowid NOT IN (SELECT message_id FROM embed_state)"); err != nil {
			return st, fmt.Errorf("reindex mail vectors: %w", err)
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM messages WHERE deleted_at IS NULL), (SELECT count(*) FROM threads)").Scan(&st.Messages, &st.Threads); err != nil {
		return st, err
	}
	if err := tx.Commit(); err != nil {
		return st, fmt.Errorf("reindex mail: %w", err)
	}
	if err := s.optimizeFTS(ctx); err != nil {
		return st, err
	}
	st.Duration = time.Since(start)
	return st, nil
}

// optimizeFTS merges each full-text index into one segment.
func (s *Store) optimizeFTS(ctx context.Context) error {
	for _, table := range []string{"message_fts", "message_tri"} {
		if _, err := s.db.ExecContext(ctx, "INSERT INTO "+table+"("+table+") VALUES('optimize')"); err != nil {
			return fmt.Errorf("merge the %s index: %w", table, err)
		}
	}
	return nil
}
