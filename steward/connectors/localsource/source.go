package localsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"
)

// Whole-source errors, wrapped by Access.Error with advice for the user.
var (
	// ErrPermission means the OS refused access (on macOS: Full Disk Access).
	ErrPermission = errors.New("permission denied")
	// ErrLocked means another process holds the database lock.
	ErrLocked = errors.New("database is locked")
	// ErrMissing means the configured path does not exist.
	ErrMissing = errors.New("not found")
)

// Access says, for the advice in access errors, what a connector's sources
// hold and which app may be holding a store's lock.
type Access struct {
	// Items is what a source holds, plural ("events").
	Items string
	// App is the application that writes the stores ("the Contacts app").
	App string
}

// Error turns the failure to open or read a whole source into an actionable
// error: a permission problem names Full Disk Access (ErrPermission), a
// held lock says to try again (ErrLocked), a missing path says to check the
// configuration (ErrMissing). what is the action ("read Apple calendar").
func (a Access) Error(what, path string, err error) error {
	var errno syscall.Errno
	msg := err.Error()
	switch {
	case errors.Is(err, fs.ErrPermission) || errors.As(err, &errno) && (errno == syscall.EPERM || errno == syscall.EACCES) ||
		strings.Contains(msg, "authorization denied") || strings.Contains(msg, "SQLITE_AUTH"):
		return fmt.Errorf("%s %s: %w: grant Full Disk Access to the program running Steward (System Settings → Privacy & Security → Full Disk Access), or fix the file permissions; no %s were read from this source (%v)",
			what, path, ErrPermission, a.Items, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w: check the path in the configuration (%v)", what, path, ErrMissing, err)
	case strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY"):
		return fmt.Errorf("%s %s: %w by another process (%s may be writing); try again shortly (%v)", what, path, ErrLocked, a.App, err)
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}

// ReadAll reads every source with read, in order. A source that fails is
// left out of the results and its error recorded under its name in failed:
// a failed read is not evidence that its data is gone, so the caller keeps
// what it indexed from it before. A cancelled ctx stops the run. what names
// the connector and items what its sources hold, in logs.
func ReadAll[S, R any](ctx context.Context, log *slog.Logger, what, items string, sources []S, fields func(*S) Fields,
	read func(context.Context, S) (R, error)) (results map[string]R, failed map[string]string, err error) {
	results, failed = map[string]R{}, map[string]string{}
	for i := range sources {
		f := fields(&sources[i])
		log.Info("reading "+what+" source", "source", *f.Name, "kind", *f.Kind, "path", *f.Path)
		res, err := read(ctx, sources[i])
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			failed[*f.Name] = err.Error()
			log.Warn(what+" source failed; its indexed "+items+" are kept", "source", *f.Name, "err", err)
			continue
		}
		results[*f.Name] = res
	}
	return results, failed, nil
}
