package documents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/config"
)

// Embedder turns texts into vectors, one per text in order. A nil or
// wrong-length vector marks that text as failed.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Usage attribution sent with every document embedding request.
const (
	UsageService = "documents-mcp"
	UsageAction  = "search-embed"
)

// HTTPEmbedder calls an OpenAI-compatible /embeddings endpoint (by default
// the gateway's local-embed model).
type HTTPEmbedder struct {
	BaseURL string // e.g. http://127.0.0.1:4000/v1
	Model   string
	APIKey  string // sent as a bearer token when set; never logged
	Dim     int    // expected dimension; 0 accepts any
	Client  *http.Client
}

// Embed implements Embedder.
func (e *HTTPEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(map[string]any{"model": e.Model, "input": texts})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.BaseURL, "/")+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embedding request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-usage-service", UsageService)
	req.Header.Set("x-usage-action", UsageAction)
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	client := e.Client
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embedding endpoint unreachable: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("read embedding response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, fmt.Errorf("embedding endpoint answered %s: %s", resp.Status, msg)
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return nil, fmt.Errorf("embedding response is not valid JSON: %w", err)
	}
	out := make([][]float32, len(texts))
	for i, d := range parsed.Data {
		idx := d.Index
		if idx < 0 || idx >= len(texts) {
			idx = i
		}
		if idx >= len(texts) || (e.Dim > 0 && len(d.Embedding) != e.Dim) {
			continue
		}
		out[idx] = d.Embedding
	}
	return out, nil
}

// embedderFromConfig builds the embedder from DOCUMENT_EMBED_*: the default
// endpoint "gateway" is GATEWAY_BASE_URL, "off" disables semantic search.
// The returned id changes whenever endpoint, model or dimension change.
func embedderFromConfig(cfg *config.Config) (Embedder, string, error) {
	endpoint := cfg.String("DOCUMENT_EMBED_ENDPOINT", "gateway")
	if strings.EqualFold(endpoint, "off") {
		return nil, "", nil
	}
	key := cfg.String("DOCUMENT_EMBED_API_KEY", "")
	if strings.EqualFold(endpoint, "gateway") {
		endpoint = cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1")
		if key == "" {
			key = cfg.String("GATEWAY_API_KEY", "")
		}
	} else {
		endpoint = cfg.URL("DOCUMENT_EMBED_ENDPOINT", "")
	}
	model := cfg.String("DOCUMENT_EMBED_MODEL", "local-embed")
	dim := int(cfg.Int("DOCUMENT_EMBED_DIM", 0, 0, 65536))
	if err := cfg.Err(); err != nil {
		return nil, "", err
	}
	e := &HTTPEmbedder{BaseURL: endpoint, Model: model, APIKey: key, Dim: dim}
	return e, endpoint + "|" + model + "|" + strconv.Itoa(dim), nil
}
