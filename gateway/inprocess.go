package gateway

import (
	"io"
	"net/http"
	"strconv"
	"sync"
)

// InProcess returns an http.RoundTripper that serves requests with h — the
// gateway's Handler in the same process — without a network hop, streaming
// the response body as the handler writes it. Closing the body waits for the
// handler to return, so everything the handler records happens before the
// caller continues.
func InProcess(h http.Handler) http.RoundTripper { return handlerTransport{h: h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pipe := newStreamPipe()
	w := &pipeWriter{header: http.Header{}, pw: pipe, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			w.sendHeader(http.StatusOK)
			pipe.closeWrite()
		}()
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pipe.closeRead(req.Context().Err())
		<-done
		return nil, req.Context().Err()
	}
	resp := &http.Response{
		Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &joinBody{pr: pipe, done: done}, ContentLength: -1, Request: req,
	}
	return resp, nil
}

type pipeWriter struct {
	mu     sync.Mutex
	header http.Header
	sent   http.Header
	status int
	pw     *streamPipe
	ready  chan struct{}
	once   sync.Once
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) sendHeader(status int) {
	w.once.Do(func() {
		w.mu.Lock()
		w.status = status
		w.sent = w.header.Clone()
		w.mu.Unlock()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(status int) { w.sendHeader(status) }

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.sendHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: the pipe hands each write to the reader as it happens.
func (w *pipeWriter) Flush() {}

// joinBody closes the reading side and then waits for the handler.
type joinBody struct {
	pr   *streamPipe
	done chan struct{}
}

func (b *joinBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *joinBody) Close() error {
	b.pr.closeRead(nil)
	<-b.done
	return nil
}

// streamPipe carries the handler's writes to the caller's reads. Unlike
// io.Pipe, a write does not wait for the reader to take it: it is buffered
// (up to maxPipeBuffer, beyond which writes wait), so every event of a
// stream costs one wake-up of the reader instead of a hand-off and a
// hand-back between the two goroutines.
type streamPipe struct {
	mu       sync.Mutex
	data     []byte
	off      int           // data[off:] is unread
	werr     error         // the writer closed: reads return it once data is drained
	rerr     error         // the reader closed: writes return it
	readable chan struct{} // 1-buffered: data arrived or a side closed
	writable chan struct{} // 1-buffered: the reader took data or a side closed
}

// maxPipeBuffer bounds what a handler may write ahead of its reader.
const maxPipeBuffer = 256 << 10

func newStreamPipe() *streamPipe {
	return &streamPipe{readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (p *streamPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	for p.rerr == nil && p.werr == nil && len(p.data)-p.off >= maxPipeBuffer {
		p.mu.Unlock()
		<-p.writable
		p.mu.Lock()
	}
	switch {
	case p.rerr != nil:
		err := p.rerr
		p.mu.Unlock()
		return 0, err
	case p.werr != nil:
		p.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	if p.off > 0 && p.off == len(p.data) {
		p.data, p.off = p.data[:0], 0
	}
	p.data = append(p.data, b...)
	p.mu.Unlock()
	wake(p.readable)
	return len(b), nil
}

func (p *streamPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	for p.off == len(p.data) && p.werr == nil && p.rerr == nil {
		p.mu.Unlock()
		<-p.readable
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	switch {
	case p.rerr != nil:
		return 0, io.ErrClosedPipe
	case p.off == len(p.data):
		return 0, p.werr
	}
	n := copy(b, p.data[p.off:])
	p.off += n
	wake(p.writable)
	return n, nil
}

// closeWrite ends the stream: reads return io.EOF once the data is drained.
func (p *streamPipe) closeWrite() {
	p.mu.Lock()
	if p.werr == nil {
		p.werr = io.EOF
	}
	p.mu.Unlock()
	wake(p.readable)
	wake(p.writable)
}

// closeRead abandons the stream: writes return err (io.ErrClosedPipe when
// nil) and reads io.ErrClosedPipe.
func (p *streamPipe) closeRead(err error) {
	if err == nil {
		err = io.ErrClosedPipe
	}
	p.mu.Lock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.mu.Unlock()
	wake(p.readable)
	wake(p.writable)
}
