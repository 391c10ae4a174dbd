package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// fakeEmbedder returns deterministic vectors; texts containing "poison" fail
// inside a batch and alone, texts containing "flaky" fail only inside a batch,
// and down makes every call fail.
type fakeEmbedder struct {
	mu    sync.Mutex
	dim   int
	down  bool
	calls []int // batch sizes
	whole bool  // reject any batch that contains a poison text
}

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, len(texts))
	if f.down {
		return nil, errors.New("connection refused")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if strings.Contains(t, "poison") {
			if f.whole || len(texts) == 1 {
				return nil, errors.New("bad input")
			}
			continue
		}
		if strings.Contains(t, "flaky") && len(texts) > 1 {
			out[i] = []float32{1, 2} // wrong dimension inside a batch
			continue
		}
		v := make([]float32, f.dim)
		h := fnv.New64a()
		h.Write([]byte(t))
		seed := h.Sum64()
		for j := range v {
			seed = seed*6364136223846793005 + 1442695040888963407
			v[j] = float32(int64(seed>>33)%1000) / 1000
		}
		out[i] = v
	}
	return out, nil
}

func embedFixture(t *testing.T, n int, extra ...archive.Message) *Store {
	t.Helper()
	acct, md := maildirAccount(t, "e", false)
	for i := 0; i < n; i++ {
		mustAdd(t, md, "INBOX", archive.Message{ID: fmt.Sprintf("e%d@x", i), From: "a@a", Subject: fmt.Sprintf("subject %d", i),
			Body: strings.Repeat("word ", 1000), Date: day0.Add(time.Duration(i) * time.Minute)}, "S")
	}
	for _, m := range extra {
		mustAdd(t, md, "INBOX", m, "S")
	}
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	return s
}

func TestEmbedLifecycle(t *testing.T) {
	ctx := context.Background()
	s := embedFixture(t, 70,
		archive.Message{ID: "poison@x", From: "a@a", Subject: "poison pill", Date: day0},
		archive.Message{ID: "flaky@x", From: "a@a", Subject: "flaky one", Date: day0})
	f := &fakeEmbedder{dim: 8}
	st, err := s.Embed(ctx, EmbedOptions{Embedder: f, Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	// 72 messages: the poison one fails in its batch and alone; the flaky one
	// succeeds when retried alone.
	if st.Embedded != 71 || st.Failed != 1 || st.Pending != 1 || st.Dimension != 8 {
		t.Errorf("first run %+v", st)
	}
	if f.calls[0] != 32 {
		t.Errorf("first request carried %d texts, want 32", f.calls[0])
	}
	if c := count(t, s, "SELECT count(*) FROM message_vec"); c != 71 {
		t.Errorf("vec0 rows %d", c)
	}
	var model string
	var dim int
	s.db.QueryRow("SELECT model, dim FROM embed_state LIMIT 1").Scan(&model, &dim)
	if model != "local-embed" || dim != 8 {
		t.Errorf("state model %q dim %d", model, dim)
	}
	// The source is capped at 2,000 characters.
	if n := len([]rune(EmbedSource("subject 0", strings.Repeat("word ", 1000), 2000))); n != 2000 {
		t.Errorf("EmbedSource kept %d characters", n)
	}

	// Nothing changed: the hashes match and only the poison item is sent
	// again. As the spec says, a batch whose every item fails alone counts
	// as the endpoint being unavailable.
	f.calls = nil
	st, err = s.Embed(ctx, EmbedOptions{Embedder: f})
	if !errors.Is(err, ErrEmbedUnavailable) || st.Embedded != 0 || st.Pending != 1 || fmt.Sprint(f.calls) != "[1 1]" {
		t.Errorf("second run %+v %v, calls %v", st, err, f.calls)
	}

	// A changed source text invalidates the hash.
	if _, err := s.db.Exec("UPDATE messages SET subject = 'changed', embed_hash = ? WHERE message_id = 'e5@x'",
		SourceHash(EmbedSource("changed", strings.TrimSpace(strings.Repeat("word ", 1000)), 2000))); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.PendingEmbeds(ctx); p != 2 {
		t.Errorf("pending after change %d", p)
	}
	st, _ = s.Embed(ctx, EmbedOptions{Embedder: f})
	if st.Embedded != 1 {
		t.Errorf("re-embed %+v", st)
	}

	// A batch rejected whole: every item is retried alone.
	s2 := embedFixture(t, 5, archive.Message{ID: "poison@x", From: "a@a", Subject: "poison", Date: day0})
	f2 := &fakeEmbedder{dim: 4, whole: true}
	st, err = s2.Embed(ctx, EmbedOptions{Embedder: f2})
	if err != nil || st.Embedded != 5 || st.Failed != 1 {
		t.Errorf("whole-batch failure %+v %v", st, err)
	}
	if len(f2.calls) != 7 || f2.calls[0] != 6 {
		t.Errorf("calls %v, want one batch of 6 then 6 single retries", f2.calls)
	}

	// Endpoint down: the run stops with ErrEmbedUnavailable and keeps everything pending.
	s3 := embedFixture(t, 3)
	st, err = s3.Embed(ctx, EmbedOptions{Embedder: &fakeEmbedder{dim: 4, down: true}})
	if !errors.Is(err, ErrEmbedUnavailable) || !st.Unavailable || st.Pending != 3 {
		t.Errorf("down: %+v %v", st, err)
	}

	// A new dimension resets the vector state instead of mixing spaces.
	f.dim = 16
	s.db.Exec("UPDATE messages SET embed_hash = 'x' WHERE message_id = 'e1@x'")
	st, err = s.Embed(ctx, EmbedOptions{Embedder: f, Limit: 1})
	if err != nil || !st.Reset || st.Dimension != 16 {
		t.Fatalf("reset %+v %v", st, err)
	}
	if c := count(t, s, "SELECT count(*) FROM embed_state WHERE dim != 16"); c != 0 {
		t.Errorf("%d vectors of the old dimension kept", c)
	}
	if c := count(t, s, "SELECT count(*) FROM embed_state"); c != 1 {
		t.Errorf("embed_state rows %d after reset", c)
	}
}

func TestEmbedLoopPacing(t *testing.T) {
	s := embedFixture(t, 10)
	f := &fakeEmbedder{dim: 4, down: true}
	var waits []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.EmbedLoop(ctx, EmbedLoopOptions{
		EmbedOptions: EmbedOptions{Embedder: f, Batch: 4, Limit: 4},
		Busy:         time.Second, Idle: time.Hour, Backoff: time.Minute, MaxBackoff: 3 * time.Minute,
		Sleep: func(ctx context.Context, d time.Duration) bool {
			waits = append(waits, d)
			switch len(waits) {
			case 3:
				f.mu.Lock()
				f.down = false // the endpoint comes back
				f.mu.Unlock()
			case 7:
				cancel()
				return false
			}
			return true
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("loop ended with %v", err)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, time.Second, time.Second, time.Hour, time.Hour}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}
