package search

import "context"

// Embedder turns texts into vectors (the gateway's local-embed model in
// production): one vector per text, in order. A nil vector at some index
// means that text failed while the others succeeded; an error means the
// whole call failed. *llm.Embedder is one; every index that embeds (the
// wiki's vector store, mail, documents) takes this interface.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
