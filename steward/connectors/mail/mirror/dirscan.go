package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// DefaultFullAfter is how old the last full reconcile (one that lists every
// folder whatever its modification time says) may be before the next
// reconcile is full again: about every 24th run at the scheduler's 10-minute
// interval. It is a time, not a count of runs, so that a reconcile that finds
// nothing changed need not write anything.
const DefaultFullAfter = 4 * time.Hour

// lastFullKey is the meta key of the start time (Unix nanoseconds) of the
// last full reconcile that completed.
const lastFullKey = "last_full_reconcile"

// mtimeGranularity is the coarsest directory timestamp a trusted folder may
// have: a folder changed within this much of a scan's start could change
// again in the same timestamp tick unseen, so it is listed again next time
// (notmuch new keeps the same guard).
const mtimeGranularity = 2 * time.Second

// dirState is a Maildir directory as the last reconcile listed it.
type dirState struct {
	mtime, size int64
	trusted     bool
}

// dirScan tracks one Sync's use of the recorded directory states.
type dirScan struct {
	prev    map[string]map[string]dirState // account → dir → state
	skipped map[string]bool
	listed  map[string]map[string]dirState // account → dir → state listed now
}

func (d *dirScan) unchanged(account string) func(string, fs.FileInfo) bool {
	return func(dir string, st fs.FileInfo) bool {
		p, ok := d.prev[account][dir]
		if !ok || !p.trusted || p.mtime != st.ModTime().UnixNano() || p.size != st.Size() {
			return false
		}
		d.skipped[dir] = true
		return true
	}
}

func (d *dirScan) list(account string, start time.Time) func(string, fs.FileInfo) {
	return func(dir string, st fs.FileInfo) {
		m := d.listed[account]
		if m == nil {
			m = map[string]dirState{}
			d.listed[account] = m
		}
		m[dir] = dirState{mtime: st.ModTime().UnixNano(), size: st.Size(),
			trusted: st.ModTime().Add(mtimeGranularity).Before(start)}
	}
}

// changed says whether a folder was listed with a state other than its
// record, or a recorded folder was neither listed nor skipped.
func (d *dirScan) changed() bool {
	for acct, prev := range d.prev {
		for dir, p := range prev {
			if st, ok := d.listed[acct][dir]; (!ok && !d.skipped[dir]) || (ok && st != p) {
				return true
			}
		}
	}
	for acct, listed := range d.listed {
		for dir := range listed {
			if _, ok := d.prev[acct][dir]; !ok {
				return true
			}
		}
	}
	return false
}

// loadDirStates reads the recorded directories of an account.
func loadDirStates(ctx context.Context, q execer, account string) (map[string]dirState, error) {
	rows, err := q.QueryContext(ctx, "SELECT path, mtime, size, trusted FROM maildir_dirs WHERE account = ?", account)
	if err != nil {
		return nil, fmt.Errorf("load mail folder states: %w", err)
	}
	defer rows.Close()
	out := map[string]dirState{}
	for rows.Next() {
		var p string
		var d dirState
		if err := rows.Scan(&p, &d.mtime, &d.size, &d.trusted); err != nil {
			return nil, err
		}
		out[p] = d
	}
	return out, rows.Err()
}

// loadKnownUnder adds the mirrored paths and failures directly inside dir.
func (s *Store) loadKnownUnder(ctx context.Context, a *accountState, dir string, known map[string]*knownEntry, failed map[string]failedPath) error {
	lo, hi := dir+string(filepath.Separator), dir+string(filepath.Separator+1)
	rows, err := s.db.QueryContext(ctx, "SELECT path, message_id, mailbox_id, file_key, mtime, size FROM message_paths WHERE path >= ? AND path < ?", lo, hi)
	if err != nil {
		return fmt.Errorf("load mirrored paths of %s: %w", dir, err)
	}
	if err := scanKnown(rows, a.cfg.Name, known); err != nil {
		return err
	}
	frows, err := s.db.QueryContext(ctx, "SELECT path, mtime, size FROM ingest_errors WHERE path >= ? AND path < ?", lo, hi)
	if err != nil {
		return err
	}
	return scanFailed(frows, a.cfg.Name, failed)
}

// saveDirStates records the directories listed by a reconcile that
// completed. A directory neither listed nor skipped (gone, or unreadable) is
// forgotten unless unreadable, where it stays untrusted so that its paths
// are still looked at once it can be read or is gone.
// A full reconcile passes its start as fullAt (zero otherwise), recorded for
// fullPassRecent.
func (s *Store) saveDirStates(ctx context.Context, accounts []*accountState, d *dirScan, rootsOK map[string]bool, unreadable []string, fullAt time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, a := range accounts {
		name := a.cfg.Name
		if a.cfg.Kind != mail.KindMaildir || !rootsOK[name] {
			continue
		}
		for dir := range d.prev[name] {
			if _, listed := d.listed[name][dir]; listed || d.skipped[dir] {
				continue
			}
			q := "DELETE FROM maildir_dirs WHERE path = ?"
			if underAny(dir, unreadable) {
				q = "UPDATE maildir_dirs SET trusted = 0 WHERE path = ?"
			}
			if _, err := tx.ExecContext(ctx, q, dir); err != nil {
				return fmt.Errorf("record mail folder %s: %w", dir, err)
			}
		}
		for dir, st := range d.listed[name] {
			if p, ok := d.prev[name][dir]; ok && p == st {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO maildir_dirs(path, account, mtime, size, trusted) VALUES(?, ?, ?, ?, ?)
				ON CONFLICT(path) DO UPDATE SET account = excluded.account, mtime = excluded.mtime, size = excluded.size, trusted = excluded.trusted`,
				dir, name, st.mtime, st.size, boolInt(st.trusted)); err != nil {
				return fmt.Errorf("record mail folder %s: %w", dir, err)
			}
		}
	}
	if !fullAt.IsZero() {
		if err := s.setMeta(ctx, tx, lastFullKey, strconv.FormatInt(fullAt.UnixNano(), 10)); err != nil {
			return fmt.Errorf("record full reconcile time: %w", err)
		}
	}
	return s.commit(ctx, tx)
}

// distrustDirs marks the folders of paths written outside a reconcile (a
// backfill, a file event) as needing a listing, so that an incremental
// reconcile still looks at the paths they hold.
func (s *Store) distrustDirs(ctx context.Context, dirs map[string]string) error {
	if len(dirs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for dir, account := range dirs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO maildir_dirs(path, account, mtime, size, trusted) VALUES(?, ?, 0, 0, 0)
			ON CONFLICT(path) DO UPDATE SET trusted = 0`, dir, account); err != nil {
			return fmt.Errorf("record mail folder %s: %w", dir, err)
		}
	}
	return s.commit(ctx, tx)
}

// fullPassRecent reports whether a full reconcile completed within maxAge
// before now. None on record (a store written before the time was kept
// included), an unreadable record or one in the future (the clock was set
// back) all call for a full pass.
func fullPassRecent(ctx context.Context, q execer, now time.Time, maxAge time.Duration) bool {
	v, err := metaValue(ctx, q, lastFullKey)
	if err != nil || v == "" {
		return false
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(0, ns))
	return age >= 0 && age < maxAge
}
