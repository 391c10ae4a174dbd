package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/config"
)

// Retrieval is the two-operation port to an external retrieval engine that
// observes document collections: list them and query one. A nil Retrieval
// in Env makes both tools report themselves unavailable.
type Retrieval interface {
	Collections(ctx context.Context) ([]Collection, error)
	Query(ctx context.Context, collection, query string, limit int) ([]Passage, error)
}

// Collection is one observed collection.
type Collection struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Documents   int    `json:"documents,omitempty"`
}

// Passage is one query hit.
type Passage struct {
	Source string  `json:"source"`
	Text   string  `json:"text"`
	Score  float64 `json:"score"`
}

// Retrieval limits.
const (
	DefaultRetrievalResults = 8
	maxRetrievalResults     = 50
	maxRetrievalBody        = 4 << 20
)

// HTTPRetrieval is a Retrieval over an engine's loopback HTTP API:
// GET BASE/collections → {"collections":[...]} and
// POST BASE/query {"collection","query","limit"} → {"results":[...]}.
type HTTPRetrieval struct {
	BaseURL string
	Client  *http.Client
}

// NewHTTPRetrieval checks that base is an http URL on a loopback address:
// observed collections are local data and never leave the machine.
func NewHTTPRetrieval(base string, client *http.Client) (*HTTPRetrieval, error) {
	u, err := url.Parse(base)
	// The URL is quoted only redacted: a mistaken one may carry credentials.
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("retrieval engine URL %s: want http://127.0.0.1:PORT, without credentials, query or fragment", config.RedactURL(base))
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return nil, fmt.Errorf("retrieval engine URL %s: the engine must listen on a loopback address", config.RedactURL(base))
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &HTTPRetrieval{BaseURL: strings.TrimRight(base, "/"), Client: client}, nil
}

// Collections lists the engine's collections.
func (r *HTTPRetrieval) Collections(ctx context.Context) ([]Collection, error) {
	var doc struct {
		Collections []Collection `json:"collections"`
	}
	if err := r.do(ctx, http.MethodGet, "/collections", nil, &doc); err != nil {
		return nil, err
	}
	return doc.Collections, nil
}

// Query searches one collection.
func (r *HTTPRetrieval) Query(ctx context.Context, collection, query string, limit int) ([]Passage, error) {
	body, _ := json.Marshal(map[string]any{"collection": collection, "query": query, "limit": limit})
	var doc struct {
		Results []Passage `json:"results"`
	}
	if err := r.do(ctx, http.MethodPost, "/query", body, &doc); err != nil {
		return nil, err
	}
	if len(doc.Results) > limit {
		doc.Results = doc.Results[:limit]
	}
	return doc.Results, nil
}

func (r *HTTPRetrieval) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, r.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return fmt.Errorf("retrieval engine %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRetrievalBody+1))
	if err != nil {
		return fmt.Errorf("read retrieval response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("retrieval engine %s %s answered %s: %s", method, path, resp.Status, truncate(strings.TrimSpace(string(data)), 512))
	}
	if len(data) > maxRetrievalBody {
		return fmt.Errorf("retrieval response exceeds %d bytes", maxRetrievalBody)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode retrieval response: %w", err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func init() {
	register("list_observed_collections", listCollectionsTool)
	register("query_observed_collections", queryCollectionsTool)
}

const retrievalMissing = "no retrieval engine is configured (set SAIVAGE_RETRIEVAL_URL to the engine's loopback HTTP API)"

func listCollectionsTool(env *Env) agent.Tool {
	return tool(spec("list_observed_collections", "List the document collections the external retrieval engine observes.", emptySchema),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			if env.Retrieval == nil {
				return unavailable("list_observed_collections", retrievalMissing), nil
			}
			cs, err := env.Retrieval.Collections(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%s", env.redact(err.Error())), nil
			}
			return jsonResult(map[string]any{"collections": cs}), nil
		})
}

type queryCollectionsArgs struct {
	Collection string `json:"collection"`
	Query      string `json:"query"`
	Limit      int    `json:"limit,omitempty"`
}

func queryCollectionsTool(env *Env) agent.Tool {
	return tool(spec("query_observed_collections", fmt.Sprintf("Query one observed collection (see list_observed_collections); returns ranked passages with their sources (default %d, at most %d).", DefaultRetrievalResults, maxRetrievalResults),
		fmt.Sprintf(`{"type":"object","properties":{"collection":{"type":"string","minLength":1},"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":%d}},"required":["collection","query"],"additionalProperties":false}`, maxRetrievalResults)),
		func(ctx context.Context, a queryCollectionsArgs) (agent.ToolResult, error) {
			if env.Retrieval == nil {
				return unavailable("query_observed_collections", retrievalMissing), nil
			}
			limit := a.Limit
			if limit <= 0 || limit > maxRetrievalResults {
				limit = DefaultRetrievalResults
			}
			ps, err := env.Retrieval.Query(ctx, a.Collection, a.Query, limit)
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%s", env.redact(err.Error())), nil
			}
			return jsonResult(map[string]any{"collection": a.Collection, "results": ps}), nil
		})
}
