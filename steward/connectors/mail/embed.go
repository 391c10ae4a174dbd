package mail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Embedder turns texts into vectors. A nil vector at some index means that
// item failed while the others succeeded; an error means the whole call failed.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// DefaultEmbedModel is the gateway's public embedding model.
const DefaultEmbedModel = "local-embed"

// HTTPEmbedder calls an OpenAI-compatible /v1/embeddings endpoint, normally
// the gateway's local-embed model, attributing usage with the
// x-usage-service and x-usage-action headers.
type HTTPEmbedder struct {
	// Endpoint is the full embeddings URL (…/v1/embeddings).
	Endpoint string
	Model    string
	// APIKey is sent as a bearer token when set. It never appears in errors.
	APIKey string
	// Service and Action attribute usage, e.g. "mail-mirror" / "embed".
	Service, Action string
	Client          *http.Client
}

// EmbeddingsURL turns a configured endpoint into the embeddings URL: a base
// such as http://127.0.0.1:4000/v1 gets /embeddings appended.
func EmbeddingsURL(endpoint string) string {
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	if strings.HasSuffix(endpoint, "/embeddings") {
		return endpoint
	}
	return endpoint + "/embeddings"
}

type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embedResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Embed sends one request for all texts.
func (h *HTTPEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	model := h.Model
	if model == "" {
		model = DefaultEmbedModel
	}
	body, _ := json.Marshal(embedRequest{Model: model, Input: texts})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.APIKey)
	}
	if h.Service != "" {
		req.Header.Set("x-usage-service", h.Service)
	}
	if h.Action != "" {
		req.Header.Set("x-usage-action", h.Action)
	}
	client := h.Client
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	resp, err := client.Do(req)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // the *url.Error would repeat the endpoint
		}
		return nil, fmt.Errorf("embed via %s: %w", h.Endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("embed via %s: read response: %w", h.Endpoint, err)
	}
	var out embedResponse
	jerr := json.Unmarshal(data, &out)
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if jerr == nil && out.Error != nil {
			msg = out.Error.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return nil, fmt.Errorf("embed via %s: HTTP %d: %s", h.Endpoint, resp.StatusCode, msg)
	}
	if jerr != nil {
		return nil, fmt.Errorf("embed via %s: invalid response: %w", h.Endpoint, jerr)
	}
	vecs := make([][]float32, len(texts))
	for i, d := range out.Data {
		idx := d.Index
		if idx < 0 || idx >= len(texts) {
			idx = i
		}
		if idx >= 0 && idx < len(texts) {
			vecs[idx] = d.Embedding
		}
	}
	return vecs, nil
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
