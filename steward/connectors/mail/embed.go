package mail

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search"

	"github.com/agentstack/agentstack/llm"
)

// Embedder is the shared search.Embedder.
type Embedder = search.Embedder

// DefaultEmbedModel is the gateway's public embedding model.
const DefaultEmbedModel = "local-embed"

// embedTimeout bounds one embedding request, including reading the answer.
const embedTimeout = 2 * time.Minute

// embedBaseURL turns a configured endpoint into the API base the shared
// client expects: a full …/v1/embeddings URL loses its /embeddings.
func embedBaseURL(endpoint string) string {
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	return strings.TrimSuffix(endpoint, "/embeddings")
}

// endpointEmbedder names the endpoint in errors, so a failed sync or search
// says which server failed. Vectors the server left out come back nil.
type endpointEmbedder struct {
	*llm.Embedder
}

// Embed implements Embedder.
func (e endpointEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.Embedder.Embed(ctx, texts)
	if err == nil {
		return vecs, nil
	}
	var ae *llm.APIError
	if errors.As(err, &ae) {
		msg := ae.Message
		if r := []rune(msg); len(r) > 300 {
			msg = string(r[:300]) + "…"
		}
		return nil, fmt.Errorf("embed via %s: HTTP %d: %s", e.Client.BaseURL(), ae.Status, msg)
	}
	return nil, fmt.Errorf("embed via %s: %w", e.Client.BaseURL(), err)
}

// ValidVector reports whether v is usable: non-empty, finite, not all zero.
func ValidVector(v []float32) bool {
	if len(v) == 0 {
		return false
	}
	nonzero := false
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
		if x != 0 {
			nonzero = true
		}
	}
	return nonzero
}

// Normalize returns v scaled to unit length.
func Normalize(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	inv := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// QuantizeInt8 encodes a vector for the in-memory search index: it is
// normalised to unit length, then stored as a little-endian float32 scale
// followed by one signed byte per dimension (x ≈ scale × q).
func QuantizeInt8(v []float32) []byte {
	u := Normalize(v)
	var maxAbs float32
	for _, x := range u {
		maxAbs = max(maxAbs, float32(math.Abs(float64(x))))
	}
	out := make([]byte, 4+len(u))
	scale := maxAbs / 127
	binary.LittleEndian.PutUint32(out, math.Float32bits(scale))
	if scale == 0 {
		return out
	}
	for i, x := range u {
		q := math.Round(float64(x / scale))
		out[4+i] = byte(int8(max(-127, min(127, q))))
	}
	return out
}

// DecodeInt8 splits a QuantizeInt8 blob into its scale and codes.
func DecodeInt8(b []byte) (scale float32, q []int8, err error) {
	if len(b) < 5 {
		return 0, nil, fmt.Errorf("quantised vector of %d bytes is too short", len(b))
	}
	scale = math.Float32frombits(binary.LittleEndian.Uint32(b))
	q = make([]int8, len(b)-4)
	for i, c := range b[4:] {
		q[i] = int8(c)
	}
	return scale, q, nil
}
