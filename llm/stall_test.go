package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// keepAliveServer sends one data event, then only SSE comments (a
// keep-alive) until the client goes away: a stream that looks alive but
// makes no progress.
func keepAliveServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				fmt.Fprint(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL + "/v1"
}

func TestChatStreamInactivity(t *testing.T) {
	const limit = 400 * time.Millisecond
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	for _, tc := range []struct {
		name    string
		reply   *llmtest.Reply // nil: keepAliveServer
		partial string
	}{
		{name: "stalls mid-stream", reply: &llmtest.Reply{Content: "Hello there", Chunks: 2, Hold: hold}, partial: "Hello"},
		{name: "comments are not progress", partial: "Hel"},
		{name: "headers never come", reply: &llmtest.Reply{Content: "late", Delay: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var url string
			if tc.reply != nil {
				srv := llmtest.NewServer(t)
				srv.Enqueue("m", *tc.reply)
				url = srv.URL
			} else {
				url = keepAliveServer(t)
			}
			c := llm.NewClient(llm.ClientOptions{BaseURL: url, StreamInactivity: limit})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := c.ChatStream(ctx, &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			if !errors.Is(err, llm.ErrStreamStalled) {
				t.Fatalf("err = %v, want ErrStreamStalled", err)
			}
			if want := "model stream stalled: no data from the model for 400ms"; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
			if ctx.Err() != nil {
				t.Fatal("the caller's deadline ended the stream, not the inactivity limit")
			}
			var ae *llm.APIError
			if errors.As(err, &ae) {
				t.Errorf("a stall is an APIError %+v; retry policies would not treat it as transient", ae)
			}
			got := ""
			if resp != nil && len(resp.Choices) > 0 {
				got = resp.Choices[0].Message.Content
			}
			if got != tc.partial {
				t.Errorf("partial content %q, want %q", got, tc.partial)
			}
		})
	}
}

func TestChatStreamDataRenewsInactivity(t *testing.T) {
	srv := llmtest.NewServer(t)
	// Eight chunks 250 ms apart take 2 s, longer than the 1.5 s limit: only
	// the renewal by each data event lets the stream finish.
	srv.Enqueue("m", llmtest.Reply{Content: strings.Repeat("word ", 8), Chunks: 8, ChunkDelay: 250 * time.Millisecond})
	c := llm.NewClient(llm.ClientOptions{BaseURL: srv.URL, StreamInactivity: 1500 * time.Millisecond})
	resp, err := c.ChatStream(context.Background(), &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(llm.StreamChunk) error {
		// A slow consumer is not a stalled model.
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != strings.Repeat("word ", 8) {
		t.Fatalf("content %q", got)
	}
}

// A model that keeps sending data is still cut off at the absolute limit,
// streamed or not; the caller's own time in onChunk does not count.
func TestCallTimeLimit(t *testing.T) {
	const limit = time.Second
	for _, tc := range []struct {
		name    string
		reply   llmtest.Reply
		stream  bool
		consume time.Duration // time onChunk takes per chunk
		wantErr bool
	}{
		// 40 chunks 100 ms apart: data never pauses long enough to stall.
		{name: "steady stream past the limit", reply: llmtest.Reply{Content: strings.Repeat("w ", 40), Chunks: 40, ChunkDelay: 100 * time.Millisecond}, stream: true, wantErr: true},
		{name: "non-streamed answer past the limit", reply: llmtest.Reply{Content: "late", Delay: time.Minute}, wantErr: true},
		// 4 chunks take about 0.2 s of model time but 2.4 s of the caller's.
		{name: "slow consumer within the limit", reply: llmtest.Reply{Content: "a b c d ", Chunks: 4, ChunkDelay: 50 * time.Millisecond}, stream: true, consume: 600 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Enqueue("m", tc.reply)
			c := llm.NewClient(llm.ClientOptions{BaseURL: srv.URL, CallTimeLimit: limit})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
			var resp *llm.ChatResponse
			var err error
			if tc.stream {
				resp, err = c.ChatStream(ctx, req, func(llm.StreamChunk) error { time.Sleep(tc.consume); return nil })
			} else {
				resp, err = c.Chat(ctx, req)
			}
			if !tc.wantErr {
				if err != nil || resp.Choices[0].Message.Content != tc.reply.Content {
					t.Fatalf("resp %+v, err %v; the caller's time counted against the limit", resp, err)
				}
				return
			}
			if !errors.Is(err, llm.ErrCallTimeLimit) || ctx.Err() != nil {
				t.Fatalf("err = %v, want ErrCallTimeLimit", err)
			}
			if want := "model call exceeded its time limit: the model was still answering after 1s"; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
			var ae *llm.APIError
			if errors.As(err, &ae) || errors.Is(err, llm.ErrStreamStalled) {
				t.Errorf("the time limit is reported as %v", err)
			}
			if tc.stream {
				got := resp.Choices[0].Message.Content
				if got == "" || got == tc.reply.Content {
					t.Errorf("partial content %q: want a non-empty prefix", got)
				}
			}
		})
	}
}
