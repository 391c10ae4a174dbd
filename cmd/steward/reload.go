package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reloader re-reads configuration files when serve gets SIGHUP. Each file
// is parsed and validated in full before it replaces the one in use; a bad
// file keeps the previous configuration and the log says why.
type reloader struct {
	log   *slog.Logger
	mu    sync.Mutex
	steps []reloadStep
}

type reloadStep struct {
	file string
	fn   func() error
}

func (r *reloader) add(file string, fn func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, reloadStep{file: file, fn: fn})
}

func (r *reloader) reload() {
	r.mu.Lock()
	steps := append([]reloadStep(nil), r.steps...)
	r.mu.Unlock()
	for _, s := range steps {
		if err := s.fn(); err != nil {
			r.log.Error("SIGHUP: kept the previous configuration; fix the file and send SIGHUP again", "file", s.file, "err", err)
			continue
		}
		r.log.Info("SIGHUP: reloaded", "file", s.file)
	}
}

// run reloads on every SIGHUP until ctx ends.
func (r *reloader) run(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.reload()
			}
		}
	}()
}
