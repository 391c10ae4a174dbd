package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// PrevName returns the previous-selector file name of a head file name
// ("head.json" → "head.prev.json").
func PrevName(name string) string {
	ext := filepath.Ext(name)
	return name[:len(name)-len(ext)] + ".prev" + ext
}

// PublishHead publishes a selector file dir/name. With initial set (the
// owner established that no head exists yet) it clears prev and replaces
// current. Otherwise it unlinks the exact prev (ENOENT only is tolerated),
// hard-links the established current to prev, fsyncs the directory and then
// replaces current. prev is a convenience for repair, not a transaction.
func (p *Publisher) PublishHead(dir, name string, data []byte, initial bool) error {
	if err := p.check(); err != nil {
		return err
	}
	cur := filepath.Join(dir, name)
	prev := filepath.Join(dir, PrevName(name))
	if err := p.fault(StepUnlink, prev); err != nil {
		return fmt.Errorf("publish head %s: unlink prev: %w", cur, err)
	}
	if err := os.Remove(prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("publish head %s: unlink prev: %w", cur, err)
	}
	if !initial {
		if err := p.fault(StepLink, prev); err != nil {
			return fmt.Errorf("publish head %s: link prev: %w", cur, err)
		}
		if err := os.Link(cur, prev); err != nil {
			return fmt.Errorf("publish head %s: link prev: %w", cur, err)
		}
	}
	if err := p.syncDir(dir); err != nil {
		return err
	}
	return p.Replace(cur, data)
}

// MaxDocumentBytes bounds any JSON document read by Saivage's owners.
const MaxDocumentBytes = 16 << 20

// ReadFile reads a whole document, refusing anything that is not a regular
// file or is larger than MaxDocumentBytes.
func ReadFile(path string) ([]byte, error) {
	return readFile(path, false)
}

// readFile reads path whole; with prefix, a file that grows while it is read
// (a stream a live writer appends to) yields the bytes it had when opened,
// instead of an error.
func readFile(path string, prefix bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	if st.Size() > MaxDocumentBytes {
		return nil, fmt.Errorf("read %s: %d bytes exceeds the %d-byte limit", path, st.Size(), MaxDocumentBytes)
	}
	buf := make([]byte, st.Size()+1)
	n, err := io.ReadFull(f, buf)
	if err == nil {
		if prefix {
			return buf[:st.Size()], nil
		}
		return nil, fmt.Errorf("read %s: file grew while reading", path)
	}
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}
