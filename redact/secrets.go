package redact

import (
	"regexp"
	"slices"
	"strings"
)

// credentialPatterns are the finite credential families Secrets masks in
// text shown to models and operators. This is a defence, not a guarantee.
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{12,}`),
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
	regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
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
		for _, re := range credentialPatterns {
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
