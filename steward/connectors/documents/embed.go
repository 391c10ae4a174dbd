package documents

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/config"
)

// Embedder is the shared search.Embedder.
type Embedder = search.Embedder

// Usage attribution sent with every document embedding request: the
// configured embedder carries it, and semantic search labels each call with
// it too, for an embedder shared with other users (steward serve's wiki).
const (
	UsageService = "documents-mcp"
	UsageAction  = "search-embed"
)

// embedTimeout bounds one embedding request, including reading the answer.
const embedTimeout = 60 * time.Second

// fixedDim drops vectors whose length is not Dim (DOCUMENT_EMBED_DIM), so a
// misconfigured model marks texts as failed instead of mixing dimensions.
type fixedDim struct {
	Embedder
	Dim int
}

// Embed implements Embedder.
func (f fixedDim) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := f.Embedder.Embed(ctx, texts)
	for i, v := range vecs {
		if len(v) != f.Dim {
			vecs[i] = nil
		}
	}
	return vecs, err
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
	var e Embedder = search.NewEmbedder(search.EmbedderOptions{BaseURL: endpoint, APIKey: key, Model: model,
		Attribution: llm.Attribution{Service: UsageService, Action: UsageAction}, Timeout: embedTimeout, Partial: true})
	if dim > 0 {
		e = fixedDim{Embedder: e, Dim: dim}
	}
	return e, endpoint + "|" + model + "|" + strconv.Itoa(dim), nil
}
