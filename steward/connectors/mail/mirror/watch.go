package mirror

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

// IngestPaths mirrors the current state of the given files: files that exist
// are ingested, files that are gone are forgotten, and messages left without
// any path are soft-deleted. It serves file-system events; paths outside the
// configured accounts are ignored.
func (s *Store) IngestPaths(ctx context.Context, paths []string) (SyncStats, error) {
	start := time.Now()
	stats := SyncStats{Mode: "watch"}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var present []source.Entry
	var gone []string
	touched := map[string]string{} // Maildir folder → account
	sort.Strings(paths)
	for i, p := range paths {
		if i > 0 && paths[i-1] == p {
			continue
		}
		acct := s.accountFor(p)
		if acct == nil {
			continue
		}
		if acct.cfg.Kind == mail.KindMaildir {
			touched[filepath.Dir(p)] = acct.cfg.Name
		}
		e, err := source.EntryForPath(&acct.cfg, p)
		switch {
		case err == nil:
			present = append(present, e)
		case errors.Is(err, fs.ErrNotExist):
			gone = append(gone, p)
		}
	}
	stats.Scanned = len(present)
	// Written first: a folder whose paths change here is listed by the next
	// reconcile even if this run is cut short.
	if err := s.distrustDirs(ctx, touched); err != nil {
		return stats, err
	}
	if err := s.ingest(ctx, present, SyncOptions{Mode: Reconcile, Workers: 1, BatchSize: 256, BatchTime: 2 * time.Second}, &stats, start); err != nil {
		return stats, err
	}
	if len(gone) > 0 {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return stats, err
		}
		defer tx.Rollback()
		for _, p := range gone {
			id, err := s.removePath(ctx, s.q(tx), p, true)
			if err != nil {
				return stats, err
			}
			if id != 0 {
				stats.Removed++
			}
		}
		if err := s.commit(ctx, tx); err != nil {
			return stats, err
		}
	}
	stats.Duration = time.Since(start)
	return stats, nil
}

func (s *Store) accountFor(path string) *accountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		if source.Owns(&a.cfg, path) {
			return a
		}
	}
	return nil
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// Reconcile is the interval of the authoritative full reconcile (default
	// 10 min); the first one runs at start.
	Reconcile time.Duration
	// EventsOnly leaves reconcile to someone else (the scheduler's
	// mail-reconcile job): no reconcile at start nor periodically.
	EventsOnly bool
	// Events enables file-system events (default on, except on macOS, where
	// kqueue would need one descriptor per Mail folder and periodic
	// reconcile is used alone).
	Events *bool
	// Debounce groups events before ingesting them (default 500 ms).
	Debounce time.Duration
	// OnSync reports every reconcile and event batch.
	OnSync func(SyncStats, error)
	Parse  message.Options
}

// Watch keeps the mirror current until ctx ends: file-system events ingest
// new, changed and removed files within the debounce delay, and a periodic
// reconcile catches whatever events missed.
func (s *Store) Watch(ctx context.Context, opts WatchOptions) error {
	if opts.Reconcile <= 0 {
		opts.Reconcile = 10 * time.Minute
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 500 * time.Millisecond
	}
	useEvents := runtime.GOOS != "darwin"
	if opts.Events != nil {
		useEvents = *opts.Events
	}
	report := func(st SyncStats, err error) {
		if opts.OnSync != nil {
			opts.OnSync(st, err)
		}
	}
	var w *fsnotify.Watcher
	var events <-chan fsnotify.Event
	var errs <-chan error
	if useEvents {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			s.log.Warn("file events unavailable; relying on periodic reconcile", "err", err)
		} else {
			defer w.Close()
			for _, a := range s.accountList() {
				s.watchTree(w, a.cfg.Root)
			}
			events, errs = w.Events, w.Errors
		}
	}
	reconcile := func() {
		st, err := s.Sync(ctx, SyncOptions{Mode: Reconcile, Parse: opts.Parse})
		report(st, err)
	}
	var tick <-chan time.Time
	if !opts.EventsOnly {
		reconcile()
		ticker := time.NewTicker(opts.Reconcile)
		defer ticker.Stop()
		tick = ticker.C
	}
	pending := map[string]bool{}
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			reconcile()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create) {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					s.watchTree(w, ev.Name)
					// Files may have landed before the watch existed.
					filepath.WalkDir(ev.Name, func(p string, d fs.DirEntry, err error) error {
						if err == nil && !d.IsDir() {
							pending[p] = true
						}
						return nil
					})
				}
			}
			if isMessageEvent(ev.Name) {
				pending[ev.Name] = true
			}
			if flush == nil {
				flush = time.After(opts.Debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			s.log.Warn("file event error; the next reconcile will catch up", "err", err)
		case <-flush:
			flush = nil
			paths := make([]string, 0, len(pending))
			for p := range pending {
				paths = append(paths, p)
			}
			clear(pending)
			st, err := s.IngestPaths(ctx, paths)
			report(st, err)
		}
	}
}

func isMessageEvent(path string) bool {
	base := filepath.Base(path)
	if strings.HasPrefix(base, ".") {
		return false
	}
	if strings.HasSuffix(base, ".emlx") {
		return true
	}
	dir := filepath.Base(filepath.Dir(path))
	return dir == "cur" || dir == "new"
}

func (s *Store) accountList() []*accountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*accountState, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, a)
	}
	return out
}

// watchTree adds a watch on dir and every folder below it except tmp/,
// hidden folders and Apple Mail's Attachments/.
func (s *Store) watchTree(w *fsnotify.Watcher, dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != dir && (name == "tmp" || name == "Attachments" || strings.HasPrefix(name, ".") && !isMaildirPlusPlus(p)) {
			return filepath.SkipDir
		}
		if err := w.Add(p); err != nil {
			s.log.Warn("cannot watch mail folder; periodic reconcile covers it", "path", p, "err", err)
		}
		return nil
	})
}

func isMaildirPlusPlus(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cur"))
	return err == nil
}
