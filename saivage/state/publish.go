// Package state provides Saivage's durable publication primitives: fresh
// immutable documents, atomic replacement through one exclusive temporary
// file, head/prev selectors and versioned JSONL streams with validated
// torn-tail truncation. A failure after which the on-disk outcome is unknown
// (rename, directory fsync, append write/fsync/close, tail truncation) is an
// *OutcomeUnknownError handed to the fatal hook, which stops the process
// before any further read or write.
package state

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
)

// OutcomeUnknownError reports a publication whose on-disk result is unknown.
type OutcomeUnknownError struct {
	Op   string
	Path string
	Err  error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("publication outcome unknown: %s %s: %v", e.Op, e.Path, e.Err)
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// ErrStopped is returned by every operation after an unknown outcome when the
// fatal hook returned (tests); production hooks exit the process instead.
var ErrStopped = errors.New("publication stopped after an unknown outcome")

// Step names a point of a publication where Options.Fault may inject an
// error, for tests.
type Step string

// Injectable steps. Errors at StepWrite, StepFsync, StepClose, StepLink and
// StepUnlink are ordinary; errors at the other steps make the outcome
// unknown.
const (
	StepWrite        Step = "write"
	StepFsync        Step = "fsync"
	StepClose        Step = "close"
	StepRename       Step = "rename"
	StepSyncDir      Step = "syncdir"
	StepUnlink       Step = "unlink"
	StepLink         Step = "link"
	StepAppendWrite  Step = "append-write"
	StepAppendFsync  Step = "append-fsync"
	StepAppendClose  Step = "append-close"
	StepTruncate     Step = "truncate"
	StepTruncateSync Step = "truncate-fsync"
)

// Options configures a Publisher.
type Options struct {
	// Fatal receives an *OutcomeUnknownError and must not return in
	// production. Nil means: write the error to standard error and exit 1.
	Fatal func(err error)
	// Fault, when set, is called before each step; a non-nil result is used
	// as that step's error. Tests only.
	Fault func(step Step, path string) error
	// AfterStep, when set, is called after each step succeeds. Crash tests
	// kill the process here.
	AfterStep func(step Step, path string)
	// SkipSync omits every fsync. Only for generating large benchmark
	// fixtures quickly; a project written this way is not crash-safe.
	SkipSync bool
}

// Publisher performs publications. It is safe for concurrent use, but
// Saivage serialises writers of one file through its owners.
type Publisher struct {
	opts    Options
	stopped atomic.Bool
}

// New returns a Publisher.
func New(opts Options) *Publisher {
	if opts.Fatal == nil {
		opts.Fatal = ExitOnUnknown
	}
	return &Publisher{opts: opts}
}

// ExitOnUnknown writes err to file descriptor 2 synchronously and exits 1.
func ExitOnUnknown(err error) {
	os.Stderr.WriteString("saivage: fatal: " + err.Error() + "\n")
	os.Exit(1)
}

func (p *Publisher) fault(step Step, path string) error {
	if p.opts.Fault != nil {
		return p.opts.Fault(step, path)
	}
	return nil
}

func (p *Publisher) after(step Step, path string) {
	if p.opts.AfterStep != nil {
		p.opts.AfterStep(step, path)
	}
}

func (p *Publisher) unknown(op Step, path string, err error) error {
	e := &OutcomeUnknownError{Op: string(op), Path: path, Err: err}
	p.stopped.Store(true)
	p.opts.Fatal(e)
	return e
}

func (p *Publisher) check() error {
	if p.stopped.Load() {
		return ErrStopped
	}
	return nil
}

// Stopped reports whether an unknown outcome has stopped this publisher.
func (p *Publisher) Stopped() bool { return p.stopped.Load() }

// NewUUID returns a random RFC 4122 version-4 UUID.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// TempPrefix starts the name of every publication temporary. Readers ignore
// such names; they are never cleaned up or reused.
const TempPrefix = ".tmp-"

// Replace atomically replaces path with data: one fresh same-directory
// temporary opened O_CREAT|O_EXCL|O_WRONLY, write, fsync, close, rename onto
// path, fsync of the directory. No retry and no temporary cleanup.
func (p *Publisher) Replace(path string, data []byte) error {
	if err := p.check(); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, TempPrefix+NewUUID())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	if err := p.fault(StepWrite, path); err != nil {
		f.Close()
		return fmt.Errorf("publish %s: write: %w", path, err)
	}
	// os.File.Write loops over positive short writes and never resends
	// bytes the kernel accepted.
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("publish %s: write: %w", path, err)
	}
	p.after(StepWrite, path)
	err = p.fault(StepFsync, path)
	if err == nil && !p.opts.SkipSync {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("publish %s: fsync: %w", path, err)
	}
	if err := p.fault(StepClose, path); err != nil {
		f.Close()
		return fmt.Errorf("publish %s: close: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("publish %s: close: %w", path, err)
	}
	if err := p.fault(StepRename, path); err != nil {
		return p.unknown(StepRename, path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return p.unknown(StepRename, path, err)
	}
	p.after(StepRename, path)
	if err := p.syncDir(dir); err != nil {
		return err
	}
	p.after(StepSyncDir, path)
	return nil
}

func (p *Publisher) syncDir(dir string) error {
	if err := p.fault(StepSyncDir, dir); err != nil {
		return p.unknown(StepSyncDir, dir, err)
	}
	if p.opts.SkipSync {
		return nil
	}
	if err := SyncDir(dir); err != nil {
		return p.unknown(StepSyncDir, dir, err)
	}
	return nil
}

// SyncDir fsyncs a directory so entries created or renamed in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrExists is returned when a new document's exact target already exists.
var ErrExists = errors.New("target already exists")

// CreateNew publishes an immutable document: the exact target must be
// absent (lstat ENOENT; any present object, even a dangling link, refuses),
// then it is written like Replace.
func (p *Publisher) CreateNew(path string, data []byte) error {
	if err := p.check(); err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("publish %s: %w", path, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	return p.Replace(path, data)
}

// Mkdir creates a directory with ordinary permissions. With exclusive set,
// an existing directory is an error wrapping fs.ErrExist (used to claim
// identifiers).
func (p *Publisher) Mkdir(path string, exclusive bool) error {
	if err := p.check(); err != nil {
		return err
	}
	err := os.Mkdir(path, 0o777)
	if err != nil && (exclusive || !errors.Is(err, fs.ErrExist)) {
		return fmt.Errorf("create directory %s: %w", path, err)
	}
	return p.syncDir(filepath.Dir(path))
}

// ErrChanged says a file was not removed because it is no longer the one
// the caller inspected.
var ErrChanged = errors.New("the file changed since it was inspected")

// RemoveFile unlinks the regular file at path, only if it is still the
// file seen (same file, size and modification time), then makes the
// removal durable by fsyncing its directory. A changed file is left in
// place (ErrChanged). A refused unlink after which the file is still there
// is an ordinary error; an unlink whose result cannot be known (the file
// is gone although unlink failed, or cannot be inspected) and a failed
// directory fsync make the outcome unknown.
func (p *Publisher) RemoveFile(path string, seen fs.FileInfo) error {
	if err := p.check(); err != nil {
		return err
	}
	now, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if !now.Mode().IsRegular() || !os.SameFile(now, seen) || now.Size() != seen.Size() || !now.ModTime().Equal(seen.ModTime()) {
		return fmt.Errorf("remove %s: %w", path, ErrChanged)
	}
	err = p.fault(StepUnlink, path)
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil {
		if after, lerr := os.Lstat(path); lerr == nil && os.SameFile(after, now) {
			return fmt.Errorf("remove %s: %w", path, err) // still there: nothing happened
		}
		return p.unknown(StepUnlink, path, err)
	}
	p.after(StepUnlink, path)
	if err := p.syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	p.after(StepSyncDir, filepath.Dir(path))
	return nil
}

// Move renames from to to (to must not exist) and fsyncs both parent
// directories. A refused rename that left from in place is an ordinary
// error; one whose result cannot be known, and a failed fsync, make the
// outcome unknown.
func (p *Publisher) Move(from, to string) error {
	if err := p.check(); err != nil {
		return err
	}
	if _, err := os.Lstat(to); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move %s: %s already exists (%v)", from, to, err)
	}
	err := p.fault(StepRename, from)
	if err == nil {
		err = os.Rename(from, to)
	}
	if err != nil {
		_, ferr := os.Lstat(from)
		if _, terr := os.Lstat(to); ferr == nil && errors.Is(terr, fs.ErrNotExist) {
			return fmt.Errorf("move %s: %w", from, err)
		}
		return p.unknown(StepRename, from, err)
	}
	p.after(StepRename, from)
	if err := p.syncDir(filepath.Dir(to)); err != nil {
		return err
	}
	if filepath.Dir(from) != filepath.Dir(to) {
		return p.syncDir(filepath.Dir(from))
	}
	return nil
}
