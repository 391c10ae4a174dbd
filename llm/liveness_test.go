package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// scriptedGateway answers a stream with before — liveness events, comments
// or nothing, every 100 ms — for `for` (forever when 0), then, unless it is
// forever, two content events and [DONE]. It records the liveness header
// it was sent.
type scriptedGateway struct {
	before string // "liveness", "comments" or "nothing"
	span   time.Duration
	mu     sync.Mutex
	header []string
}

func (g *scriptedGateway) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.header = append(g.header, r.Header.Get(llm.HeaderStreamLiveness))
		g.mu.Unlock()
		io.Copy(io.Discard, r.Body) // so that the client's going away cancels r.Context()
		if g.before != "nothing" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var end <-chan time.Time
		if g.span > 0 {
			end = time.After(g.span)
		}
	wait:
		for {
			select {
			case <-r.Context().Done():
				return
			case <-end:
				break wait
			case <-tick.C:
				switch g.before {
				case "liveness":
					fmt.Fprint(w, "event: "+llm.LivenessEvent+"\ndata: "+llm.LivenessData+"\n\n")
				case "comments":
					fmt.Fprint(w, ": still here\n\n")
				}
				if g.before != "nothing" {
					w.(http.Flusher).Flush()
				}
			}
		}
		for _, s := range []string{"Hel", "lo"} {
			fmt.Fprintf(w, `data: {"choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", s)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL + "/v1"
}

// TestGatewayLiveness: liveness events renew only the inactivity limit of a
// client that asked for them, and are never content; a hung gateway, or one
// that sends only comments, still times out with an error naming the
// gateway; a gateway that sends liveness forever meets the absolute limit.
func TestGatewayLiveness(t *testing.T) {
	const limit = time.Second
	tests := []struct {
		name     string
		before   string
		span     time.Duration
		liveness bool
		want     string // the answer; "" = the call fails with wantErr
		wantErr  error
		wantMsg  string
	}{
		{"liveness longer than the limit carries the call to its answer", "liveness", 3 * limit, true, "Hello", nil, ""},
		{"a hung gateway times out", "nothing", 0, true, "", llm.ErrStreamStalled, "neither data nor a liveness event from the gateway at"},
		{"comments are not liveness", "comments", 0, true, "", llm.ErrStreamStalled, "neither data nor a liveness event"},
		{"liveness forever meets the absolute limit", "liveness", 0, true, "", llm.ErrCallTimeLimit, "still answering"},
		{"a client that did not ask is not fooled", "liveness", 3 * limit, false, "", llm.ErrStreamStalled, "no data from the model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &scriptedGateway{before: tc.before, span: tc.span}
			c := llm.NewClient(llm.ClientOptions{BaseURL: g.start(t), StreamInactivity: limit, CallTimeLimit: 5 * limit, GatewayLiveness: tc.liveness})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var chunks []string
			resp, err := c.ChatStream(ctx, &llm.ChatRequest{Model: "m"}, func(ch llm.StreamChunk) error {
				if len(ch.Choices) == 0 {
					t.Errorf("onChunk got %+v", ch)
					return nil
				}
				chunks = append(chunks, ch.Choices[0].Delta.Content)
				return nil
			})
			if ctx.Err() != nil {
				t.Fatal("the call outlived its test deadline")
			}
			if tc.want != "" {
				if err != nil || resp.Choices[0].Message.Content != tc.want || strings.Join(chunks, "|") != "Hel|lo" {
					t.Fatalf("err %v, response %+v, chunks %q", err, resp, chunks)
				}
			} else if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.wantErr, tc.wantMsg)
			}
			want := ""
			if tc.liveness {
				want = "1000"
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.header) != 1 || g.header[0] != want {
				t.Errorf("%s sent = %q, want %q", llm.HeaderStreamLiveness, g.header, want)
			}
		})
	}
}

// TestLivenessHeaderOnlyOnStreams: a non-streamed call never asks for
// liveness events, which only a stream can carry.
func TestLivenessHeaderOnlyOnStreams(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get(llm.HeaderStreamLiveness))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}`)
	}))
	defer srv.Close()
	c := llm.NewClient(llm.ClientOptions{BaseURL: srv.URL + "/v1", GatewayLiveness: true})
	resp, err := c.Chat(context.Background(), &llm.ChatRequest{Model: "m"})
	if err != nil || resp.Choices[0].Message.Content != "ok" || len(got) != 1 || got[0] != "" {
		t.Fatalf("err %v, resp %+v, header %q", err, resp, got)
	}
}
