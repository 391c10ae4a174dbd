package redact

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// credentialPatterns are the finite credential families Secrets masks in
// text shown to models and operators. This is a defence, not a guarantee.
// Each pattern runs only on text holding its literal marker: every operator
// response passes through here, and a regexp costs about a microsecond per
// hundred bytes even when it finds nothing. They compile on first use: every
// process of the binary links this package, most never mask anything.
var credentialPatterns = sync.OnceValue(func() []credentialPattern {
	return []credentialPattern{
		{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{12,}`), nil},
		{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), []string{"sk-"}},
		{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
		{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), []string{"AKIA"}},
		{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`), []string{"PRIVATE KEY-----"}},
	}
})

// credentialPattern is one credential family: its pattern and the literal
// markers that gate it.
type credentialPattern struct {
	re      *regexp.Regexp
	markers []string // at least one must occur (bearer: in any case)
}

// mayMatch reports whether text holds one of the markers; no markers means
// the case-insensitive word "bearer".
func mayMatch(text string, markers []string) bool {
	if markers == nil {
		// ASCII folding is exact here: no letter of "bearer" has a
		// non-ASCII case variant.
		for i := strings.IndexAny(text, "bB"); i >= 0 && i+6 <= len(text); {
			if strings.EqualFold(text[i:i+6], "bearer") {
				return true
			}
			j := strings.IndexAny(text[i+1:], "bB")
			if j < 0 {
				break
			}
			i += 1 + j
		}
		return false
	}
	for _, m := range markers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// SecretsMarker replaces what Secrets masks.
const SecretsMarker = "[redacted]"

// Secrets returns a function that replaces known secret values (of at least
// 6 bytes; a process's configured keys, say) and the common credential
// families (bearer tokens, sk- keys, GitHub tokens, AWS key ids, PEM
// private keys) in free text with SecretsMarker. Unlike Value and String it
// keeps the text's length and structure otherwise: it is for transcripts
// and tool output shown to models and operators, not for audit payloads.
func Secrets(secrets []string) func(string) string {
	var keep []string
	for _, s := range secrets {
		if s = strings.TrimSpace(s); len(s) >= 6 && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	// Longer secrets first, so a secret containing another is masked whole.
	slices.SortFunc(keep, func(a, b string) int { return len(b) - len(a) })
	return func(text string) string {
		for _, s := range keep {
			if strings.Contains(text, s) {
				text = strings.ReplaceAll(text, s, SecretsMarker)
			}
		}
		for _, p := range credentialPatterns() {
			if !mayMatch(text, p.markers) {
				continue
			}
			re := p.re
			text = re.ReplaceAllStringFunc(text, func(m string) string {
				if sub := re.FindStringSubmatch(m); len(sub) > 1 {
					return sub[1] + SecretsMarker
				}
				return SecretsMarker
			})
		}
		return text
	}
}
