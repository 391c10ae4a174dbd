package search

import (
	"context"
	"net/http"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// Embedder turns texts into vectors (the gateway's local-embed model in
// production): one vector per text, in order. A nil vector at some index
// means that text failed while the others succeeded; an error means the
// whole call failed. *llm.Embedder is one; every index that embeds (the
// wiki's vector store, mail, documents) takes this interface.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedderOptions configures NewEmbedder.
type EmbedderOptions struct {
	// BaseURL is the OpenAI-compatible API base (…/v1); APIKey is sent as
	// a bearer token when set.
	BaseURL, APIKey string
	Model           string
	// Attribution labels the usage of every call.
	Attribution llm.Attribution
	// Timeout bounds each request, reading the answer included (0: none).
	Timeout time.Duration
	// Partial: a text the answer has no vector for comes back nil instead
	// of failing the whole call.
	Partial bool
	// HTTPClient, when set, carries the requests instead of a client with
	// Timeout.
	HTTPClient *http.Client
}

// NewEmbedder returns the embedder of an OpenAI-compatible endpoint. Every
// embedder built from configuration (mail, documents, calendar, contacts,
// the wiki, the Action Center, the start-up warm-up) is made here.
func NewEmbedder(opts EmbedderOptions) *llm.Embedder {
	hc := opts.HTTPClient
	if hc == nil && opts.Timeout > 0 {
		hc = &http.Client{Timeout: opts.Timeout}
	}
	return &llm.Embedder{
		Client:      llm.NewClient(llm.ClientOptions{BaseURL: opts.BaseURL, APIKey: opts.APIKey, HTTPClient: hc}),
		Model:       opts.Model,
		Attribution: opts.Attribution,
		Partial:     opts.Partial,
	}
}
