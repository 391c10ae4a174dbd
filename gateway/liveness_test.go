package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// stallingProvider is a provider that answers a stream's headers and an SSE
// comment, then sends nothing until the request is cancelled: a stall after
// the stream began, before any data.
func stallingProvider(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, ": processing\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/v1"
}

// TestStreamLivenessCarriesClientThroughFailover: a client over HTTP whose
// inactivity limit is shorter than the gateway's — so its timer would run
// out before the gateway moves off a stalled candidate — gets the second
// candidate's answer when it asks for liveness events, and gives up first
// when it does not. The ledger shows the stalled attempt either way.
func TestStreamLivenessCarriesClientThroughFailover(t *testing.T) {
	const (
		clientLimit  = 2 * time.Second
		gatewayLimit = 4 * time.Second
	)
	tests := []struct {
		name      string
		stallHow  string // "before headers" or "after headers"
		liveness  bool
		second    llmtest.Reply
		want      string // the answer; "" = the call fails
		wantErr   error
		wantAPI   *llm.APIError // the failure's status and code, when it is an APIError
		wantSaw   string        // what the second candidate is shown to have done in the ledger
		wantLive  bool          // the client received liveness events (the response was committed early)
		wantFirst gateway.Outcome
	}{
		{name: "stall before the first byte fails over", stallHow: "before headers", liveness: true,
			second: llmtest.Reply{Content: "from second", Chunks: 3}, want: "from second", wantSaw: "ok", wantLive: true},
		{name: "stall after the headers fails over", stallHow: "after headers", liveness: true,
			second: llmtest.Reply{Content: "from second", Chunks: 3}, want: "from second", wantSaw: "ok", wantLive: true},
		{name: "a refusal after liveness keeps its status in band", stallHow: "before headers", liveness: true,
			second:  llmtest.Reply{Status: http.StatusBadRequest, ErrorMessage: "prompt too long", ErrorCode: "context_length_exceeded", ErrorType: "invalid_request_error"},
			wantAPI: &llm.APIError{Status: http.StatusBadRequest, Code: "context_length_exceeded", Type: "invalid_request_error"}, wantSaw: "rejected", wantLive: true},
		{name: "every candidate stalling ends in band with 502", stallHow: "before headers", liveness: true,
			second:  llmtest.Reply{Content: "never either", Delay: time.Hour},
			wantAPI: &llm.APIError{Status: http.StatusBadGateway, Code: "upstream_failed", Type: "upstream_error"}, wantSaw: "failed", wantLive: true},
		{name: "without liveness the client gives up before the failover", stallHow: "before headers", liveness: false,
			second: llmtest.Reply{Content: "from second"}, wantErr: llm.ErrStreamStalled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			yaml := twoCandidates
			if tc.stallHow == "after headers" {
				yaml = strings.Replace(yaml, "a: { base_url: UPSTREAM }", "a: { base_url: "+stallingProvider(t)+" }", 1)
			}
			f := newFixture(t, yaml, gateway.Options{StreamInactivity: gatewayLimit})
			f.upstream.Enqueue("first", llmtest.Reply{Content: "never", Delay: time.Hour})
			f.upstream.Enqueue("second", tc.second)
			var live atomic.Int32
			client := llm.NewClient(llm.ClientOptions{BaseURL: f.url + "/v1", StreamInactivity: clientLimit, GatewayLiveness: tc.liveness,
				HTTPClient: &http.Client{Transport: livenessCounter{&live}}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var chunks int
			resp, err := client.ChatStream(ctx, &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}},
				func(c llm.StreamChunk) error {
					if len(c.Choices) == 0 && c.Usage == nil {
						t.Errorf("onChunk got an empty chunk %+v (a liveness event?)", c)
					}
					chunks++
					return nil
				})
			if ctx.Err() != nil {
				t.Fatal("the call outlived its test deadline")
			}
			switch {
			case tc.want != "":
				if err != nil || resp.Choices[0].Message.Content != tc.want {
					t.Fatalf("err %v, response %+v", err, resp)
				}
			case tc.wantAPI != nil:
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != tc.wantAPI.Status || ae.Code != tc.wantAPI.Code || ae.Type != tc.wantAPI.Type ||
					!strings.Contains(ae.Message, map[string]string{"rejected": "prompt too long", "failed": "every provider for tier-5 failed"}[tc.wantSaw]) {
					t.Fatalf("err = %#v, want status %d code %s type %s", err, tc.wantAPI.Status, tc.wantAPI.Code, tc.wantAPI.Type)
				}
			default:
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "no data from the model") {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			}
			if got := live.Load() > 0; got != tc.wantLive {
				t.Errorf("liveness events seen = %d, want some: %v", live.Load(), tc.wantLive)
			}

			rec := f.ledger.waitRequests(t, 1)[0]
			atts := f.ledger.attemptsOf(rec.ID)
			if tc.wantSaw == "" {
				// The client went away before the gateway could fail over.
				if rec.Outcome != gateway.OutcomeCancelled || len(atts) != 1 || strings.Join(upstreamModels(f.upstream), " ") != "first" {
					t.Errorf("request = %+v, attempts %+v, upstream saw %v: want the call cancelled on first", rec, atts, upstreamModels(f.upstream))
				}
				return
			}
			if len(atts) == 0 || atts[0].UpstreamModel != "first" || atts[0].Outcome != gateway.OutcomeRetryable ||
				!strings.Contains(atts[0].Error, "stalled") {
				t.Fatalf("first attempt = %+v, want a stalled retryable attempt on first", atts)
			}
			if len(atts) != 2 || atts[1].UpstreamModel != "second" || rec.Attempts != 2 {
				t.Fatalf("attempts = %+v (request %+v), want first then second", atts, rec)
			}
			if tc.wantSaw == "ok" && (rec.Outcome != gateway.OutcomeOK || rec.Provider != "b" || atts[1].Outcome != gateway.OutcomeOK) {
				t.Errorf("request = %+v, attempts %+v", rec, atts)
			}
			if tc.wantSaw == "rejected" && (rec.Outcome != gateway.OutcomeRejected || rec.Status != http.StatusBadRequest) {
				t.Errorf("request = %+v", rec)
			}
			if tc.wantSaw == "failed" && (rec.Outcome != gateway.OutcomeFailed || rec.Status != http.StatusBadGateway ||
				atts[1].Outcome != gateway.OutcomeRetryable || !strings.Contains(atts[1].Error, "stalled")) {
				t.Errorf("request = %+v, attempts %+v", rec, atts)
			}
		})
	}
}

// livenessCounter counts the liveness events of the responses it carries.
type livenessCounter struct{ n *atomic.Int32 }

func (c livenessCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	body := resp.Body
	go func() {
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if sc.Text() == "event: "+llm.LivenessEvent {
				c.n.Add(1)
			}
			if _, err := fmt.Fprintln(pw, sc.Text()); err != nil {
				break
			}
		}
		body.Close()
		pw.CloseWithError(sc.Err())
	}()
	resp.Body = pr
	return resp, nil
}

// TestFastAnswersKeepTheirHTTPStatus: liveness only starts after a quarter
// of the client's limit of silence, so a refusal that comes at once is still
// an HTTP error, and a malformed liveness header is refused.
func TestFastAnswersKeepTheirHTTPStatus(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("first", llmtest.Reply{Status: http.StatusBadRequest, ErrorMessage: "bad tools", ErrorCode: "invalid_tools"})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), map[string]string{llm.HeaderStreamLiveness: "3600000"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "bad tools") || strings.Contains(string(body), "liveness") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	for _, v := range []string{"soon", "0", "-5", "3600001", "1.5"} {
		resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), map[string]string{llm.HeaderStreamLiveness: v})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), llm.HeaderStreamLiveness) {
			t.Errorf("%s: %q: status %d body %s", llm.HeaderStreamLiveness, v, resp.StatusCode, body)
		}
	}
	if n := len(f.upstream.Requests()); n != 1 {
		t.Errorf("upstream saw %d requests, want only the first (malformed headers are not forwarded)", n)
	}
}
