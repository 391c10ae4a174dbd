package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// threadWindow is how far apart in time two messages with the same
// normalised subject and a shared participant may be and still be one thread.
const threadWindow = 14 * 24 * 3600

// maxParticipants bounds a thread's participant list.
const maxParticipants = 100

// threadInput is what thread resolution needs to know about a new message.
type threadInput struct {
	accountID    int64
	messageID    string   // RFC Message-ID, "" when absent
	parents      []string // In-Reply-To first, then References newest first
	gmThreadID   string
	subjectNorm  string
	participants []string // lower-case addresses
	owned        map[string]bool
	date         int64
}

// resolveThread picks the thread of a message that is not stored yet, in
// descending order of confidence: (1, existing identity, is the caller's
// case) Gmail thread id, RFC reply graph in both directions (a stored parent,
// or stored replies that reference this message), normalised subject with a
// shared participant within ±14 days, else a new thread. When the reply graph
// joins threads that were separate (their common message arrives late, as
// it does in a newest-first backfill), they are merged.
func resolveThread(ctx context.Context, tx execer, in threadInput) (int64, string, error) {
	if in.gmThreadID != "" {
		var id int64
		err := tx.QueryRowContext(ctx, "SELECT id FROM threads WHERE account_id = ? AND gm_thread_id = ?", in.accountID, in.gmThreadID).Scan(&id)
		if err == nil {
			return id, "gmail", nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, "", err
		}
	}
	found, err := graphThreads(ctx, tx, in)
	if err != nil {
		return 0, "", err
	}
	if len(found) > 0 {
		keep := found[0]
		for _, other := range found[1:] {
			if err := mergeThreads(ctx, tx, keep, other); err != nil {
				return 0, "", err
			}
		}
		return keep, "reply-graph", nil
	}
	if in.subjectNorm != "" {
		id, err := subjectThread(ctx, tx, in)
		if err != nil || id != 0 {
			return id, "subject", err
		}
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO threads(account_id, subject_norm, first_at, last_at, gm_thread_id) VALUES(?, ?, ?, ?, NULLIF(?, ''))",
		in.accountID, in.subjectNorm, in.date, in.date, in.gmThreadID)
	if err != nil {
		return 0, "", fmt.Errorf("create thread: %w", err)
	}
	id, err := res.LastInsertId()
	return id, "new", err
}

// graphThreads returns the distinct threads linked to the message by
// In-Reply-To/References, parents first.
func graphThreads(ctx context.Context, tx execer, in threadInput) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	add := func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id sql.NullInt64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if id.Valid && !seen[id.Int64] {
				seen[id.Int64] = true
				out = append(out, id.Int64)
			}
		}
		return rows.Err()
	}
	for _, ref := range in.parents {
		if err := add(tx.QueryContext(ctx, "SELECT thread_id FROM messages WHERE account_id = ? AND message_id = ?", in.accountID, ref)); err != nil {
			return nil, fmt.Errorf("find parent thread: %w", err)
		}
	}
	if in.messageID != "" {
		if err := add(tx.QueryContext(ctx, `SELECT m.thread_id FROM message_refs r JOIN messages m ON m.id = r.message_id
			WHERE r.ref = ? AND m.account_id = ? ORDER BY m.id DESC LIMIT 50`, in.messageID, in.accountID)); err != nil {
			return nil, fmt.Errorf("find reply threads: %w", err)
		}
	}
	return out, nil
}

func subjectThread(ctx context.Context, tx execer, in threadInput) (int64, error) {
	var addrs []any
	for _, p := range in.participants {
		if !in.owned[p] {
			addrs = append(addrs, p)
		}
	}
	if len(addrs) == 0 {
		return 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM threads WHERE account_id = ? AND subject_norm = ?
		AND last_at >= ? AND first_at <= ? ORDER BY last_at DESC LIMIT 20`,
		in.accountID, in.subjectNorm, in.date-threadWindow, in.date+threadWindow)
	if err != nil {
		return 0, fmt.Errorf("find subject threads: %w", err)
	}
	var candidates []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		candidates = append(candidates, id)
	}
	rows.Close()
	q := "SELECT 1 FROM thread_participants WHERE thread_id = ? AND addr IN (?" + strings.Repeat(",?", len(addrs)-1) + ") LIMIT 1"
	for _, id := range candidates {
		var one int
		err := tx.QueryRowContext(ctx, q, append([]any{id}, addrs...)...).Scan(&one)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	return 0, nil
}

// mergeThreads moves every message of other into keep and removes other.
func mergeThreads(ctx context.Context, tx execer, keep, other int64) error {
	if keep == other {
		return nil
	}
	stmts := []string{
		"UPDATE messages SET thread_id = ?1 WHERE thread_id = ?2",
		"INSERT OR IGNORE INTO thread_participants(thread_id, addr) SELECT ?1, addr FROM thread_participants WHERE thread_id = ?2",
		"UPDATE threads SET gm_thread_id = coalesce(gm_thread_id, (SELECT gm_thread_id FROM threads WHERE id = ?2)) WHERE id = ?1",
		"DELETE FROM threads WHERE id = ?2",
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q, keep, other); err != nil {
			return fmt.Errorf("merge thread %d into %d: %w", other, keep, err)
		}
	}
	return refreshThread(ctx, tx, keep)
}

// addParticipants records addresses on a thread (bounded) and refreshes its
// participant list when one was new.
func addParticipants(ctx context.Context, tx execer, thread int64, addrs []string) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM thread_participants WHERE thread_id = ?", thread).Scan(&n); err != nil {
		return err
	}
	changed := false
	for _, a := range addrs {
		if n >= maxParticipants {
			break
		}
		res, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO thread_participants(thread_id, addr) VALUES(?, ?)", thread, a)
		if err != nil {
			return fmt.Errorf("record thread participants: %w", err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			n++
			changed = true
		}
	}
	if changed {
		_, err := tx.ExecContext(ctx, `UPDATE threads SET participants =
			(SELECT group_concat(addr, ', ') FROM (SELECT addr FROM thread_participants WHERE thread_id = ?1 ORDER BY addr)) WHERE id = ?1`, thread)
		return err
	}
	return nil
}

// refreshThread recomputes a thread's message count and activity span from
// its active messages.
func refreshThread(ctx context.Context, tx execer, thread int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE threads SET
		message_count = (SELECT count(*) FROM messages WHERE thread_id = ?1 AND deleted_at IS NULL),
		first_at = coalesce((SELECT min(date) FROM messages WHERE thread_id = ?1 AND deleted_at IS NULL), first_at),
		last_at = coalesce((SELECT max(date) FROM messages WHERE thread_id = ?1 AND deleted_at IS NULL), last_at)
		WHERE id = ?1`, thread)
	if err != nil {
		return fmt.Errorf("refresh thread %d: %w", thread, err)
	}
	return nil
}
