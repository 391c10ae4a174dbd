package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentstack/agentstack/agent"
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
	u, err := url.Parse(strings.TrimRight(s.BaseURL, "/") + "/search")
	if err != nil {
		return nil, fmt.Errorf("search backend URL: %w", err)
	}
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("search backend: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	if err != nil {
		return nil, fmt.Errorf("read search response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("search backend answered %s", resp.Status)
	}
	if len(body) > maxSearchBody {
		return nil, fmt.Errorf("search response exceeds %d bytes", maxSearchBody)
	}
	var doc struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode search response: %w", err)
	}
	var hits []SearchHit
	for _, r := range doc.Results {
		if len(hits) == limit {
			break
		}
		if r.URL == "" {
			continue
		}
		hits = append(hits, SearchHit{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return hits, nil
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
				return unavailable("websearch", "no search backend is configured (set SAIVAGE_WEBSEARCH_URL to a SearXNG-compatible JSON endpoint)"), nil
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
