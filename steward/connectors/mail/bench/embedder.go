package bench

import (
	"context"
	"hash/fnv"
	"math/rand"
	"sync"

	hybrid "github.com/agentstack/agentstack/search"
)

// TopicEmbedder is a deterministic stand-in for an embedding model: a text's
// vector is the sum of its topic words' centroids plus small vectors for its
// other words, so texts about the same topic cluster as real embeddings do.
// It lets the benchmark build 1,024-dimension vectors for 78,000 messages
// without a model.
type TopicEmbedder struct {
	Dim int
	mu  sync.Mutex
	vec map[string][]float32
}

func (e *TopicEmbedder) word(w string, scale float64) []float32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.vec == nil {
		e.vec = map[string][]float32{}
	}
	if v, ok := e.vec[w]; ok {
		return v
	}
	h := fnv.New64a()
	h.Write([]byte(w))
	rng := rand.New(rand.NewSource(int64(h.Sum64())))
	v := make([]float32, e.Dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	e.vec[w] = v
	return v
}

var topicSet = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range topics {
		m[t] = true
	}
	return m
}()

// Embed implements mail.Embedder.
func (e *TopicEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.Dim)
		seen := map[string]bool{}
		others := 0
		for _, w := range hybrid.Terms(t) {
			if seen[w] {
				continue
			}
			seen[w] = true
			var wv []float32
			switch {
			case topicSet[w]:
				wv = e.word("topic:"+w, 1)
			case others < 48:
				others++
				wv = e.word(w, 0.35)
			default:
				continue
			}
			for j, x := range wv {
				v[j] += x
			}
		}
		v[0] += 1e-3
		out[i] = v
	}
	return out, nil
}

// fixedEmbedder returns one precomputed vector, for hybrid cases that
// exclude model latency.
type fixedEmbedder []float32

func (f fixedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = f
	}
	return out, nil
}
