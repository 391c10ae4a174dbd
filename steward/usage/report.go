package usage

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
)

// ReportOptions selects the period and prices of a report.
type ReportOptions struct {
	// Since is the start of the period; the zero time means all time.
	Since time.Time
	// Rates prices tokens, keyed provider/model. Costs follow the current
	// rates, so editing them re-prices history; a model without a rate keeps
	// the cost recorded at request time.
	Rates map[string]gateway.Rate
	// Recent is how many of the latest requests to list (default 20).
	Recent int
}

// Totals are the sums over a group of requests.
type Totals struct {
	Requests int        `json:"requests"`
	Errors   int        `json:"errors"`
	CostUSD  float64    `json:"costUsd"`
	Tokens   llm.Tokens `json:"tokens"`
}

// Group is one row of a breakdown.
type Group struct {
	Key string `json:"key"`
	// Public is the public model name (the tier) the requests asked for;
	// set in ByModel only, whose Key is the upstream that answered.
	Public string `json:"public,omitempty"`
	Totals
}

// TokenTypeCost splits cost by token type.
type TokenTypeCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// ToolStat summarises the calls of one tool.
type ToolStat struct {
	Tool    string  `json:"tool"`
	Calls   int     `json:"calls"`
	Errors  int     `json:"errors"`
	AvgMS   float64 `json:"avgMs"`
	MaxMS   float64 `json:"maxMs"`
	TotalMS float64 `json:"totalMs"`
}

// RecentCall is one of the latest gateway requests.
type RecentCall struct {
	Time      time.Time  `json:"time"`
	Service   string     `json:"service"`
	Action    string     `json:"action"`
	Model     string     `json:"model"`
	Upstream  string     `json:"upstream"`
	Stream    bool       `json:"stream"`
	Outcome   string     `json:"outcome"`
	Tokens    llm.Tokens `json:"tokens"`
	CostUSD   float64    `json:"costUsd"`
	LatencyMS float64    `json:"latencyMs"`
}

// Report is the Usage view over the ledger.
type Report struct {
	Since       *time.Time    `json:"since,omitempty"`
	Total       Totals        `json:"total"`
	ByTokenType TokenTypeCost `json:"byTokenType"`
	ByService   []Group       `json:"byService"`
	ByAction    []Group       `json:"byAction"` // key "service/action"
	ByModel     []Group       `json:"byModel"`  // per public name (tier) and key "provider/model", or the public name when nothing answered
	ByDay       []Group       `json:"byDay"`    // key YYYY-MM-DD, local time
	// Unlabelled is the spend of requests that did not say who made them.
	Unlabelled Totals       `json:"unlabelled"`
	Tools      []ToolStat   `json:"tools"`
	Recent     []RecentCall `json:"recent"`
}

// Report computes the usage report in SQL.
func (s *Store) Report(ctx context.Context, opts ReportOptions) (*Report, error) {
	if opts.Recent <= 0 {
		opts.Recent = 20
	}
	since := int64(0)
	rep := &Report{}
	if !opts.Since.IsZero() {
		since = opts.Since.UnixMilli()
		t := opts.Since
		rep.Since = &t
	}
	// Prices come in as a CTE so that every breakdown is priced by SQLite.
	var values []string
	args := []any{}
	keys := make([]string, 0, len(opts.Rates))
	for k := range opts.Rates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := opts.Rates[k]
		values = append(values, "(?,?,?,?,?)")
		args = append(args, k, r.Input, r.Output, r.CacheRead, r.CacheWrite)
	}
	cte := `WITH rates(key, r_in, r_out, r_cr, r_cw) AS (SELECT NULL, 0, 0, 0, 0 WHERE 0`
	if len(values) > 0 {
		cte += ` UNION ALL VALUES ` + strings.Join(values, ",")
	}
	cte += `),
priced AS (
	SELECT q.*,
		CASE WHEN q.provider = '' THEN q.public_model ELSE q.provider || '/' || q.upstream_model END AS model_key,
		COALESCE(q.input_tokens * rt.r_in / 1e6, 0)        AS c_in,
		COALESCE(q.output_tokens * rt.r_out / 1e6, 0)      AS c_out,
		COALESCE(q.cache_read_tokens * rt.r_cr / 1e6, 0)   AS c_cr,
		COALESCE(q.cache_write_tokens * rt.r_cw / 1e6, 0)  AS c_cw,
		CASE WHEN rt.key IS NULL THEN q.cost_usd ELSE
			(q.input_tokens * rt.r_in + q.output_tokens * rt.r_out + q.cache_read_tokens * rt.r_cr + q.cache_write_tokens * rt.r_cw) / 1e6
		END AS cost
	FROM requests q LEFT JOIN rates rt ON rt.key = q.provider || '/' || q.upstream_model
	WHERE q.ts >= ?
)`
	args = append(args, since)
	const sums = `count(*), COALESCE(sum(outcome NOT IN ('ok')), 0), COALESCE(sum(cost), 0),
		COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cache_read_tokens), 0), COALESCE(sum(cache_write_tokens), 0)`

	scanTotals := func(dst *Totals, extra ...any) []any {
		return append(extra, &dst.Requests, &dst.Errors, &dst.CostUSD, &dst.Tokens.Input, &dst.Tokens.Output, &dst.Tokens.CacheRead, &dst.Tokens.CacheWrite)
	}
	row := s.db.QueryRowContext(ctx, cte+` SELECT `+sums+`, COALESCE(sum(c_in),0), COALESCE(sum(c_out),0), COALESCE(sum(c_cr),0), COALESCE(sum(c_cw),0) FROM priced`, args...)
	tt := &rep.ByTokenType
	if err := row.Scan(append(scanTotals(&rep.Total), &tt.Input, &tt.Output, &tt.CacheRead, &tt.CacheWrite)...); err != nil {
		return nil, fmt.Errorf("usage totals: %w", err)
	}
	row = s.db.QueryRowContext(ctx, cte+` SELECT `+sums+` FROM priced WHERE service = 'unknown' OR action = 'unknown'`, args...)
	if err := row.Scan(scanTotals(&rep.Unlabelled)...); err != nil {
		return nil, fmt.Errorf("usage unlabelled: %w", err)
	}

	groups := []struct {
		dst   *[]Group
		key   string
		order string
	}{
		{&rep.ByService, `service`, `4 DESC, 1`},
		{&rep.ByAction, `service || '/' || action`, `4 DESC, 1`},
		{&rep.ByModel, `public_model || char(31) || model_key`, `4 DESC, 1`},
		{&rep.ByDay, `date(ts / 1000, 'unixepoch', 'localtime')`, `1`},
	}
	for _, g := range groups {
		rows, err := s.db.QueryContext(ctx, cte+` SELECT `+g.key+` AS k, `+sums+` FROM priced GROUP BY k ORDER BY `+g.order, args...)
		if err != nil {
			return nil, fmt.Errorf("usage breakdown by %s: %w", g.key, err)
		}
		*g.dst = []Group{}
		for rows.Next() {
			var gr Group
			if err := rows.Scan(scanTotals(&gr.Totals, &gr.Key)...); err != nil {
				rows.Close()
				return nil, err
			}
			if g.dst == &rep.ByModel {
				gr.Public, gr.Key, _ = strings.Cut(gr.Key, "\x1f")
			}
			*g.dst = append(*g.dst, gr)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}

	rows, err := s.db.QueryContext(ctx, `SELECT tool, count(*), sum(ok = 0), avg(duration_ms), max(duration_ms), sum(duration_ms)
		FROM tool_calls WHERE ts >= ? GROUP BY tool ORDER BY 2 DESC, 1`, since)
	if err != nil {
		return nil, fmt.Errorf("usage tools: %w", err)
	}
	rep.Tools = []ToolStat{}
	for rows.Next() {
		var t ToolStat
		if err := rows.Scan(&t.Tool, &t.Calls, &t.Errors, &t.AvgMS, &t.MaxMS, &t.TotalMS); err != nil {
			rows.Close()
			return nil, err
		}
		rep.Tools = append(rep.Tools, t)
	}
	rows.Close()

	rows, err = s.db.QueryContext(ctx, cte+` SELECT ts, service, action, public_model, model_key, stream, outcome,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, latency_ms
		FROM priced ORDER BY ts DESC, id LIMIT ?`, append(args, opts.Recent)...)
	if err != nil {
		return nil, fmt.Errorf("usage recent: %w", err)
	}
	defer rows.Close()
	rep.Recent = []RecentCall{}
	for rows.Next() {
		var c RecentCall
		var ts int64
		if err := rows.Scan(&ts, &c.Service, &c.Action, &c.Model, &c.Upstream, &c.Stream, &c.Outcome,
			&c.Tokens.Input, &c.Tokens.Output, &c.Tokens.CacheRead, &c.Tokens.CacheWrite, &c.CostUSD, &c.LatencyMS); err != nil {
			return nil, err
		}
		c.Time = time.UnixMilli(ts)
		rep.Recent = append(rep.Recent, c)
	}
	return rep, rows.Err()
}

// ParsePeriod turns 24h, 7d, 30d or all into the start of the period.
func ParsePeriod(p string, now time.Time) (time.Time, error) {
	switch p {
	case "all", "":
		return time.Time{}, nil
	case "24h", "1d":
		return now.Add(-24 * time.Hour), nil
	case "7d":
		return now.AddDate(0, 0, -7), nil
	case "30d":
		return now.AddDate(0, 0, -30), nil
	}
	return time.Time{}, fmt.Errorf("unknown period %q: use 24h, 7d, 30d or all", p)
}
