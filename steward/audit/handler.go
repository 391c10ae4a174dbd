package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler serves the ledger over HTTP:
//
//	GET /audit?actor=&type=&risk=&chat=&tool=&correlation=&from=&to=&q=&limit=&before=
//	GET /audit/{id}
//
// The list answers {"events": [...], "next": "<cursor>"}, newest first; pass
// next back as before for the following page. from (inclusive) and to
// (exclusive) are RFC 3339 times, limit is 1–500 (default 100), q is free
// text. An unknown, repeated or malformed parameter is answered 400 with
// {"error": "..."} saying what is wrong.
//
// Mount it on both patterns, "GET /audit" and "GET /audit/{id}" (the id is
// read with PathValue). It does no authentication: the host mounts it behind
// its token check.
func (l *Ledger) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		if id := r.PathValue("id"); id != "" {
			l.serveEvent(w, r, id)
			return
		}
		f, err := ParseFilter(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		page, err := l.Query(r.Context(), f)
		if err != nil {
			l.log.Error("audit query failed", "err", err)
			writeError(w, http.StatusInternalServerError, "the audit ledger could not be read")
			return
		}
		writeJSON(w, http.StatusOK, page)
	})
}

func (l *Ledger) serveEvent(w http.ResponseWriter, r *http.Request, raw string) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("event id %q is not a positive integer", truncate(raw)))
		return
	}
	e, err := l.Get(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no audit event %d", id))
	case err != nil:
		l.log.Error("audit get failed", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, "the audit ledger could not be read")
	default:
		writeJSON(w, http.StatusOK, e)
	}
}

// Parameter limits of the HTTP filter.
const (
	maxParamLen = 200 // chat ids, tool names, cursors
	maxTextLen  = 200 // characters of q
	maxTerms    = 10  // words of q
)

var (
	filterParams = []string{"actor", "type", "risk", "chat", "tool", "correlation", "from", "to", "q", "limit", "before"}
	labelRe      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,63}$`) })
)

// ParseFilter reads a Filter from /audit query parameters, refusing unknown,
// repeated or malformed ones with an error that names the parameter.
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	for name, vals := range q {
		if !slices.Contains(filterParams, name) {
			return f, fmt.Errorf("unknown parameter %q; use %s", truncate(name), strings.Join(filterParams, ", "))
		}
		if len(vals) > 1 {
			return f, fmt.Errorf("parameter %q given %d times; give it once", name, len(vals))
		}
	}
	get := func(name string) string { return strings.TrimSpace(q.Get(name)) }
	for _, p := range []struct {
		name  string
		dst   *string
		label bool
	}{
		{"actor", &f.Actor, true}, {"type", &f.Type, true}, {"chat", &f.ChatID, false},
		{"tool", &f.Tool, false}, {"correlation", &f.Correlation, false}, {"before", &f.Before, false},
	} {
		v := get(p.name)
		switch {
		case p.label && v != "" && !labelRe().MatchString(v):
			return f, fmt.Errorf("%s: %q is not a valid %s (letters, digits and _ . : - only, up to 64)", p.name, truncate(v), p.name)
		case len(v) > maxParamLen:
			return f, fmt.Errorf("%s: longer than %d bytes", p.name, maxParamLen)
		}
		*p.dst = v
	}
	if v := get("risk"); v != "" {
		f.Risk = Risk(v)
		if !f.Risk.Valid() {
			return f, fmt.Errorf("risk: %q is not one of low, medium, high", truncate(v))
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		v := get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, fmt.Errorf("%s: %q is not an RFC 3339 time such as 2026-11-30T09:00:00Z", p.name, truncate(v))
		}
		*p.dst = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, errors.New("from must be earlier than to")
	}
	f.Text = get("q")
	if n := utf8.RuneCountInString(f.Text); n > maxTextLen {
		return f, fmt.Errorf("q: %d characters; at most %d", n, maxTextLen)
	}
	if n := len(strings.Fields(f.Text)); n > maxTerms {
		return f, fmt.Errorf("q: %d words; at most %d", n, maxTerms)
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return f, fmt.Errorf("limit: %q is not a whole number from 1 to %d", truncate(v), MaxLimit)
		}
		f.Limit = n
	}
	if f.Before != "" {
		if _, err := parseCursor(f.Before); err != nil {
			return f, errors.New("before: not a cursor from a previous page's next")
		}
	}
	return f, nil
}

// truncate keeps echoed input short in error messages.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:39]) + "…"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
