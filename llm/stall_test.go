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
