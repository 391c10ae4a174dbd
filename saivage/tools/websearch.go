package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/config"
)

// WebSearcher answers websearch queries. A nil WebSearcher in Env makes the
// tool report itself unavailable (it stays in the model's tool list so the
// model learns why instead of never seeing it).
type WebSearcher interface {
	Search(ctx context.Context, query string, limit int) ([]SearchHit, error)
}

// SearchHit is one web search result.
type SearchHit struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// Websearch limits.
const (
	DefaultSearchResults = 8
	maxSearchResults     = 20
	maxSearchBody        = 4 << 20
)

// Websearch backend names, as configuration spells them.
const (
	SearchBackendSearXNG = config.WebSearchSearXNG
	SearchBackendBrave   = config.WebSearchBrave
	SearchBackendTavily  = config.WebSearchTavily
)

// Default endpoints of the hosted providers (overridable for tests and
// proxies); SearXNG has none, its URL is required.
const (
	DefaultBraveURL  = "https://api.search.brave.com"
	DefaultTavilyURL = "https://api.tavily.com"
)

// WebSearchOptions selects and configures a websearch backend.
type WebSearchOptions struct {
	// Backend is searxng (the default when empty), brave or tavily.
	Backend string
	// BaseURL is the endpoint root; required for searxng, optional for the
	// hosted providers.
	BaseURL string
	// APIKey is required for brave and tavily, optional (bearer) for
	// searxng. It is sent only in a header, never in a URL or an error.
	APIKey string
	Client *http.Client
}

// SearchBackendNames lists the backends NewWebSearcher accepts, sorted.
func SearchBackendNames() []string { return config.WebSearchBackends() }

// NewWebSearcher validates o (config.CheckWebSearch: the same rules as the
// configuration's websearch section) and returns its backend. The errors
// name what is wrong and never contain the key or the URL.
func NewWebSearcher(o WebSearchOptions) (WebSearcher, error) {
	if o.Backend == "" {
		o.Backend = SearchBackendSearXNG
	}
	if e := config.CheckWebSearch(config.WebSearch{Backend: o.Backend, URL: o.BaseURL, APIKey: o.APIKey}); e != nil {
		return nil, errors.New(e.Msg)
	}
	switch o.Backend {
	case SearchBackendBrave:
		return &Brave{BaseURL: cmp.Or(o.BaseURL, DefaultBraveURL), APIKey: o.APIKey, Client: o.Client}, nil
	case SearchBackendTavily:
		return &Tavily{BaseURL: cmp.Or(o.BaseURL, DefaultTavilyURL), APIKey: o.APIKey, Client: o.Client}, nil
	}
	return &SearXNG{BaseURL: o.BaseURL, APIKey: o.APIKey, Client: o.Client}, nil
}

// SearXNG is a WebSearcher over a SearXNG-compatible JSON API:
// GET BASE/search?q=QUERY&format=json answering {"results":[{title,url,content}]}.
type SearXNG struct {
	// BaseURL is the instance root (http://127.0.0.1:8888).
	BaseURL string
	// APIKey, when set, is sent as a bearer token (never in the URL).
	APIKey string
	Client *http.Client
}

// Search queries the instance.
func (s *SearXNG) Search(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	req, err := searchRequest(ctx, http.MethodGet, s.BaseURL, "/search", url.Values{"q": {query}, "format": {"json"}}, nil)
	if err != nil {
		return nil, err
	}
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	var doc struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := doSearch(s.Client, req, &doc); err != nil {
		return nil, err
	}
	var hits []SearchHit
	for _, r := range doc.Results {
		hits = appendHit(hits, limit, r.Title, r.URL, r.Content)
	}
	return hits, nil
}

// Brave is a WebSearcher over the Brave Search API:
// GET BASE/res/v1/web/search?q=QUERY&count=N with X-Subscription-Token,
// answering {"web":{"results":[{title,url,description}]}}.
type Brave struct {
	// BaseURL defaults to DefaultBraveURL.
	BaseURL string
	APIKey  string
	Client  *http.Client
}

// Search queries Brave.
func (b *Brave) Search(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	base := b.BaseURL
	if base == "" {
		base = DefaultBraveURL
	}
	req, err := searchRequest(ctx, http.MethodGet, base, "/res/v1/web/search", url.Values{"q": {query}, "count": {strconv.Itoa(limit)}}, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Subscription-Token", b.APIKey)
	var doc struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := doSearch(b.Client, req, &doc); err != nil {
		return nil, err
	}
	var hits []SearchHit
	for _, r := range doc.Web.Results {
		hits = appendHit(hits, limit, r.Title, r.URL, r.Description)
	}
	return hits, nil
}

// Tavily is a WebSearcher over the Tavily search API:
// POST BASE/search {"query","max_results"} with a bearer key, answering
// {"results":[{title,url,content}]}.
type Tavily struct {
	// BaseURL defaults to DefaultTavilyURL.
	BaseURL string
	APIKey  string
	Client  *http.Client
}

// Search queries Tavily.
func (t *Tavily) Search(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	base := t.BaseURL
	if base == "" {
		base = DefaultTavilyURL
	}
	body, err := json.Marshal(map[string]any{"query": query, "max_results": limit})
	if err != nil {
		return nil, fmt.Errorf("encode search request: %w", err)
	}
	req, err := searchRequest(ctx, http.MethodPost, base, "/search", nil, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.APIKey)
	var doc struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := doSearch(t.Client, req, &doc); err != nil {
		return nil, err
	}
	var hits []SearchHit
	for _, r := range doc.Results {
		hits = appendHit(hits, limit, r.Title, r.URL, r.Content)
	}
	return hits, nil
}

// appendHit adds one result unless it has no URL or the limit is reached.
func appendHit(hits []SearchHit, limit int, title, u, snippet string) []SearchHit {
	if len(hits) >= limit || u == "" {
		return hits
	}
	return append(hits, SearchHit{Title: title, URL: u, Snippet: snippet})
}

// searchRequest builds a request to base+path; the key is set by the caller
// in a header so it never appears in the URL (which transport errors quote).
func searchRequest(ctx context.Context, method, base, path string, query url.Values, body []byte) (*http.Request, error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + path)
	if err != nil {
		return nil, fmt.Errorf("search backend URL: %w", err)
	}
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, fmt.Errorf("build search request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// doSearch sends req and decodes a 200 answer into doc. Failures become
// short messages the model can act on; response bodies are never quoted
// (a provider may echo the request, key included).
func doSearch(client *http.Client, req *http.Request, doc any) error {
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return req.Context().Err()
		}
		return fmt.Errorf("search backend unreachable: %s", transportReason(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("search backend refused the configured API key (%s); the operator must fix the websearch key", resp.Status)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("search backend rate limit reached (%s)%s; search less often", resp.Status, retryAfter(resp.Header.Get("Retry-After"), time.Now()))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("search backend answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	if err != nil {
		return fmt.Errorf("read search response: %s", transportReason(err))
	}
	if len(body) > maxSearchBody {
		return fmt.Errorf("search response exceeds %d bytes", maxSearchBody)
	}
	if err := json.Unmarshal(body, doc); err != nil {
		return errors.New("search backend returned malformed JSON")
	}
	return nil
}

// transportReason is the innermost error of a failed exchange without the
// URL *url.Error would add.
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// retryAfter renders a Retry-After header (seconds or HTTP date) as a
// bounded hint, or nothing when it is absent or unusable.
func retryAfter(h string, now time.Time) string {
	h = strings.TrimSpace(h)
	if h == "" {
		return ""
	}
	secs, err := strconv.Atoi(h)
	if err != nil {
		t, perr := http.ParseTime(h)
		if perr != nil {
			return ""
		}
		secs = int(t.Sub(now).Round(time.Second) / time.Second)
	}
	if secs < 0 {
		secs = 0
	}
	if secs > 86400 {
		return "; retry after more than a day"
	}
	return fmt.Sprintf("; retry after %d s", secs)
}

func init() { register("websearch", websearchTool) }

type websearchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

func websearchTool(env *Env) agent.Tool {
	return tool(spec("websearch", fmt.Sprintf("Search the web; returns titles, URLs and snippets (default %d, at most %d results). Read a result with webfetch.", DefaultSearchResults, maxSearchResults),
		fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":%d}},"required":["query"],"additionalProperties":false}`, maxSearchResults)),
		func(ctx context.Context, a websearchArgs) (agent.ToolResult, error) {
			if env.WebSearch == nil {
				return unavailable("websearch", "no search backend is configured (the operator sets the websearch section of config.yaml, or SAIVAGE_WEBSEARCH_URL to a SearXNG-compatible JSON endpoint, or SAIVAGE_WEBSEARCH_BACKEND to brave or tavily with SAIVAGE_WEBSEARCH_KEY)"), nil
			}
			if strings.TrimSpace(a.Query) == "" {
				return failf("query is empty"), nil
			}
			limit := a.Limit
			if limit <= 0 || limit > maxSearchResults {
				limit = DefaultSearchResults
			}
			hits, err := env.WebSearch.Search(ctx, a.Query, limit)
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%s", env.redact(err.Error())), nil
			}
			return jsonResult(map[string]any{"query": a.Query, "results": hits}), nil
		})
}

// unavailable is the result of a tool whose backend this server lacks.
func unavailable(name, why string) agent.ToolResult {
	return agent.ToolResult{Content: fmt.Sprintf("Error: %s is unavailable: %s", name, why), IsError: true,
		Data: mustJSON(map[string]any{"unavailable": true, "tool": name, "reason": why})}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain maps of strings and bools
	}
	return b
}
