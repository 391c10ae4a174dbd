package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	hybrid "github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// Bounds from the spec.
const (
	DefaultLimit     = 8
	MaxLimit         = 12
	internalLimit    = 100 // ranked rows a query keeps after fusion and collapse
	lexicalPool      = 50
	vectorPool       = 50
	substringPool    = 500
	browsePool       = 500
	shortScanWindow  = 5000 // rows a substring under 3 characters may scan
	snippetFirst     = 200
	snippetRest      = 120
	snippetFirstRank = 3
)

// Query is a mail search. Field names follow the spec's tool arguments.
type Query struct {
	Query           string `json:"query,omitempty" jsonschema:"free text; ranked lexically and semantically"`
	Sender          string `json:"sender,omitempty" jsonschema:"substring of the sender's name or address"`
	Recipient       string `json:"recipient,omitempty" jsonschema:"substring of a To recipient"`
	Cc              string `json:"cc,omitempty" jsonschema:"substring of a Cc recipient"`
	SubjectContains string `json:"subjectContains,omitempty" jsonschema:"substring of the subject"`
	BodyContains    string `json:"bodyContains,omitempty" jsonschema:"substring of the body"`
	After           string `json:"after,omitempty" jsonschema:"on or after this date (YYYY-MM-DD or RFC 3339)"`
	Before          string `json:"before,omitempty" jsonschema:"before this date (YYYY-MM-DD or RFC 3339)"`
	Account         string `json:"account,omitempty" jsonschema:"account name"`
	Mailbox         string `json:"mailbox,omitempty" jsonschema:"mailbox name, or 'any' to include trash and junk"`
	Role            string `json:"role,omitempty" jsonschema:"inbox, sent, drafts, trash, junk, archive or all"`
	Unread          *bool  `json:"unread,omitempty"`
	Flagged         *bool  `json:"flagged,omitempty"`
	HasAttachments  *bool  `json:"hasAttachments,omitempty"`
	MinSize         int64  `json:"minSize,omitempty" jsonschema:"smallest message size in bytes"`
	MaxSize         int64  `json:"maxSize,omitempty" jsonschema:"largest message size in bytes"`
	SortBy          string `json:"sortBy,omitempty" jsonschema:"relevance (default with a query), date (default without) or size"`
	PerMessage      bool   `json:"perMessage,omitempty" jsonschema:"return every matching message instead of one per thread"`
	Offset          int    `json:"offset,omitempty"`
	Limit           int    `json:"limit,omitempty" jsonschema:"page size, default 8, at most 12"`
}

// Summary is one search result.
type Summary struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Subject  string `json:"subject"`
	Sender   string `json:"sender"`
	Date     string `json:"date"`
	Account  string `json:"account"`
	Mailbox  string `json:"mailbox"`
	Snippet  string `json:"snippet"`
	ThreadID string `json:"threadId,omitempty"`
	MailURL  string `json:"mailUrl"`
}

// Page describes the returned page and how it was produced.
type Page struct {
	Offset     int  `json:"offset"`
	Limit      int  `json:"limit"`
	Returned   int  `json:"returned"`
	Total      int  `json:"total"`
	HasMore    bool `json:"hasMore"`
	NextOffset *int `json:"nextOffset,omitempty"`
	// Mode is hybrid (lexical + semantic), lexical, or browse (no query).
	Mode string `json:"mode"`
	// Semantic is used, off or unavailable for a query; empty when browsing.
	Semantic string `json:"semantic,omitempty"`
	// Window is the browse window's size (500 messages) when browsing;
	// offset and limit apply inside it.
	Window int `json:"window,omitempty"`
	// BeyondWindow is set when browsing and more messages match than the
	// window holds: older ones are reached by narrowing the filters.
	BeyondWindow bool `json:"beyondWindow,omitempty"`
	// Notice tells the agent what degraded or was adjusted.
	Notice string `json:"notice,omitempty"`
}

// Result is a search answer: { messages, page }.
type Result struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind     string    `json:"kind"`
	Messages []Summary `json:"messages"`
	Page     Page      `json:"page"`
}

// ArgumentError is a query the caller must fix; its message says how.
type ArgumentError struct{ msg string }

func (e *ArgumentError) Error() string { return e.msg }

func argErr(format string, args ...any) error { return &ArgumentError{fmt.Sprintf(format, args...)} }

// filter is a composed SQL condition over messages m.
type filter struct {
	where []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	f.where = append(f.where, cond)
	f.args = append(f.args, args...)
}

func (f *filter) sql() string {
	if len(f.where) == 0 {
		return "1"
	}
	return strings.Join(f.where, " AND ")
}

// Search runs the spec's algorithm: scope, SQL filters, trigram candidates,
// FTS5 and vector candidates fused by RRF (k = 60), substring intersection,
// thread collapse, then summaries for the requested page. Without a query it
// browses the newest (or largest) 500 matching messages instead.
func (e *Engine) Search(ctx context.Context, q Query) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var notices []string
	if q.Limit <= 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit > MaxLimit {
		notices = append(notices, fmt.Sprintf("limit %d lowered to the maximum of %d", q.Limit, MaxLimit))
		q.Limit = MaxLimit
	}
	if q.Offset < 0 {
		return nil, argErr("offset must not be negative")
	}
	sortBy := strings.ToLower(strings.TrimSpace(q.SortBy))
	switch sortBy {
	case "", "relevance", "date", "size":
	default:
		return nil, argErr("sortBy %q is not relevance, date or size", q.SortBy)
	}
	f, err := e.buildFilter(ctx, q)
	if err != nil {
		return nil, err
	}
	cands, err := e.substringCandidates(ctx, q)
	if err != nil {
		return nil, err
	}

	res := &Result{Messages: []Summary{}, Page: Page{Offset: q.Offset, Limit: q.Limit}}
	var ranked []int64
	text := strings.TrimSpace(q.Query)
	if text == "" {
		res.Page.Mode = "browse"
		if sortBy == "relevance" {
			sortBy = "date"
		}
		ranked, err = e.browse(ctx, f, cands, sortBy)
		if err != nil {
			return nil, err
		}
		res.Page.Window = browsePool
		if len(ranked) > browsePool {
			ranked, res.Page.BeyondWindow = ranked[:browsePool], true
		}
	} else {
		lex, err := e.lexical(ctx, text, f)
		if err != nil {
			return nil, err
		}
		vec, semantic, notice := e.semantic(ctx, text, f)
		res.Page.Semantic = semantic
		if notice != "" {
			notices = append(notices, notice)
		}
		res.Page.Mode = "lexical"
		if semantic == "used" {
			res.Page.Mode = "hybrid"
		}
		for _, fu := range hybrid.RRF(hybrid.DefaultRRFK, idStrings(lex), idStrings(vec)) {
			id, _ := strconv.ParseInt(fu.ID, 10, 64)
			if cands == nil || cands[id] {
				ranked = append(ranked, id)
			}
		}
		if sortBy == "date" || sortBy == "size" {
			if ranked, err = e.reorder(ctx, ranked, sortBy); err != nil {
				return nil, err
			}
		}
	}
	if !q.PerMessage {
		if ranked, err = e.collapse(ctx, ranked); err != nil {
			return nil, err
		}
	}
	// The internal limit bounds what a query ranks; browsing pages through
	// its whole window instead.
	if res.Page.Mode != "browse" && len(ranked) > internalLimit {
		ranked = ranked[:internalLimit]
	}
	res.Page.Total = len(ranked)
	if q.Offset < len(ranked) {
		end := min(len(ranked), q.Offset+q.Limit)
		res.Messages, err = e.summaries(ctx, ranked[q.Offset:end], q.Offset, text)
		if err != nil {
			return nil, err
		}
		if end < len(ranked) {
			next := end
			res.Page.NextOffset, res.Page.HasMore = &next, true
		}
	}
	res.Page.Returned = len(res.Messages)
	if res.Page.BeyondWindow && res.Page.NextOffset == nil {
		notices = append(notices, fmt.Sprintf("browsing covers the %d newest matching messages and more match; "+
			"narrow with before/after, mailbox or sender to reach older ones", browsePool))
	}
	res.Page.Notice = strings.Join(notices, "; ")
	return res, nil
}

func idStrings(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

func idJSON(ids []int64) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// buildFilter resolves the account/mailbox/role scope and composes the
// deterministic constraints, ANDed.
func (e *Engine) buildFilter(ctx context.Context, q Query) (*filter, error) {
	f := &filter{}
	f.add("m.deleted_at IS NULL")
	if a := strings.TrimSpace(q.Account); a != "" {
		var id int64
		err := e.db.QueryRowContext(ctx, "SELECT id FROM accounts WHERE name = ? COLLATE NOCASE", a).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, argErr("unknown account %q; known accounts: %s", a, strings.Join(e.accountNames(ctx), ", "))
		}
		if err != nil {
			return nil, err
		}
		f.add("m.account_id = ?", id)
	}
	mailbox := strings.TrimSpace(q.Mailbox)
	role := strings.ToLower(strings.TrimSpace(q.Role))
	if role != "" {
		if r := mail.Role(role); !r.Valid() || r == mail.RoleNone {
			return nil, argErr("role %q is not one of %s", q.Role, strings.Join(mail.RoleNames(), ", "))
		}
		f.add("m.mailbox_id IN (SELECT id FROM mailboxes WHERE role = ?)", role)
	}
	switch {
	case strings.EqualFold(mailbox, "any") || mailbox == "*":
	case mailbox != "":
		ids, err := e.mailboxIDs(ctx, mailbox)
		if err != nil {
			return nil, err
		}
		f.add("m.mailbox_id IN (SELECT value FROM json_each(?))", idJSON(ids))
	case role == "":
		// Trash and junk only when asked for.
		f.add("m.mailbox_id NOT IN (SELECT id FROM mailboxes WHERE role IN ('trash', 'junk'))")
	}
	if q.After != "" {
		t, err := parseDay(q.After)
		if err != nil {
			return nil, argErr("after: %v", err)
		}
		f.add("m.date >= ?", t.Unix())
	}
	if q.Before != "" {
		t, err := parseDay(q.Before)
		if err != nil {
			return nil, argErr("before: %v", err)
		}
		f.add("m.date < ?", t.Unix())
	}
	if q.Unread != nil {
		f.add("m.seen = ?", boolInt(!*q.Unread))
	}
	if q.Flagged != nil {
		f.add("m.flagged = ?", boolInt(*q.Flagged))
	}
	if q.HasAttachments != nil {
		f.add("m.has_attachments = ?", boolInt(*q.HasAttachments))
	}
	if q.MinSize > 0 {
		f.add("m.size >= ?", q.MinSize)
	}
	if q.MaxSize > 0 {
		f.add("m.size <= ?", q.MaxSize)
	}
	return f, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseDay reads YYYY-MM-DD (midnight, local time) or RFC 3339.
func parseDay(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date (use YYYY-MM-DD or RFC 3339)", s)
}

func (e *Engine) accountNames(ctx context.Context) []string {
	rows, err := e.db.QueryContext(ctx, "SELECT name FROM accounts ORDER BY name")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

// mailboxIDs resolves a mailbox name: exact (case-insensitive) first, then
// the last component of hierarchical names ("Sent Mail" → "[Gmail]/Sent Mail").
func (e *Engine) mailboxIDs(ctx context.Context, name string) ([]int64, error) {
	rows, err := e.db.QueryContext(ctx, "SELECT id, name FROM mailboxes")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var exact, tail []int64
	var all []string
	lname := strings.ToLower(name)
	for rows.Next() {
		var id int64
		var n string
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		all = append(all, n)
		ln := strings.ToLower(n)
		switch {
		case ln == lname:
			exact = append(exact, id)
		case strings.HasSuffix(ln, "/"+lname) || strings.HasSuffix(ln, "."+lname):
			tail = append(tail, id)
		}
	}
	if len(exact) > 0 {
		return exact, nil
	}
	if len(tail) > 0 {
		return tail, nil
	}
	sort.Strings(all)
	if len(all) > 30 {
		all = append(all[:30], "…")
	}
	return nil, argErr("unknown mailbox %q; mailboxes: %s", name, strings.Join(all, ", "))
}

// substringCandidates returns the intersection of the candidate sets of the
// substring arguments, or nil when there are none. Strings of three or more
// characters use the trigram index (at most 500 newest matches each);
// shorter ones scan the 5,000 newest messages.
func (e *Engine) substringCandidates(ctx context.Context, q Query) (map[int64]bool, error) {
	fields := []struct{ col, expr, val string }{
		{"sender", "m.from_name || ' ' || m.from_addr", q.Sender},
		{"recipient", "m.to_text", q.Recipient},
		{"cc", "m.cc_text", q.Cc},
		{"subject", "m.subject", q.SubjectContains},
		{"body", "m.body", q.BodyContains},
	}
	var out map[int64]bool
	for _, fd := range fields {
		v := strings.TrimSpace(fd.val)
		if v == "" {
			continue
		}
		ids, err := e.substring(ctx, fd.col, fd.expr, v)
		if err != nil {
			return nil, err
		}
		next := make(map[int64]bool, len(ids))
		for _, id := range ids {
			if out == nil || out[id] {
				next[id] = true
			}
		}
		out = next
	}
	return out, nil
}

func (e *Engine) substring(ctx context.Context, col, expr, v string) ([]int64, error) {
	var rows *sql.Rows
	var err error
	if utf8.RuneCountInString(v) >= 3 {
		match := col + ` : "` + strings.ReplaceAll(v, `"`, `""`) + `"`
		rows, err = e.db.QueryContext(ctx, "SELECT rowid FROM message_tri WHERE message_tri MATCH ? ORDER BY rowid DESC LIMIT ?", match, substringPool)
	} else {
		rows, err = e.db.QueryContext(ctx, fmt.Sprintf(`SELECT id FROM (SELECT m.id, %s AS v FROM messages m WHERE m.deleted_at IS NULL ORDER BY m.id DESC LIMIT ?)
			WHERE instr(lower(v), lower(?)) > 0 LIMIT ?`, expr), shortScanWindow, v, substringPool)
	}
	if err != nil {
		return nil, fmt.Errorf("substring search on %s: %w", col, err)
	}
	return scanIDs(rows)
}

func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// stopwords are dropped from the lexical query: they match nearly every
// message and would only slow ranking down. The set is built on first use.
var stopwords = sync.OnceValue(func() map[string]bool {
	return wordSet(`a an and are as at be by for from has have i in is it my of on or that the this to was were with
	about me you your our we
	il lo la le gli i un una di da del della dei delle e ed in con su per tra fra che non mi ti ci si
	der die das und ist ein eine mit von zu den dem des
	le la les un une des et du de en pour avec`)
})

func wordSet(words string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(words) {
		out[w] = true
	}
	return out
}

// lexicalQuery quotes every meaningful term (so user text is never FTS5
// syntax) and ORs them: BM25 ranks messages holding more of them first.
func lexicalQuery(text string) string {
	var terms []string
	for _, t := range hybrid.Terms(text) {
		if !stopwords()[t] {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return hybrid.FTSQuery(text, true, 0)
	}
	return hybrid.FTSQuery(strings.Join(terms, " "), true, 0)
}

// lexical returns up to 50 FTS5 candidates satisfying the filters, best first.
func (e *Engine) lexical(ctx context.Context, text string, f *filter) ([]int64, error) {
	match := lexicalQuery(text)
	if match == "" {
		return nil, nil
	}
	rows, err := e.db.QueryContext(ctx, `SELECT fts.rowid FROM message_fts fts JOIN messages m ON m.id = fts.rowid
		WHERE message_fts MATCH ? AND `+f.sql()+` ORDER BY fts.rank LIMIT ?`, append(append([]any{match}, f.args...), lexicalPool)...)
	if err != nil {
		return nil, fmt.Errorf("lexical search: %w", err)
	}
	return scanIDs(rows)
}

// semantic embeds the query and returns up to 50 nearest messages that pass
// the filters, in KNN order. When embeddings are off or fail it returns no
// candidates and says why, and the search goes on lexically.
func (e *Engine) semantic(ctx context.Context, text string, f *filter) ([]int64, string, string) {
	if e.embedder == nil {
		return nil, "off", "semantic search is off (" + e.semOff + "); results are lexical and substring matches only"
	}
	if _, err := e.vec.refresh(ctx, e.db); err != nil {
		return nil, "unavailable", "semantic search unavailable (" + err.Error() + "); results are lexical only"
	}
	if n, _ := e.vec.size(); n == 0 {
		return nil, "unavailable", "no message has been embedded yet (run 'steward mail embed'); results are lexical only"
	}
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	vecs, err := e.embedder.Embed(ectx, []string{text})
	if err != nil || len(vecs) != 1 || !mail.ValidVector(vecs[0]) {
		reason := "the endpoint returned no vector"
		if err != nil {
			reason = err.Error()
		}
		return nil, "unavailable", "semantic search unavailable (" + reason + "); results are lexical only"
	}
	hits, err := e.vec.search(vecs[0], vectorPool)
	if err != nil {
		return nil, "unavailable", "semantic search unavailable (" + err.Error() + "); results are lexical only"
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.id
	}
	ok, err := e.filterIDs(ctx, ids, f)
	if err != nil {
		return nil, "unavailable", "semantic search unavailable (" + err.Error() + ")"
	}
	kept := ids[:0]
	for _, id := range ids {
		if ok[id] {
			kept = append(kept, id)
		}
	}
	return kept, "used", ""
}

// filterIDs returns which ids pass the filters.
func (e *Engine) filterIDs(ctx context.Context, ids []int64, f *filter) (map[int64]bool, error) {
	if len(ids) == 0 {
		return map[int64]bool{}, nil
	}
	rows, err := e.db.QueryContext(ctx, "SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND "+f.sql(),
		append([]any{idJSON(ids)}, f.args...)...)
	if err != nil {
		return nil, fmt.Errorf("apply filters: %w", err)
	}
	got, err := scanIDs(rows)
	out := make(map[int64]bool, len(got))
	for _, id := range got {
		out[id] = true
	}
	return out, err
}

// browse orders the newest (or largest) 500 messages that pass the filters
// and, when given, the substring candidates; it returns one row more when
// more match, so the caller can say the window was full.
func (e *Engine) browse(ctx context.Context, f *filter, cands map[int64]bool, sortBy string) ([]int64, error) {
	order := "m.id DESC"
	if sortBy == "size" {
		order = "m.size DESC, m.id DESC"
	}
	where, args := f.sql(), f.args
	if cands != nil {
		ids := make([]int64, 0, len(cands))
		for id := range cands {
			ids = append(ids, id)
		}
		where += " AND m.id IN (SELECT value FROM json_each(?))"
		args = append(append([]any{}, args...), idJSON(ids))
	}
	rows, err := e.db.QueryContext(ctx, "SELECT m.id FROM messages m WHERE "+where+" ORDER BY "+order+" LIMIT ?", append(args, browsePool+1)...)
	if err != nil {
		return nil, fmt.Errorf("browse mail: %w", err)
	}
	return scanIDs(rows)
}

// reorder sorts ranked ids by date or size, newest or largest first.
func (e *Engine) reorder(ctx context.Context, ids []int64, by string) ([]int64, error) {
	if by == "date" {
		out := append([]int64(nil), ids...)
		sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
		return out, nil
	}
	rows, err := e.db.QueryContext(ctx, "SELECT id FROM messages WHERE id IN (SELECT value FROM json_each(?)) ORDER BY size DESC, id DESC", idJSON(ids))
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// collapse keeps the best-ranked message of each thread.
func (e *Engine) collapse(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return ids, nil
	}
	rows, err := e.db.QueryContext(ctx, "SELECT id, coalesce(thread_id, -id) FROM messages WHERE id IN (SELECT value FROM json_each(?))", idJSON(ids))
	if err != nil {
		return nil, fmt.Errorf("collapse threads: %w", err)
	}
	defer rows.Close()
	thread := make(map[int64]int64, len(ids))
	for rows.Next() {
		var id, t int64
		if err := rows.Scan(&id, &t); err != nil {
			return nil, err
		}
		thread[id] = t
	}
	seen := map[int64]bool{}
	out := ids[:0:0]
	for _, id := range ids {
		t := thread[id]
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, id)
	}
	return out, rows.Err()
}

// summaries materialises ranked ids, in order.
func (e *Engine) summaries(ctx context.Context, ids []int64, offset int, text string) ([]Summary, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT m.id, m.subject, m.from_name, m.from_addr, m.date, a.name, b.name, m.thread_id, m.message_id,
		substr(m.body, 1, 20000), (SELECT path FROM message_paths p WHERE p.message_id = m.id ORDER BY p.mailbox_id = m.mailbox_id DESC LIMIT 1)
		FROM messages m JOIN accounts a ON a.id = m.account_id JOIN mailboxes b ON b.id = m.mailbox_id
		WHERE m.id IN (SELECT value FROM json_each(?))`, idJSON(ids))
	if err != nil {
		return nil, fmt.Errorf("load summaries: %w", err)
	}
	defer rows.Close()
	byID := map[int64]Summary{}
	terms := queryTerms(text)
	for rows.Next() {
		var id, date int64
		var thread sql.NullInt64
		var subject, fromName, fromAddr, account, mailbox, msgID, body string
		var path sql.NullString
		if err := rows.Scan(&id, &subject, &fromName, &fromAddr, &date, &account, &mailbox, &thread, &msgID, &body, &path); err != nil {
			return nil, err
		}
		s := Summary{ID: strconv.FormatInt(id, 10), Subject: subject, Sender: formatSender(fromName, fromAddr),
			Date: time.Unix(date, 0).In(time.Local).Format(time.RFC3339), Account: account, Mailbox: mailbox,
			MailURL: MailURL(msgID, path.String), Snippet: body}
		if thread.Valid {
			s.ThreadID = strconv.FormatInt(thread.Int64, 10)
		}
		byID[id] = s
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(ids))
	for i, id := range ids {
		s, ok := byID[id]
		if !ok {
			continue // deleted between ranking and materialisation
		}
		limit := snippetRest
		if offset+i < snippetFirstRank {
			limit = snippetFirst
		}
		s.Snippet = Snippet(s.Snippet, terms, limit)
		out = append(out, s)
	}
	return out, nil
}

func formatSender(name, addr string) string {
	switch {
	case name == "":
		return addr
	case addr == "":
		return name
	}
	return name + " <" + addr + ">"
}

// MailURL is the deep link of a message: message://<Message-ID> (which Mail
// on macOS opens), or a file:// URL of its file when it has no Message-ID.
func MailURL(messageID, path string) string {
	if messageID != "" {
		return "message://" + url.PathEscape("<"+messageID+">")
	}
	if path != "" {
		return (&url.URL{Scheme: "file", Path: path}).String()
	}
	return ""
}

func queryTerms(text string) []string {
	var out []string
	for _, t := range hybrid.Terms(text) {
		if !stopwords()[t] && len(t) > 1 {
			out = append(out, t)
		}
	}
	return out
}

// Snippet returns at most limit characters of body with white space
// collapsed, starting shortly before the first query term when one occurs.
func Snippet(body string, terms []string, limit int) string {
	body = strings.Join(strings.Fields(body), " ")
	runes := []rune(body)
	if len(runes) <= limit {
		return body
	}
	start := 0
	if len(terms) > 0 {
		folded := []rune(hybrid.Fold(body))
		if len(folded) == len(runes) {
			fs := string(folded)
			best := -1
			for _, t := range terms {
				if i := strings.Index(fs, t); i >= 0 && (best < 0 || i < best) {
					best = i
				}
			}
			if best >= 0 {
				pos := utf8.RuneCountInString(fs[:best])
				start = max(0, pos-limit/4)
			}
		}
	}
	end := min(len(runes), start+limit)
	if end-start < limit {
		start = max(0, end-limit)
	}
	out := string(runes[start:end])
	if start > 0 {
		out = "…" + string(runes[start+1:end])
	}
	if end < len(runes) {
		out = string([]rune(out)[:len([]rune(out))-1]) + "…"
	}
	return out
}
