package runtime

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/config"

	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/tools"
)

// Environment variables selecting the optional tool backends. Each one
// absent leaves its tools reporting themselves unavailable.
const (
	// EnvWebSearchBackend selects the websearch backend: searxng (the
	// default), brave or tavily (tools.SearchBackendNames).
	EnvWebSearchBackend = "SAIVAGE_WEBSEARCH_BACKEND"
	// EnvWebSearchURL is the backend's endpoint root: required for a
	// SearXNG-compatible instance, an override for brave and tavily.
	EnvWebSearchURL = "SAIVAGE_WEBSEARCH_URL"
	// EnvWebSearchKey is the backend's API key (required for brave and
	// tavily); it joins the redacted secrets.
	EnvWebSearchKey = "SAIVAGE_WEBSEARCH_KEY"
	// EnvRetrievalURL is the retrieval engine's loopback HTTP API.
	EnvRetrievalURL = "SAIVAGE_RETRIEVAL_URL"
	// EnvQualityModules is the node_modules directory of the analyzers.
	EnvQualityModules = "SAIVAGE_QUALITY_NODE_MODULES"
	// EnvFailedRequestDiagnostics set to 1 keeps failed provider requests
	// under FailedRequestDiagnosticsDir (opt-in, private, never served).
	EnvFailedRequestDiagnostics = "SAIVAGE_FAILED_REQUEST_DIAGNOSTICS"
)

// FailedRequestDiagnosticsDir holds the diagnostics activations, relative
// to the project's state directory. Reset leaves it alone.
const FailedRequestDiagnosticsDir = "diagnostics/failed-provider-requests"

// BackendsFromEnv fills the backends this Options does not set yet from the
// environment variables above (websearch also from the project's
// configuration, see WebSearchBackend). A malformed value is an error
// naming it.
func (o *Options) BackendsFromEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if o.WebSearch == nil {
		var cfg *config.Config
		if o.Project != nil {
			cfg = o.Project.Config
		}
		ws, key, err := WebSearchBackend(cfg, lookup, o.HTTPClient)
		if err != nil {
			return err
		}
		if key != "" {
			o.Secrets = append(o.Secrets, key)
		}
		o.WebSearch = ws
	}
	if v, ok := lookup(EnvRetrievalURL); ok && v != "" && o.Retrieval == nil {
		r, err := tools.NewHTTPRetrieval(v, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvRetrievalURL, err)
		}
		o.Retrieval = r
	}
	if o.Quality == nil {
		// The analyzers run from the node modules, or Ruff alone from a
		// native executable (SAIVAGE_QUALITY_RUFF or ruff on PATH).
		mods, _ := lookup(EnvQualityModules)
		if st, err := os.Stat(mods); mods != "" && (err != nil || !st.IsDir()) {
			return fmt.Errorf("%s: %s is not a directory", EnvQualityModules, mods)
		}
		q := quality.Runner{NodeModules: mods}
		if v, _ := lookup(quality.EnvRuff); v != "" {
			q.Ruff = v
			if err := q.Available(quality.PythonRuff); err != nil {
				return fmt.Errorf("%s: %w", quality.EnvRuff, err)
			}
		}
		if mods != "" || q.Available(quality.PythonRuff) == nil {
			o.Quality = q
		}
	}
	if v, ok := lookup(EnvFailedRequestDiagnostics); ok && v != "" && o.FailedRequests == nil {
		if v != "1" {
			return fmt.Errorf("%s: set it to 1 to keep failed provider requests, not %q", EnvFailedRequestDiagnostics, v)
		}
		if o.Project == nil {
			return fmt.Errorf("%s: no project to keep diagnostics in", EnvFailedRequestDiagnostics)
		}
		d, err := llm.OpenFailedRequestDiagnostics(llm.DiagnosticsOptions{
			Dir: filepath.Join(o.Project.StateDir, FailedRequestDiagnosticsDir), Secrets: providerSecrets(o.Project.Config)})
		if err != nil {
			return fmt.Errorf("%s: %w", EnvFailedRequestDiagnostics, err)
		}
		o.FailedRequests = d
	}
	return nil
}

// WebSearchBackend builds the websearch backend that cfg's websearch
// section (already validated by config.Load) or, without one, the
// SAIVAGE_WEBSEARCH_* variables select; nil when neither does. It also
// returns the backend's key, which the caller adds to the redacted secrets.
// A websearch section together with SAIVAGE_WEBSEARCH_BACKEND or
// SAIVAGE_WEBSEARCH_URL is refused, so no one wonders which one is used;
// SAIVAGE_WEBSEARCH_KEY alone is allowed beside the section, which may
// reference it as ${SAIVAGE_WEBSEARCH_KEY} (it is not read otherwise). It
// does no I/O, so saivage validate calls it too.
func WebSearchBackend(cfg *config.Config, lookup func(string) (string, bool), client *http.Client) (tools.WebSearcher, string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := func(name string) string {
		if v, ok := lookup(name); ok {
			return v
		}
		return ""
	}
	backend, searchURL := env(EnvWebSearchBackend), env(EnvWebSearchURL)
	if cfg != nil && cfg.WebSearch != nil {
		if backend != "" || searchURL != "" {
			return nil, "", fmt.Errorf("websearch is configured both by the websearch section of config.yaml and by %s or %s; keep one (unset the variables or remove the section)", EnvWebSearchBackend, EnvWebSearchURL)
		}
		w := cfg.WebSearch
		ws, err := tools.NewWebSearcher(tools.WebSearchOptions{Backend: w.Backend, BaseURL: w.URL, APIKey: w.APIKey, Client: client})
		if err != nil {
			return nil, "", fmt.Errorf("config websearch: %w", err)
		}
		return ws, w.APIKey, nil
	}
	if backend == "" && searchURL == "" {
		return nil, "", nil
	}
	key := env(EnvWebSearchKey)
	ws, err := tools.NewWebSearcher(tools.WebSearchOptions{Backend: backend, BaseURL: searchURL, APIKey: key, Client: client})
	if err != nil {
		return nil, "", fmt.Errorf("%s/%s/%s: %w", EnvWebSearchBackend, EnvWebSearchURL, EnvWebSearchKey, err)
	}
	return ws, key, nil
}

// providerSecrets are the configured provider and account API keys.
func providerSecrets(cfg *config.Config) []string {
	var out []string
	for _, p := range cfg.Providers {
		out = append(out, p.APIKey)
		for _, a := range p.Accounts {
			out = append(out, a.APIKey)
		}
	}
	return out
}
