package wiki

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultRescanInterval is how often Watch re-reads the whole vault, for
// changes a file notification missed.
const DefaultRescanInterval = 5 * time.Minute

// Watch keeps the index current with edits made outside Steward: file
// notifications update single pages at once, and a periodic rescan catches
// whatever notifications missed. New files under raw/sources/ are queued
// for ingest when autoIngest is set. It returns when ctx ends.
func (s *Service) Watch(ctx context.Context, interval time.Duration, autoIngest bool) error {
	if interval <= 0 {
		interval = DefaultRescanInterval
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	addTree := func(root string) {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if p != s.vault.Dir() && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			w.Add(p)
			return nil
		})
	}
	addTree(s.vault.Dir())
	tick := time.NewTicker(interval)
	defer tick.Stop()
	pending := map[string]bool{}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	var firstPending time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := s.Rescan(ctx); err != nil {
				s.log.Warn("wiki rescan", "err", err)
			}
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			rel, err := filepath.Rel(s.vault.Dir(), ev.Name)
			if err != nil || strings.HasPrefix(rel, "..") || hiddenPath(rel) {
				continue
			}
			if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
				addTree(ev.Name)
				continue
			}
			// Settle 100 ms after the last event, but never wait more than
			// a second after the first: an editor saving continuously must
			// not starve the index.
			if len(pending) == 0 {
				firstPending = time.Now()
			}
			pending[filepath.ToSlash(rel)] = true
			debounce.Reset(min(100*time.Millisecond, time.Until(firstPending.Add(time.Second))))
		case <-debounce.C:
			var paths []string
			for p := range pending {
				paths = append(paths, p)
			}
			pending = map[string]bool{}
			if err := s.Update(ctx, paths...); err != nil {
				s.log.Warn("wiki update after a file change", "err", err)
				continue
			}
			s.Embed(ctx)
			if autoIngest {
				for _, p := range paths {
					if strings.HasPrefix(p, SourcesDir+"/") && s.vault.isSourceFile(p) && addTypes[strings.ToLower(filepath.Ext(p))] {
						if _, err := s.queue.Enqueue(ctx, p, ""); err != nil {
							s.log.Warn("queue a new source", "source", p, "err", err)
						}
					}
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("wiki file watch", "err", err)
		}
	}
}

func hiddenPath(rel string) bool {
	for _, el := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(el, ".") {
			return true
		}
	}
	return false
}

func (v *Vault) isSourceFile(rel string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.sources[rel]
}
