package tools

import (
	"regexp"
	"slices"
	"strings"
)

// credentialPatterns are the finite credential families redacted from text
// shown to models and operators. This is a defence, not a guarantee.
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{12,}`),
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
	regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
}

// NewRedactor returns a function that replaces the given secrets (values
// of at least 6 bytes) and known credential patterns with [redacted].
func NewRedactor(secrets []string) func(string) string {
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
				text = strings.ReplaceAll(text, s, "[redacted]")
			}
		}
		for _, re := range credentialPatterns {
			text = re.ReplaceAllStringFunc(text, func(m string) string {
				if sub := re.FindStringSubmatch(m); len(sub) > 1 {
					return sub[1] + "[redacted]"
				}
				return "[redacted]"
			})
		}
		return text
	}
}
