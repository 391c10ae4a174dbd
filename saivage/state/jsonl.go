package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Envelope is one physical JSONL line: a versioned, non-empty ordered batch
// of rows appended together.
type Envelope struct {
	V    int               `json:"v"`
	Rows []json.RawMessage `json:"rows"`
}

// MaxLineBytes bounds one envelope line.
const MaxLineBytes = 4 << 20

// Append writes env as one newline-terminated line. A missing file is
// created only when create is set (the owner's first publication). Write,
// fsync and close failures make the outcome unknown.
func (p *Publisher) Append(path string, env Envelope, create bool) error {
	_, err := p.AppendSpan(path, env, create)
	return err
}

// Span is the byte range [Start, End) one appended line occupies.
type Span struct{ Start, End int64 }

// AppendSpan is Append that also reports where the line landed. A caller
// that remembers a file's content by its size can tell from Start whether
// anyone else appended since it last looked, and from End the size that
// holds exactly what it knows.
func (p *Publisher) AppendSpan(path string, env Envelope, create bool) (Span, error) {
	if err := p.check(); err != nil {
		return Span{}, err
	}
	if env.V < 1 || len(env.Rows) == 0 {
		return Span{}, fmt.Errorf("append %s: envelope needs a version and at least one row", path)
	}
	line, err := json.Marshal(env)
	if err != nil {
		return Span{}, fmt.Errorf("append %s: %w", path, err)
	}
	if len(line) > MaxLineBytes {
		return Span{}, fmt.Errorf("append %s: envelope is %d bytes, over the %d-byte limit", path, len(line), MaxLineBytes)
	}
	line = append(line, '\n')
	flags := os.O_WRONLY | os.O_APPEND
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o666)
	if err != nil {
		return Span{}, fmt.Errorf("append %s: %w", path, err)
	}
	if err := p.fault(StepAppendWrite, path); err != nil {
		f.Close()
		return Span{}, p.unknown(StepAppendWrite, path, err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return Span{}, p.unknown(StepAppendWrite, path, err)
	}
	// With O_APPEND the write lands at the end of the file as it was at
	// that instant and leaves the offset right after the line.
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		f.Close()
		return Span{}, p.unknown(StepAppendWrite, path, err)
	}
	span := Span{Start: end - int64(len(line)), End: end}
	p.after(StepAppendWrite, path)
	if err := p.fault(StepAppendFsync, path); err != nil {
		f.Close()
		return Span{}, p.unknown(StepAppendFsync, path, err)
	}
	if !p.opts.SkipSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return Span{}, p.unknown(StepAppendFsync, path, err)
		}
	}
	if err := p.fault(StepAppendClose, path); err != nil {
		f.Close()
		return Span{}, p.unknown(StepAppendClose, path, err)
	}
	if err := f.Close(); err != nil {
		return Span{}, p.unknown(StepAppendClose, path, err)
	}
	if create {
		// A created file's directory entry must be durable too.
		if err := p.syncDir(filepath.Dir(path)); err != nil {
			return Span{}, err
		}
	}
	return span, nil
}

// StreamError locates a problem in a JSONL stream.
type StreamError struct {
	Path string
	Line int
	Msg  string
}

func (e *StreamError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// ReadOptions configures ReadJSONL.
type ReadOptions struct {
	// Versions lists the accepted envelope versions.
	Versions []int
	// Validate checks one decoded envelope (1-based line number).
	Validate func(line int, env Envelope) error
	// Tail says what to do with an incomplete final line.
	Tail TailPolicy
}

// TailPolicy selects the handling of an incomplete final line.
type TailPolicy int

// Tail policies.
const (
	// TailFail refuses a torn tail (immutable segments).
	TailFail TailPolicy = iota
	// TailTruncate lets the owner of a growing current stream cut the torn
	// tail after validating the whole retained prefix.
	TailTruncate
	// TailIgnore lets a read-only observer (no lock) skip a torn tail that
	// a live writer may still be completing, without writing.
	TailIgnore
)

// ReadResult is a validated stream.
type ReadResult struct {
	Envelopes []Envelope
	// Truncated is the number of torn tail bytes removed (TailTruncate) or
	// skipped (TailIgnore).
	Truncated int
}

// ReadJSONL reads and validates a whole stream. A complete malformed line is
// an error and is never truncated. An incomplete final line (no newline) is
// handled by opts.Tail; with TailTruncate and a non-empty valid prefix the
// file is truncated to that prefix and fsynced, and the validated prefix is
// returned without a reread. An empty file fails.
func (p *Publisher) ReadJSONL(path string, opts ReadOptions) (ReadResult, error) {
	if err := p.check(); err != nil {
		return ReadResult{}, err
	}
	// An observer (TailIgnore) reads beside a live writer: what was appended
	// after the open is the next read's, and a line cut at that point is a
	// torn tail like any other.
	data, err := readFile(path, opts.Tail == TailIgnore)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ReadResult{}, err
		}
		return ReadResult{}, fmt.Errorf("read stream: %w", err)
	}
	if len(data) == 0 {
		return ReadResult{}, &StreamError{Path: path, Msg: "empty stream (no complete envelope)"}
	}
	complete := bytes.LastIndexByte(data, '\n') + 1
	var res ReadResult
	lineNo := 0
	for rest := data[:complete]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		line := rest[:i]
		rest = rest[i+1:]
		lineNo++
		env, err := decodeEnvelope(line, opts)
		if err == nil && opts.Validate != nil {
			err = opts.Validate(lineNo, env)
		}
		if err != nil {
			return ReadResult{}, &StreamError{Path: path, Line: lineNo, Msg: "malformed complete line: " + err.Error()}
		}
		res.Envelopes = append(res.Envelopes, env)
	}
	if complete == len(data) {
		return res, nil
	}
	torn := len(data) - complete
	if opts.Tail == TailFail {
		return ReadResult{}, &StreamError{Path: path, Line: lineNo + 1, Msg: fmt.Sprintf("torn tail of %d bytes in an immutable stream", torn)}
	}
	if complete == 0 {
		return ReadResult{}, &StreamError{Path: path, Line: 1, Msg: "torn tail with no valid prefix"}
	}
	res.Truncated = torn
	if opts.Tail == TailIgnore {
		return res, nil
	}
	if err := p.truncate(path, int64(complete)); err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

func (p *Publisher) truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("truncate torn tail of %s: %w", path, err)
	}
	if err := p.fault(StepTruncate, path); err != nil {
		f.Close()
		return p.unknown(StepTruncate, path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return p.unknown(StepTruncate, path, err)
	}
	if err := p.fault(StepTruncateSync, path); err != nil {
		f.Close()
		return p.unknown(StepTruncateSync, path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return p.unknown(StepTruncateSync, path, err)
	}
	if err := f.Close(); err != nil {
		return p.unknown(StepTruncateSync, path, err)
	}
	return nil
}

func decodeEnvelope(line []byte, opts ReadOptions) (Envelope, error) {
	if len(line) > MaxLineBytes {
		return Envelope{}, fmt.Errorf("line is %d bytes, over the %d-byte limit", len(line), MaxLineBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var env Envelope
	if err := dec.Decode(&env); err != nil {
		return Envelope{}, fmt.Errorf("invalid envelope: %v", err)
	}
	if dec.More() {
		return Envelope{}, errors.New("trailing data after envelope")
	}
	if len(opts.Versions) > 0 {
		ok := false
		for _, v := range opts.Versions {
			ok = ok || v == env.V
		}
		if !ok {
			return Envelope{}, fmt.Errorf("unsupported envelope version %d", env.V)
		}
	}
	if len(env.Rows) == 0 {
		return Envelope{}, errors.New("envelope has no rows")
	}
	return env, nil
}
