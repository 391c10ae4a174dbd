package runtime

import (
	"fmt"
	"os"

	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/tools"
)

// Environment variables selecting the optional tool backends. Each one
// absent leaves its tools reporting themselves unavailable.
const (
	// EnvWebSearchURL is a SearXNG-compatible JSON search endpoint.
	EnvWebSearchURL = "SAIVAGE_WEBSEARCH_URL"
	// EnvWebSearchKey is an optional bearer token for it.
	EnvWebSearchKey = "SAIVAGE_WEBSEARCH_KEY"
	// EnvRetrievalURL is the retrieval engine's loopback HTTP API.
	EnvRetrievalURL = "SAIVAGE_RETRIEVAL_URL"
	// EnvQualityModules is the node_modules directory of the analyzers.
	EnvQualityModules = "SAIVAGE_QUALITY_NODE_MODULES"
)

// BackendsFromEnv fills the backends this Options does not set yet from the
// environment variables above. A malformed value is an error naming it.
func (o *Options) BackendsFromEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if v, ok := lookup(EnvWebSearchURL); ok && v != "" && o.WebSearch == nil {
		key, _ := lookup(EnvWebSearchKey)
		o.WebSearch = &tools.SearXNG{BaseURL: v, APIKey: key, Client: o.HTTPClient}
		if key != "" {
			o.Secrets = append(o.Secrets, key)
		}
	}
	if v, ok := lookup(EnvRetrievalURL); ok && v != "" && o.Retrieval == nil {
		r, err := tools.NewHTTPRetrieval(v, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvRetrievalURL, err)
		}
		o.Retrieval = r
	}
	if v, ok := lookup(EnvQualityModules); ok && v != "" && o.Quality == nil {
		if st, err := os.Stat(v); err != nil || !st.IsDir() {
			return fmt.Errorf("%s: %s is not a directory", EnvQualityModules, v)
		}
		o.Quality = quality.Runner{NodeModules: v}
	}
	return nil
}
