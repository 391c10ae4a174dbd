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
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			w.sendHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		<-done
		return nil, req.Context().Err()
	}
	resp := &http.Response{
		Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &joinBody{pr: pr, done: done}, ContentLength: -1, Request: req,
	}
	return resp, nil
}

type pipeWriter struct {
	mu     sync.Mutex
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
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

// Flush is a no-op: the pipe delivers each write as it happens.
func (w *pipeWriter) Flush() {}

// joinBody closes the reading side and then waits for the handler.
type joinBody struct {
	pr   *io.PipeReader
	done chan struct{}
}

func (b *joinBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *joinBody) Close() error {
	b.pr.Close()
	<-b.done
	return nil
}
