// Package redact implements the audit redaction rules of the spec ("Audit
// Trail"): before an event payload, summary or source reference is stored in
// the audit ledger, secret-like keys are replaced, full-text fields become
// short snippets, other strings are bounded, recognisable credentials inside
// strings are masked, and arrays, objects and nesting are capped.
//
// It is a heuristic, not universal secret detection: unrecognised secret
// formats and sensitive prose can survive. It is pure (no I/O, no state), and
// its output is a fixed point: redacting an already redacted value changes
// nothing.
//
// # Rules, in the order they apply
//
// Keys (object keys in Value, and names in inline assignments inside
// strings) are compared case- and separator-insensitively: "X-Api-Key",
// "api_key" and "apiKey" all normalise to "apikey". A key is secret-like when
// (see IsSecretKey):
//
//   - it contains password, passwd, passphrase, secret, apikey, accesskey,
//     privatekey, privkey, signingkey, encryptionkey, masterkey, credential,
//     authorization, cookie, sessionid, sessionkey, connectionstring;
//   - or it ends with token, auth, session or pwd (so "accessToken" and
//     "basicAuth" match but "max_tokens" and "author" do not);
//   - or it is exactly pass, pin, otp, jwt or sid.
//
// In URL query strings (after ? or &) the names key, code and ticket, and
// names containing signature or ending in sig (X-Amz-Signature), are secret
// as well.
//
// The value of a secret-like key is replaced by "[REDACTED]" whatever its
// type. The values of the full-text keys body, bodytext, html, htmlbody,
// content and markdown become snippets of at most SnippetLen characters (for
// a non-string value, every string inside it does). Every other string is
// bounded to MaxStringLen characters. Characters are Unicode code points;
// UTF-8 is never split, and invalid UTF-8 is replaced by U+FFFD first.
//
// Inside every string, before any snippet or bound is taken (so a secret
// straddling the cut is never half kept), these are masked:
//
//   - PEM private keys (BEGIN … PRIVATE KEY through END, or to the end of the
//     text when the END line is missing) → "[REDACTED:private-key]";
//   - inline assignments of a secret-like name: password=…, API_KEY: …,
//     "token": "…", Authorization: Bearer …, token := …; a quoted value is
//     masked up to its closing quote (or to the end when unclosed); the value
//     of an Authorization, Proxy-Authorization or *cookie* header up to the
//     end of the line (or the quote that opened the header, as in
//     curl -H 'Authorization: …'); a bare value up to whitespace or one of
//     , ; & " ' < > (and # in a query string), "Bearer x"/"Basic x" style
//     values whole;
//   - sensitive URL query parameters (?access_token=, &key=, &signature=, …),
//     by the same rule;
//   - URL credentials: the whole userinfo of scheme://user:pass@host;
//   - Bearer tokens ("Bearer [REDACTED]");
//   - sk- and sk_ API keys (OpenAI, Anthropic, Stripe style), and the
//     recognisable token formats of GitHub (ghp_…, github_pat_…), Slack
//     (xox?-…), AWS access key ids (AKIA…, ASIA…), Google API keys (AIza…)
//     and JSON Web Tokens (eyJ….eyJ….…).
//
// A cut string ends with "…" and is at most the limit long including it; a
// cut never splits a "[REDACTED…]" placeholder. Masking reads the first
// limit+4096 characters of a long string, so a multi-megabyte body costs no
// more than a short one.
//
// Caps: an array keeps at most MaxItems entries and an object at most
// MaxKeys keys; when more are present, the last entry kept is a marker that
// says how many were dropped (an array's last element "[N more items
// dropped]", an object's key "[truncated]" with "N keys dropped"). Objects are
// cut in the sorted order of their redacted keys. Containers nested deeper than MaxDepth (the value
// passed to Value is depth 1) are replaced by a string saying what was
// dropped. Object keys are themselves redacted as strings; two keys that
// become equal are merged (the first in sorted order wins, the other counts as
// dropped).
package redact

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Limits of the redaction, in characters (Unicode code points) or entries.
const (
	// SnippetLen bounds the full-text fields (body, html, content, …).
	SnippetLen = 120
	// MaxStringLen bounds every other string.
	MaxStringLen = 600
	// MaxItems is the most entries an array keeps, marker included.
	MaxItems = 50
	// MaxKeys is the most keys an object keeps, marker included.
	MaxKeys = 100
	// MaxDepth is the deepest nesting kept; the top-level value is depth 1.
	MaxDepth = 8
)

// Markers written in place of removed content.
const (
	// Mask replaces a secret value.
	Mask = "[REDACTED]"
	// MaskPrivateKey replaces a PEM private key block.
	MaskPrivateKey = "[REDACTED:private-key]"
	// Ellipsis ends a cut string.
	Ellipsis = "…"
	// TruncatedKey is the object key whose value says how many keys were dropped.
	TruncatedKey = "[truncated]"
)

// scanWindow is how far past a limit a long string is read before masking:
// masking must see a secret whole to hide it, but a multi-megabyte mail body
// should not cost a full regexp pass when only its first 120 characters are
// kept. Every pattern still masks a secret cut by the window (an unclosed
// quote or PEM block runs to the end), so only a secret that starts before the
// limit and is longer than this window could be half-missed.
const scanWindow = 4096

// String masks the secrets in s and bounds it to MaxStringLen characters.
// Summaries and source references go through it before storage.
func String(s string) string { return bound(s, MaxStringLen) }

// Snippet masks the secrets in s and cuts it to a SnippetLen-character
// snippet, as for the full-text fields.
func Snippet(s string) string { return bound(s, SnippetLen) }

func bound(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return cut(maskSecrets(prefix(s, limit+scanWindow)), limit)
}

// prefix returns the first n characters of s (no ellipsis).
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// cut bounds s to limit characters including a trailing ellipsis, never
// splitting a mask placeholder: a half placeholder followed by "…" could be
// mistaken for a value still to mask on a second pass.
func cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	end := len(prefix(s, limit-1))
	if k := strings.LastIndexByte(s[:end], '['); k >= 0 && strings.HasPrefix(s[k:], "[REDACTED") {
		if close := strings.IndexByte(s[k:], ']'); close < 0 || k+close >= end {
			end = k
		}
	}
	return s[:end] + Ellipsis
}

var (
	pemRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z)`)
	})
	urlCredRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#@"'<>]+@`) })
	bearerRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]+=*`) })
	skRe      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(sk[-_])[A-Za-z0-9_\-]{16,}`) })
	tokenRe   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|A[KS]IA[0-9A-Z]{16,}|AIza[0-9A-Za-z_\-]{30,}|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)`)
	})
)

// maskSecrets applies the string masks. PEM blocks go first so that an
// assignment such as "private_key: -----BEGIN…" cannot mask only the header
// and leave the key body; assignments go before the Bearer pattern so that a
// whole "Authorization: Bearer x" value becomes one mask.
func maskSecrets(s string) string {
	// The substring checks skip regexps that cannot match: Go's regexp
	// engine costs about a microsecond per hundred bytes even on a miss.
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = pemRe().ReplaceAllLiteralString(s, MaskPrivateKey)
	}
	s = maskAssignments(s)
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = urlCredRe().ReplaceAllString(s, "${1}"+Mask+"@")
	}
	if containsFold(s, "bearer") {
		s = bearerRe().ReplaceAllString(s, "${1}"+Mask)
	}
	if strings.Contains(s, "sk-") || strings.Contains(s, "sk_") {
		s = skRe().ReplaceAllString(s, "${1}"+Mask)
	}
	for _, p := range tokenPrefixes {
		if strings.Contains(s, p) {
			s = tokenRe().ReplaceAllLiteralString(s, Mask)
			break
		}
	}
	return s
}

// tokenPrefixes are the literal starts of the tokenRe formats.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA", "ASIA", "AIza", "eyJ"}

// containsFold reports whether s contains the lowercase ASCII word sub in
// any letter case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// maskAssignments masks the value of every name=value / name: value pair
// whose name is secret-like. It walks the separators by hand: a regexp
// restarted after each of the many "word:" pairs in prose goes quadratic.
func maskAssignments(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		sepEnd := separatorEnd(s, i)
		if sepEnd < 0 {
			continue
		}
		nameStart, nameEnd := nameBefore(s, i)
		if nameStart == nameEnd {
			i = sepEnd - 1
			continue
		}
		name := normalizeKey(s[nameStart:nameEnd])
		query := nameStart > 0 && strings.IndexByte("?&;", s[nameStart-1]) >= 0
		if !IsSecretKey(name) && !(query && isQuerySecret(name)) {
			i = sepEnd - 1
			continue
		}
		valStart := sepEnd
		for valStart < len(s) && (s[valStart] == ' ' || s[valStart] == '\t') {
			valStart++
		}
		// A header value runs to the end of the line, or to the quote that
		// opened the header line ('Authorization: Bearer x' in a command).
		headerEnd := ""
		if name == "authorization" || name == "proxyauthorization" || strings.Contains(name, "cookie") {
			headerEnd = "\r\n"
			if nameStart > 0 && (s[nameStart-1] == '"' || s[nameStart-1] == '\'') && nameEnd == i {
				headerEnd += s[nameStart-1 : nameStart]
			}
		}
		from, to, next, bare := scanValue(s, valStart, headerEnd, query)
		if bare && isSecretName(s[from:to]) {
			// "token: API_KEY: x": the word after the separator is the
			// name of the next assignment, not this one's value.
			i = sepEnd - 1
			continue
		}
		i = next - 1
		if from == to || alreadyMasked(s[from:to]) {
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(Mask)
		last = to
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// separatorEnd returns the end of the assignment separator (: = := => ==)
// that starts at i, or -1.
func separatorEnd(s string, i int) int {
	switch s[i] {
	case ':':
		if i+1 < len(s) && s[i+1] == '=' {
			return i + 2
		}
		return i + 1
	case '=':
		if i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '=') {
			return i + 2
		}
		return i + 1
	}
	return -1
}

// nameBefore finds the name that a separator at i assigns: a letter then
// letters, digits, _ . or -, optionally followed by a closing quote (which
// may be escaped, as in JSON inside a string) and spaces or tabs.
func nameBefore(s string, i int) (start, end int) {
	j := i
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
	}
	for j > 0 && s[j-1] == '\\' {
		j--
	}
	end = j
	for j > 0 && isNameByte(s[j-1]) {
		j--
	}
	for j < end && !isLetter(s[j]) {
		j++
	}
	return j, end
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isNameByte(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// scanValue finds the value that starts at p: [from, to) is what to mask,
// next is where scanning resumes and bare says it was an unquoted word. A
// non-empty headerEnd makes an unquoted value run to the first of its bytes.
func scanValue(s string, p int, headerEnd string, query bool) (from, to, next int, bare bool) {
	q := p
	for q < len(s) && s[q] == '\\' {
		q++
	}
	if q < len(s) && (s[q] == '"' || s[q] == '\'') {
		quote, escaped := s[q], q > p
		from = q + 1
		for i := from; i < len(s); i++ {
			if s[i] != quote {
				continue
			}
			if escaped { // \"value\" inside JSON text: the closing quote is escaped too
				return from, trimBackslashes(s, from, i), i + 1, false
			}
			if s[i-1] != '\\' {
				return from, i, i + 1, false
			}
		}
		return from, len(s), len(s), false
	}
	if headerEnd != "" {
		end := strings.IndexAny(s[p:], headerEnd)
		if end < 0 {
			end = len(s) - p
		}
		return p, trimBackslashes(s, p, p+end), p + end, false
	}
	end := bareEnd(s, p, query)
	// "Bearer xyz" / "Basic xyz": the credential is the word after the scheme.
	if scheme := strings.ToLower(s[p:end]); authSchemes[scheme] {
		ws := end
		for ws < len(s) && (s[ws] == ' ' || s[ws] == '\t') {
			ws++
		}
		if ws > end {
			if e2 := bareEnd(s, ws, query); e2 > ws {
				end = e2
			}
		}
	}
	return p, end, end, true
}

// trimBackslashes moves end back over the backslashes that escape the quote
// at end.
func trimBackslashes(s string, from, end int) int {
	for end > from && s[end-1] == '\\' {
		end--
	}
	return end
}

// isSecretName reports whether v is exactly a secret-like name followed by
// an assignment separator.
func isSecretName(v string) bool {
	for i := max(len(v)-2, 0); i < len(v); i++ { // two-byte separators first
		if separatorEnd(v, i) == len(v) {
			start, end := nameBefore(v, i)
			return start == 0 && end > start && IsSecretKey(v[start:end])
		}
	}
	return false
}

func bareEnd(s string, p int, query bool) int {
	for i, r := range s[p:] {
		if unicode.IsSpace(r) || strings.ContainsRune(`,;&"'<>`, r) || (query && r == '#') {
			return p + i
		}
	}
	return len(s)
}

var authSchemes = map[string]bool{"bearer": true, "basic": true, "digest": true, "token": true, "negotiate": true, "ntlm": true}

// alreadyMasked reports whether a value is a mask left by an earlier pass,
// possibly followed or replaced by the ellipsis of a cut.
func alreadyMasked(v string) bool {
	v = strings.TrimSuffix(v, Ellipsis)
	return v == "" || v == Mask || v == MaskPrivateKey
}

var (
	secretContains = []string{"password", "passwd", "passphrase", "secret", "apikey", "accesskey", "privatekey", "privkey",
		"signingkey", "encryptionkey", "masterkey", "credential", "authorization", "cookie", "sessionid", "sessionkey",
		"connectionstring"}
	secretSuffixes = []string{"token", "auth", "session", "pwd"}
	secretExact    = map[string]bool{"pass": true, "pin": true, "otp": true, "jwt": true, "sid": true}
	querySecret    = map[string]bool{"key": true, "code": true, "ticket": true}
	fullTextKeys   = map[string]bool{"body": true, "bodytext": true, "html": true, "htmlbody": true, "content": true, "markdown": true}
)

// isQuerySecret reports the names that are secret only in a URL query
// string: API keys and the signatures of pre-signed URLs, which grant access
// on their own.
func isQuerySecret(n string) bool {
	return querySecret[n] || strings.Contains(n, "signature") || strings.HasSuffix(n, "sig")
}

// normalizeKey lowercases k and drops everything but letters and digits.
func normalizeKey(k string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, k)
}

// IsSecretKey reports whether an object key or assignment name is
// secret-like (see the package documentation for the list). Case and
// separators are ignored.
func IsSecretKey(key string) bool {
	n := normalizeKey(key)
	if secretExact[n] {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	for _, s := range secretContains {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// Value redacts a decoded JSON payload: map[string]any, []any, strings,
// numbers, booleans and nil, nested. Other Go values (structs, typed maps and
// slices, json.RawMessage) are first converted through encoding/json; an
// error becomes its message. The result holds only JSON types and always
// marshals; the input is not modified.
func Value(v any) any { return walk(v, 1, false) }

func walk(v any, depth int, snippet bool) any {
	switch x := v.(type) {
	case nil, bool, json.Number,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return x
	case float64:
		return finite(x)
	case float32:
		return finite(float64(x))
	case string:
		if snippet {
			return Snippet(x)
		}
		return String(x)
	case map[string]any:
		if depth > MaxDepth {
			return fmt.Sprintf("[object of %d keys dropped: nested deeper than %d]", len(x), MaxDepth)
		}
		return object(x, depth, snippet)
	case []any:
		if depth > MaxDepth {
			return fmt.Sprintf("[array of %d items dropped: nested deeper than %d]", len(x), MaxDepth)
		}
		return array(x, depth, snippet)
	case error:
		return walk(x.Error(), depth, snippet)
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil() {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("[unserializable %T dropped]", v)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return fmt.Sprintf("[unserializable %T dropped]", v)
	}
	return walk(generic, depth, snippet)
}

// finite keeps a float, except NaN and infinities, which JSON cannot carry.
func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return f
}

func array(x []any, depth int, snippet bool) []any {
	n := len(x)
	keep := n
	if n > MaxItems {
		keep = MaxItems - 1
	}
	out := make([]any, 0, min(n, MaxItems))
	for _, item := range x[:keep] {
		out = append(out, walk(item, depth+1, snippet))
	}
	if keep < n {
		out = append(out, fmt.Sprintf("[%d more items dropped]", n-keep))
	}
	return out
}

func object(x map[string]any, depth int, snippet bool) map[string]any {
	type entry struct {
		key  string // redacted key
		orig string
	}
	origs := make([]string, 0, len(x))
	for k := range x {
		origs = append(origs, k)
	}
	slices.Sort(origs)
	entries := make([]entry, 0, len(origs))
	seen := make(map[string]bool, len(origs))
	dropped := 0
	for _, k := range origs {
		rk := String(k)
		if seen[rk] {
			dropped++
			continue
		}
		seen[rk] = true
		entries = append(entries, entry{rk, k})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	if dropped > 0 || len(entries) > MaxKeys {
		// The marker takes a slot; a real key that already has its name is dropped.
		entries = slices.DeleteFunc(entries, func(e entry) bool {
			if e.key == TruncatedKey {
				dropped++
				return true
			}
			return false
		})
		if len(entries) > MaxKeys-1 {
			dropped += len(entries) - (MaxKeys - 1)
			entries = entries[:MaxKeys-1]
		}
	}
	out := make(map[string]any, len(entries)+1)
	for _, e := range entries {
		key := e.key
		switch {
		case IsSecretKey(e.orig) || IsSecretKey(key):
			out[key] = Mask
		case fullTextKeys[normalizeKey(key)]:
			out[key] = walk(x[e.orig], depth+1, true)
		default:
			out[key] = walk(x[e.orig], depth+1, snippet)
		}
	}
	if dropped > 0 {
		out[TruncatedKey] = fmt.Sprintf("%d keys dropped", dropped)
	}
	return out
}
