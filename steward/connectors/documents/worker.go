package documents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"
)

// workerRequest is what the parent sends to an extraction worker on stdin.
type workerRequest struct {
	Path   string `json:"path"`
	Format Format `json:"format"`
	Limits Limits `json:"limits"`
}

// workerResponse is the worker's single JSON answer on stdout.
type workerResponse struct {
	Doc     *Extracted `json:"doc,omitempty"`
	Code    string     `json:"code,omitempty"`
	Message string     `json:"message,omitempty"`
}

// DefaultWorkerHeapBytes is the worker's soft Go heap target, the
// counterpart of the reference's 256 MiB parser heap.
const DefaultWorkerHeapBytes = 256 << 20

// ServeWorker runs one extraction for a parent process: it reads a request
// from in, extracts, and writes the result to out. The parent enforces the
// deadline by killing the process, which stops any parser wherever it is.
func ServeWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	debug.SetMemoryLimit(DefaultWorkerHeapBytes)
	var req workerRequest
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		return fmt.Errorf("read extraction request: %w", err)
	}
	if req.Limits.WorkerHeapBytes > 0 {
		debug.SetMemoryLimit(req.Limits.WorkerHeapBytes)
	}
	var resp workerResponse
	doc, err := extractFile(ctx, req.Path, req.Format, req.Limits)
	switch {
	case err == nil:
		resp.Doc = doc
	default:
		var de *Error
		if errors.As(err, &de) {
			resp.Code, resp.Message = de.Code, de.Message
		} else {
			resp.Code, resp.Message = CodeExtractionFailure, err.Error()
		}
	}
	return json.NewEncoder(out).Encode(&resp)
}

// processExtract runs one extraction in a child process started from argv
// (for Steward: `steward documents extract --worker`). When ctx ends the
// child is killed.
func processExtract(ctx context.Context, argv []string, req workerRequest) (*Extracted, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	var stdout bytes.Buffer
	stderr := &limitedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var resp workerResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		if runErr != nil {
			return nil, fmt.Errorf("extraction worker failed: %v: %s", runErr, strings.TrimSpace(stderr.String()))
		}
		return nil, fmt.Errorf("extraction worker sent an unreadable answer: %w", err)
	}
	if resp.Code != "" {
		return nil, &Error{Code: resp.Code, Message: resp.Message}
	}
	if resp.Doc == nil {
		return nil, errors.New("extraction worker sent no document")
	}
	return resp.Doc, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
