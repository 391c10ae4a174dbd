package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

// Mode selects how Sync treats the store.
type Mode int

const (
	// Backfill imports files not yet mirrored, newest first, and removes nothing.
	Backfill Mode = iota
	// Reconcile diffs paths and modification times against the mirror:
	// vanished paths are removed first, new and changed files ingested, and
	// messages left without any path soft-deleted.
	Reconcile
)

func (m Mode) String() string {
	if m == Reconcile {
		return "reconcile"
	}
	return "backfill"
}

// SyncOptions configure one Sync run.
type SyncOptions struct {
	Mode Mode
	// Accounts limits the run to these account names; empty means all.
	Accounts []string
	// Workers parse files in parallel; default GOMAXPROCS.
	Workers int
	// BatchSize is how many files one transaction holds: default 2,048 for
	// a backfill (large FTS5 segments merge less) and 256 otherwise. A
	// transaction also commits after BatchTime (default 10 s, 2 s).
	BatchSize int
	BatchTime time.Duration
	// Progress, when set, is called about once a second and at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Parse overrides the message parser limits.
	Parse message.Options
	// Full makes a reconcile list every Maildir folder, even those whose
	// directory time says they are unchanged. Without it, a reconcile is full
	// anyway once the last full one is older than FullAfter (default
	// DefaultFullAfter; negative: never), or when there is none on record.
	Full      bool
	FullAfter time.Duration
}

// Progress reports a running Sync.
type Progress struct {
	Mode    string        `json:"mode"`
	Done    int           `json:"done"`
	Total   int           `json:"total"`
	Rate    float64       `json:"messagesPerSecond"`
	ETA     time.Duration `json:"etaNs"`
	Elapsed time.Duration `json:"elapsedNs"`
	Errors  int           `json:"errors"`
	Final   bool          `json:"final"`
}

// String formats the progress line the CLI prints.
func (p Progress) String() string {
	pct := 100.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	eta := "—"
	if !p.Final && p.Rate > 0 {
		eta = p.ETA.Round(time.Second).String()
	}
	return fmt.Sprintf("%s: %d/%d (%.1f%%) %.0f msg/s, ETA %s, %d errors", p.Mode, p.Done, p.Total, pct, p.Rate, eta, p.Errors)
}

// SyncStats summarises a Sync run.
type SyncStats struct {
	Mode      string `json:"mode"`
	Scanned   int    `json:"scanned"`
	New       int    `json:"new"`
	Updated   int    `json:"updated"`
	PathOnly  int    `json:"pathOnly"`
	Renamed   int    `json:"renamed"`
	Unchanged int    `json:"unchanged"`
	// SkippedFolders counts Maildir cur/ and new/ directories not listed
	// because their modification time showed no change since the last
	// reconcile; their files count in neither Scanned nor Unchanged.
	SkippedFolders int           `json:"skippedFolders"`
	Full           bool          `json:"full,omitempty"`
	Removed        int           `json:"removedPaths"`
	SoftDeleted    int           `json:"softDeleted"`
	Errors         int           `json:"errors"`
	BlobsSwept     int           `json:"blobsSwept"`
	Duration       time.Duration `json:"durationNs"`
	// Unreadable lists folders that could not be listed; their messages were
	// left as they were rather than treated as deleted.
	Unreadable []string `json:"unreadable,omitempty"`
	// Optimized says the full-text indexes were merged after a large import.
	Optimized bool `json:"optimized,omitempty"`
}

// optimizeAfter is how many new or changed messages make a backfill merge
// the full-text indexes at its end.
const optimizeAfter = 1000

// knownEntry is a mirrored path as the database records it.
type knownEntry struct {
	account          string
	msgID, mailboxID int64
	fileKey          string
	mtime, size      int64
}

// Sync brings the mirror up to date with the configured stores.
func (s *Store) Sync(ctx context.Context, opts SyncOptions) (SyncStats, error) {
	start := time.Now()
	stats := SyncStats{Mode: opts.Mode.String()}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
		if opts.Mode == Backfill {
			opts.BatchSize = 2048
		}
	}
	if opts.BatchTime <= 0 {
		opts.BatchTime = 2 * time.Second
		if opts.Mode == Backfill {
			opts.BatchTime = 10 * time.Second
		}
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = time.Second
	}
	accounts, err := s.selectAccounts(opts.Accounts)
	if err != nil {
		return stats, err
	}
	if opts.FullAfter == 0 {
		opts.FullAfter = DefaultFullAfter
	}
	now := s.now()
	incremental := opts.Mode == Reconcile && !opts.Full && (opts.FullAfter < 0 || fullPassRecent(ctx, s.db, now, opts.FullAfter))
	ds := &dirScan{prev: map[string]map[string]dirState{}, skipped: map[string]bool{}, listed: map[string]map[string]dirState{}}

	// Enumerate the stores.
	var entries []source.Entry
	var unreadable []string
	rootsOK := map[string]bool{}
	recorded := false
	for _, a := range accounts {
		if a.cfg.Kind == mail.KindMaildir {
			prev, err := loadDirStates(ctx, s.db, a.cfg.Name)
			if err != nil {
				return stats, err
			}
			ds.prev[a.cfg.Name] = prev
			recorded = recorded || len(prev) > 0
		}
	}
	incremental = incremental && recorded
	for _, a := range accounts {
		var wopts source.WalkOptions
		if a.cfg.Kind == mail.KindMaildir {
			prev := ds.prev[a.cfg.Name]
			if incremental && len(prev) > 0 {
				wopts.Unchanged = ds.unchanged(a.cfg.Name)
			}
			wopts.Listed = ds.list(a.cfg.Name, start)
		}
		err := source.WalkWith(ctx, &a.cfg, wopts, func(e source.Entry) error {
			entries = append(entries, e)
			return nil
		}, func(path string, err error) {
			unreadable = append(unreadable, path)
			s.log.Warn("mail folder unreadable; its messages are kept as they are", "path", path, "err", err)
		})
		if err != nil {
			if ctx.Err() != nil {
				return stats, ctx.Err()
			}
			s.log.Error("mail account unreadable; nothing of it is removed", "account", a.cfg.Name, "err", err)
			unreadable = append(unreadable, a.cfg.Root)
			continue
		}
		rootsOK[a.cfg.Name] = true
	}
	stats.SkippedFolders = len(ds.skipped)
	stats.Full = opts.Mode == Reconcile && !incremental
	known, failed, err := s.loadKnownFor(ctx, accounts, ds, rootsOK)
	if err != nil {
		return stats, err
	}
	stats.Unreadable = unreadable
	stats.Scanned = len(entries)
	s.classifyMailboxes(ctx, accounts, entries)

	onDisk := make(map[string]bool, len(entries))
	var todo []source.Entry
	for _, e := range entries {
		onDisk[e.Path] = true
		if k, ok := known[e.Path]; ok && k.mtime == e.MTime.UnixNano() && k.size == e.Size {
			stats.Unchanged++
			continue
		}
		if f, ok := failed[e.Path]; ok && f.mtime == e.MTime.UnixNano() && f.size == e.Size {
			stats.Unchanged++ // still the same broken file: its error stands
			continue
		}
		todo = append(todo, e)
	}

	if opts.Mode == Reconcile {
		var vanished []string
		for p, k := range known {
			if onDisk[p] || underAny(p, unreadable) || !rootsOK[k.account] {
				continue
			}
			vanished = append(vanished, p)
		}
		sort.Strings(vanished)
		todo, vanished, err = s.applyRenames(ctx, todo, vanished, known, &stats)
		if err != nil {
			return stats, err
		}
		if err := s.removePaths(ctx, vanished, &stats); err != nil {
			return stats, err
		}
		for p, f := range failed {
			if !onDisk[p] && !underAny(p, unreadable) && rootsOK[f.account] {
				if _, err := s.db.ExecContext(ctx, "DELETE FROM ingest_errors WHERE path = ?", p); err != nil {
					return stats, err
				}
			}
		}
	}

	// Newest first, so current mail is searchable before old history is done.
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].Recency > todo[j].Recency })
	if err := s.ingest(ctx, todo, opts, &stats, start); err != nil {
		return stats, err
	}
	if opts.Mode == Backfill && stats.New+stats.Updated >= optimizeAfter {
		// A large import leaves the full-text indexes in many segments;
		// merging them makes every later query — and above all the first
		// one on a fresh connection, which loads the index structure —
		// cheaper. A few seconds for the reference archive's 78,000 messages.
		if err := s.optimizeFTS(ctx); err != nil {
			s.log.Warn("could not merge the mail full-text indexes; search still works", "err", err)
		}
		stats.Optimized = true
	}
	if opts.Mode == Reconcile {
		// Only a changed folder can leave a message orphaned or wrongly
		// attributed — this run's changes, or a killed run's, whose folders
		// still differ from their record; a full pass looks anyway.
		changed := stats.Full || ds.changed() || stats.Removed+stats.Renamed+stats.New+stats.Updated+stats.PathOnly+stats.Errors > 0
		if changed {
			n, err := s.settleOrphans(ctx)
			stats.SoftDeleted += n
			if err != nil {
				return stats, err
			}
		}
		if changed {
			swept, err := s.sweepBlobs(ctx)
			stats.BlobsSwept = swept
			if err != nil {
				s.log.Warn("attachment blob sweep failed", "err", err)
			}
		}
		// Only now, with every change committed, may a folder be trusted:
		// a reconcile killed before this point lists it again. An
		// incremental reconcile that found every folder as recorded has
		// nothing to record, and writes nothing: no transaction, no WAL
		// to create, sync and check-point at close.
		if !incremental || changed {
			var fullAt time.Time
			if !incremental {
				fullAt = now
			}
			if err := s.saveDirStates(ctx, accounts, ds, rootsOK, unreadable, fullAt); err != nil {
				return stats, err
			}
		}
	} else {
		// A backfill adds paths without looking for removals: the folders
		// it listed are looked at again by the next reconcile.
		dirs := map[string]string{}
		for acct, m := range ds.listed {
			for dir := range m {
				dirs[dir] = acct
			}
		}
		if err := s.distrustDirs(ctx, dirs); err != nil {
			return stats, err
		}
	}
	stats.Duration = time.Since(start)
	return stats, nil
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (s *Store) selectAccounts(names []string) ([]*accountState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*accountState
	if len(names) == 0 {
		for _, a := range s.accounts {
			out = append(out, a)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
		return out, nil
	}
	for _, n := range names {
		a, ok := s.accounts[n]
		if !ok {
			return nil, fmt.Errorf("account %q is not configured", n)
		}
		out = append(out, a)
	}
	return out, nil
}

type failedPath struct {
	account     string
	mtime, size int64
}

// loadKnownFor reads the mirrored paths and recorded failures a Sync needs:
// all of an account's, or, when folders were skipped, those of the folders
// listed now and of the recorded folders that were not seen (gone).
func (s *Store) loadKnownFor(ctx context.Context, accounts []*accountState, ds *dirScan, rootsOK map[string]bool) (map[string]*knownEntry, map[string]failedPath, error) {
	if len(ds.skipped) == 0 {
		return s.loadKnown(ctx, accounts)
	}
	known := map[string]*knownEntry{}
	failed := map[string]failedPath{}
	var whole []*accountState
	for _, a := range accounts {
		name := a.cfg.Name
		if a.cfg.Kind != mail.KindMaildir || !rootsOK[name] || len(ds.prev[name]) == 0 {
			whole = append(whole, a)
			continue
		}
		dirs := map[string]bool{}
		for dir := range ds.listed[name] {
			dirs[dir] = true
		}
		for dir := range ds.prev[name] {
			if !ds.skipped[dir] {
				dirs[dir] = true
			}
		}
		for dir := range dirs {
			if err := s.loadKnownUnder(ctx, a, dir, known, failed); err != nil {
				return nil, nil, err
			}
		}
	}
	k2, f2, err := s.loadKnown(ctx, whole)
	if err != nil {
		return nil, nil, err
	}
	maps.Copy(known, k2)
	maps.Copy(failed, f2)
	return known, failed, nil
}

// loadKnown reads the mirrored paths and recorded failures of the accounts.
func (s *Store) loadKnown(ctx context.Context, accounts []*accountState) (map[string]*knownEntry, map[string]failedPath, error) {
	known := map[string]*knownEntry{}
	failed := map[string]failedPath{}
	for _, a := range accounts {
		rows, err := s.db.QueryContext(ctx, `SELECT p.path, p.message_id, p.mailbox_id, p.file_key, p.mtime, p.size
			FROM message_paths p JOIN mailboxes b ON b.id = p.mailbox_id WHERE b.account_id = ?`, a.id)
		if err != nil {
			return nil, nil, fmt.Errorf("load mirrored paths: %w", err)
		}
		if err := scanKnown(rows, a.cfg.Name, known); err != nil {
			return nil, nil, err
		}
		frows, err := s.db.QueryContext(ctx, "SELECT path, mtime, size FROM ingest_errors WHERE account = ?", a.cfg.Name)
		if err != nil {
			return nil, nil, err
		}
		if err := scanFailed(frows, a.cfg.Name, failed); err != nil {
			return nil, nil, err
		}
	}
	return known, failed, nil
}

// scanKnown reads (path, message_id, mailbox_id, file_key, mtime, size) rows into known and closes them.
func scanKnown(rows *sql.Rows, account string, known map[string]*knownEntry) error {
	defer rows.Close()
	for rows.Next() {
		var path string
		k := &knownEntry{account: account}
		if err := rows.Scan(&path, &k.msgID, &k.mailboxID, &k.fileKey, &k.mtime, &k.size); err != nil {
			return err
		}
		known[path] = k
	}
	return rows.Err()
}

// scanFailed reads (path, mtime, size) rows of ingest_errors into failed and closes them.
func scanFailed(rows *sql.Rows, account string, failed map[string]failedPath) error {
	defer rows.Close()
	for rows.Next() {
		var p string
		f := failedPath{account: account}
		if err := rows.Scan(&p, &f.mtime, &f.size); err != nil {
			return err
		}
		failed[p] = f
	}
	return rows.Err()
}

// applyRenames handles Maildir files that only changed name: a client that
// sets a flag renames "key:2,S" to "key:2,RS". Such a file (same mailbox,
// same key, same size) needs no parsing: its path and flags are updated in place.
func (s *Store) applyRenames(ctx context.Context, todo []source.Entry, vanished []string, known map[string]*knownEntry, stats *SyncStats) ([]source.Entry, []string, error) {
	type slot struct {
		mailboxID int64
		key       string
	}
	gone := map[slot]string{}
	for _, p := range vanished {
		k := known[p]
		gone[slot{k.mailboxID, k.fileKey}] = p
	}
	if len(gone) == 0 {
		return todo, vanished, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	renamed := map[string]bool{}
	var rest []source.Entry
	for _, e := range todo {
		acct := s.accounts[e.Account]
		mb, ok := acct.mailboxes[e.Mailbox]
		old, hit := gone[slot{mb.id, e.Key}]
		if !ok || !hit || e.Format != source.FormatMaildir || known[old].size != e.Size {
			rest = append(rest, e)
			continue
		}
		k := known[old]
		if _, err := tx.ExecContext(ctx, "UPDATE message_paths SET path = ?, mtime = ?, seen_at = ? WHERE path = ?",
			e.Path, e.MTime.UnixNano(), s.now().Unix(), old); err != nil {
			return nil, nil, fmt.Errorf("rename path %s: %w", old, err)
		}
		f := e.Flags
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET seen = ?, flagged = ?, answered = ?, draft = ?, forwarded = ?, updated_at = ? WHERE id = ?",
			boolInt(f.Seen), boolInt(f.Flagged), boolInt(f.Answered), boolInt(f.Draft), boolInt(f.Forwarded), s.now().Unix(), k.msgID); err != nil {
			return nil, nil, err
		}
		renamed[old] = true
		delete(gone, slot{mb.id, e.Key})
		stats.Renamed++
	}
	if err := s.commit(ctx, tx); err != nil {
		return nil, nil, err
	}
	var still []string
	for _, p := range vanished {
		if !renamed[p] {
			still = append(still, p)
		}
	}
	return rest, still, nil
}

// removePaths forgets vanished files. Messages they leave without any path
// are soft-deleted later, after new files are ingested, so a message that
// only moved is never deleted in between.
func (s *Store) removePaths(ctx context.Context, paths []string, stats *SyncStats) error {
	for len(paths) > 0 {
		n := min(len(paths), 500)
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, p := range paths[:n] {
			if _, err := s.removePath(ctx, s.q(tx), p, false); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := s.commit(ctx, tx); err != nil {
			return fmt.Errorf("remove vanished paths: %w", err)
		}
		stats.Removed += n
		paths = paths[n:]
	}
	return nil
}

// settleOrphans soft-deletes active messages that have no path left and
// re-attributes messages whose attributed mailbox no longer holds them.
func (s *Store) settleOrphans(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM messages m WHERE deleted_at IS NULL AND (
		NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = m.id) OR
		NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = m.id AND p.mailbox_id = m.mailbox_id))`)
	if err != nil {
		return 0, fmt.Errorf("find orphaned messages: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	deleted := 0
	now := s.now().Unix()
	for _, id := range ids {
		if err := s.settleMessage(ctx, s.q(tx), id, now); err != nil {
			return 0, err
		}
		var d sql.NullInt64
		tx.QueryRowContext(ctx, "SELECT deleted_at FROM messages WHERE id = ?", id).Scan(&d)
		if d.Valid {
			deleted++
		}
	}
	return deleted, s.commit(ctx, tx)
}

func (s *Store) sweepBlobs(ctx context.Context) (int, error) {
	refs := map[string]bool{}
	rows, err := s.db.QueryContext(ctx, "SELECT DISTINCT sha256 FROM attachments WHERE sha256 IS NOT NULL")
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			rows.Close()
			return 0, err
		}
		refs[sha] = true
	}
	rows.Close()
	// Blobs written by a concurrent ingest may not be referenced yet: only
	// sweep blobs older than the cutoff.
	cutoff := time.Now().Add(-time.Hour)
	return s.blobs.Sweep(func(sha string) bool {
		if refs[sha] {
			return true
		}
		p, _ := s.blobs.Path(sha)
		st, err := os.Stat(p)
		return err != nil || st.ModTime().After(cutoff)
	})
}

type parsed struct {
	e   source.Entry
	it  *source.Item
	err error
}

// ingest parses todo with a pool of workers and writes the results in
// batched transactions from one goroutine.
func (s *Store) ingest(ctx context.Context, todo []source.Entry, opts SyncOptions, stats *SyncStats, start time.Time) error {
	total := len(todo)
	report := func(done int, final bool) {
		if opts.Progress == nil {
			return
		}
		el := time.Since(start)
		p := Progress{Mode: opts.Mode.String(), Done: done, Total: total, Elapsed: el, Errors: stats.Errors, Final: final}
		if el > 0 {
			p.Rate = float64(done) / el.Seconds()
		}
		if p.Rate > 0 {
			p.ETA = time.Duration(float64(total-done) / p.Rate * float64(time.Second))
		}
		opts.Progress(p)
	}
	if total == 0 {
		report(0, true)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan source.Entry)
	results := make(chan parsed, opts.Workers*4)
	var wg sync.WaitGroup
	popts := opts.Parse
	popts.Attachment = func(a message.Attachment, r io.Reader) (string, int64, string, error) {
		sha, n, err := s.blobs.Put(r)
		if errors.Is(err, ErrTooLarge) {
			return "", n, sha, err
		}
		return sha, n, sha, err
	}
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				it, err := source.Read(e, popts)
				select {
				case results <- parsed{e: e, it: it, err: err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, e := range todo {
			select {
			case jobs <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	w := &batchWriter{s: s, stats: stats}
	defer w.rollback()
	done := 0
	lastReport := time.Now()
	for r := range results {
		if err := w.apply(ctx, r); err != nil {
			return err
		}
		done++
		if len(w.items) >= opts.BatchSize || time.Since(w.began) > opts.BatchTime {
			if err := w.commit(ctx); err != nil {
				return err
			}
		}
		if time.Since(lastReport) >= opts.ProgressEvery {
			report(done, false)
			lastReport = time.Now()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.commit(ctx); err != nil {
		return err
	}
	report(done, true)
	return nil
}

// batchWriter applies parsed files in batched transactions. A file whose
// rows cannot be written is recorded as an ingest error without losing the
// rest of its batch: the transaction is rolled back, the batch's earlier
// files replayed, and the error recorded. (A savepoint per file would do the
// same, but it forces FTS5 to flush its pending terms at every file.)
type batchWriter struct {
	s     *Store
	stats *SyncStats
	tx    *sql.Tx
	began time.Time
	items []parsed
	delta SyncStats
}

func (w *batchWriter) begin(ctx context.Context) error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin mail batch: %w", err)
	}
	w.tx, w.began = tx, time.Now()
	return nil
}

func (w *batchWriter) rollback() {
	if w.tx != nil {
		w.tx.Rollback()
		w.tx = nil
		// Mailbox rows created in the transaction are gone: forget the
		// cached ids (they are looked up again on use).
		w.s.forgetMailboxes()
	}
}

func (w *batchWriter) apply(ctx context.Context, r parsed) error {
	if err := w.begin(ctx); err != nil {
		return err
	}
	err := w.write(ctx, r)
	if err == nil {
		w.items = append(w.items, r)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Undo the partial rows of this file, keep the others.
	w.rollback()
	replay := w.items
	w.items, w.delta = nil, SyncStats{}
	if err := w.begin(ctx); err != nil {
		return err
	}
	for _, p := range replay {
		if rerr := w.write(ctx, p); rerr != nil {
			return fmt.Errorf("replay mail batch: %w", rerr)
		}
		w.items = append(w.items, p)
	}
	failed := parsed{e: r.e, err: err}
	if err := w.write(ctx, failed); err != nil {
		return err
	}
	w.items = append(w.items, failed)
	return nil
}

// write applies one result inside the open transaction, counting it in delta.
func (w *batchWriter) write(ctx context.Context, r parsed) error {
	q := w.s.q(w.tx)
	if r.err != nil {
		w.delta.Errors++
		w.s.log.Warn("mail file not mirrored", "path", r.e.Path, "err", r.err)
		return w.s.recordError(ctx, q, r.e, r.err)
	}
	res, err := w.s.applyItem(ctx, q, r.it)
	if err != nil {
		return err
	}
	switch res {
	case ingestedNew:
		w.delta.New++
	case ingestedUpdated:
		w.delta.Updated++
	case ingestedPathOnly:
		w.delta.PathOnly++
	}
	return nil
}

func (w *batchWriter) commit(ctx context.Context) error {
	if w.tx == nil {
		return nil
	}
	err := w.s.commit(ctx, w.tx)
	w.tx = nil
	if err != nil {
		return fmt.Errorf("commit mail batch: %w", err)
	}
	w.stats.New += w.delta.New
	w.stats.Updated += w.delta.Updated
	w.stats.PathOnly += w.delta.PathOnly
	w.stats.Errors += w.delta.Errors
	w.items, w.delta = nil, SyncStats{}
	w.s.stmts.flush(ctx)
	return nil
}
