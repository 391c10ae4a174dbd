package mirror

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the prepared-statement cache.
const maxCachedStmts = 256

// stmtCache keeps prepared statements on the single writer connection:
// parsing the same SQL for every message would otherwise cost as much as
// running it. The one connection is busy inside a transaction, so a missed
// statement is only noted there and prepared by flush, between transactions.
type stmtCache struct {
	mu      sync.Mutex
	db      *sql.DB
	stmts   map[string]*sql.Stmt
	pending map[string]bool
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if len(c.stmts)+len(c.pending) < maxCachedStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return nil
}

// flush prepares the statements missed since the last flush. It must be
// called when no transaction holds the connection.
func (c *stmtCache) flush(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	for q := range c.pending {
		if st, err := c.db.PrepareContext(ctx, q); err == nil {
			c.stmts[q] = st
		}
	}
	c.pending = nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// txq runs statements in a transaction through the cache.
type txq struct {
	tx    *sql.Tx
	cache *stmtCache
}

func (q txq) stmt(ctx context.Context, query string) *sql.Stmt {
	if st := q.cache.get(query); st != nil {
		return q.tx.StmtContext(ctx, st)
	}
	return nil
}

// ExecContext implements execer.
func (q txq) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

// QueryContext implements execer.
func (q txq) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext implements execer.
func (q txq) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}
