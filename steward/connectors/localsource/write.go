package localsource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists reports that WriteFileAtomic with NoClobber found the file
// already there; nothing was written.
var ErrExists = errors.New("file already exists")

// WriteOptions tune WriteFileAtomic.
type WriteOptions struct {
	// Perm is the mode of a new file (default 0600).
	Perm fs.FileMode
	// NoClobber refuses to replace an existing file (ErrExists).
	NoClobber bool
}

// WriteFileAtomic publishes data at path so that a reader (vdirsyncer,
// another client, a crash) sees either the old file or the whole new one:
// it writes a hidden temporary file in the same folder, syncs it, renames
// (or, with NoClobber, hard-links) it into place and syncs the folder.
//
// An error before the file is in place means nothing changed; the caller
// can tell an error after it (the folder sync) by errors.As with
// *PublishedError, which means the new content is there but may not survive
// a power loss.
func WriteFileAtomic(path string, data []byte, o WriteOptions) error {
	if o.Perm == 0 {
		o.Perm = 0o600
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // after a rename this is a no-op; after a link it drops the extra name
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(o.Perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.NoClobber {
		if err := os.Link(name, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("write %s: %w", path, ErrExists)
			}
			return fmt.Errorf("write %s: %w", path, err)
		}
	} else if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return &PublishedError{Path: path, Err: err}
	}
	return nil
}

// RemoveFile deletes path and syncs its folder. As with WriteFileAtomic, a
// *PublishedError means the file is gone but the folder sync failed.
func RemoveFile(path string) error {
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return &PublishedError{Path: path, Err: err}
	}
	return nil
}

// PublishedError is a failure after a write or removal took effect.
type PublishedError struct {
	Path string
	Err  error
}

func (e *PublishedError) Error() string {
	return fmt.Sprintf("%s changed, but syncing its folder failed: %v", e.Path, e.Err)
}

func (e *PublishedError) Unwrap() error { return e.Err }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
