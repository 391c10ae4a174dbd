package mcptool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PrepareMethod is the private request the host sends each index-backed
// connector at start-up to warm its search connections. It is not an agent
// tool.
const PrepareMethod = "steward/prepareSearch"

// PrepareParams is PrepareMethod's (empty) input.
type PrepareParams struct {
	mcp.ParamsBase
}

// PrepareResult reports a preparation: what was touched, or why nothing was.
type PrepareResult struct {
	mcp.ResultBase
	// Skipped is set, with the reason, when there was nothing to prepare
	// (the index has not been built yet).
	Skipped    string `json:"skipped,omitempty"`
	Lookups    int    `json:"lookups"`
	Vectors    int    `json:"vectors"` // rows the warm-up KNN returned
	DurationMS int64  `json:"durationMs"`
}

// AddPrepareSearch registers PrepareMethod on s: it opens the service with
// get and warms it with warm. A service that cannot open because its index
// is not built (an error matching notBuilt) answers Skipped.
func AddPrepareSearch[S any](s *mcp.Server, get func(context.Context) (S, error), notBuilt error, warm func(S, context.Context) (PrepareResult, error)) error {
	return mcp.AddReceivingCustomMethod(s, PrepareMethod, func(ctx context.Context, _ *mcp.ServerSession, _ *PrepareParams) (*PrepareResult, error) {
		start := time.Now()
		svc, err := get(ctx)
		if errors.Is(err, notBuilt) {
			return &PrepareResult{Skipped: err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		res, err := warm(svc, ctx)
		if err != nil {
			return nil, fmt.Errorf("prepare search: %w", err)
		}
		res.DurationMS = time.Since(start).Milliseconds()
		return &res, nil
	})
}

// WarmIndex pages in what a first search reads: a small keyword lookup on
// the FTS5 table fts and, when the vec0 table vec holds vectors, one KNN of
// k 10 with a stored vector as the query. It returns no content.
func WarmIndex(ctx context.Context, db *sql.DB, fts, vec string) (PrepareResult, error) {
	var res PrepareResult
	var n int
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT rowid FROM %s WHERE %s MATCH '"steward"' LIMIT 10)`, fts, fts)
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return res, fmt.Errorf("warm %s: %w", fts, err)
	}
	res.Lookups++
	var v []byte
	err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT embedding FROM %s LIMIT 1`, vec)).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows), err != nil && strings.Contains(err.Error(), "no such table"):
		return res, nil // no vectors yet: keyword search only
	case err != nil:
		return res, fmt.Errorf("warm %s: %w", vec, err)
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT rowid FROM %s WHERE embedding MATCH ? AND k = 10`, vec), v)
	if err != nil {
		return res, fmt.Errorf("warm %s: %w", vec, err)
	}
	defer rows.Close()
	for rows.Next() {
		res.Vectors++
	}
	res.Lookups++
	return res, rows.Err()
}
