// Package vecindextest provides deterministic stand-ins for the local-embed
// model, for tests of indexes built on vecindex.
package vecindextest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/agentstack/agentstack/search"
)

// Topics embeds a text as word counts per topic: dimension d counts the
// words of Topics[d] in the text, and a last dimension holds a small
// constant so that no vector is zero. Texts about one topic therefore land
// near each other without sharing a word ("bookkeeping" near "accountant").
type Topics struct {
	Topics [][]string
	// Calls counts Embed calls.
	Calls atomic.Int64
	// Fail makes every call fail, as an offline gateway does.
	Fail atomic.Bool
}

// Embed implements vecindex.Embedder.
func (e *Topics) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.Calls.Add(1)
	if e.Fail.Load() {
		return nil, errors.New("gateway offline (simulated)")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(e.Topics)+1)
		v[len(e.Topics)] = 0.05
		for _, w := range search.Terms(t) {
			for d, words := range e.Topics {
				if slices.Contains(words, w) {
					v[d]++
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

// Scripted returns one-hot vectors of Dim dimensions (text i of a request
// gets dimension i mod Dim). A request that contains a text with Reject in
// it fails as a whole, as an endpoint refusing one input does; with Down
// every request fails.
type Scripted struct {
	Dim    int
	Reject string
	Down   bool
}

// Embed implements vecindex.Embedder.
func (s *Scripted) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if s.Down {
		return nil, errors.New("connection refused (simulated)")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if s.Reject != "" && strings.Contains(t, s.Reject) {
			return nil, errors.New("input rejected (simulated)")
		}
		out[i] = make([]float32, s.Dim)
		out[i][i%s.Dim] = 1
	}
	return out, nil
}
