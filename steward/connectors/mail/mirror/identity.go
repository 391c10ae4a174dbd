package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentstack/agentstack/search"
)

// Identity returns a message's stable identity: its RFC Message-ID, or, when
// it has none, a deterministic surrogate from the account, the mailbox and
// the file's key within it (the Maildir unique name without flags, or the
// .emlx number), so that a flag change that renames the file keeps the
// identity.
func Identity(messageID, account, mailbox, fileKey string) string {
	if id := strings.TrimSpace(messageID); id != "" {
		return id
	}
	sum := sha256.Sum256([]byte(account + "\x00" + mailbox + "\x00" + fileKey))
	return "local:" + hex.EncodeToString(sum[:16])
}

// replyPrefix matches the reply and forward markers mail clients put before a
// subject, in the languages Steward's users write in, with counters ("Re[2]:")
// and list tags ("[team] ").
var replyPrefix = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^\s*(?:(?:re|fwd?|aw|wg|sv|vs|tr|rif|r|i|antw|réf|ref|enc|res|odp|vl)\s*(?:\[\d+\]|\(\d+\))?\s*[:：]|\[[^\]]{1,40}\])\s*`)
})

// NormalizeSubject strips reply/forward prefixes and list tags, folds case
// and accents and collapses white space, so that "Re: [team] Fwd: Budget"
// and "budget" match.
func NormalizeSubject(s string) string {
	for i := 0; i < 20; i++ {
		loc := replyPrefix().FindStringIndex(s)
		if loc == nil || loc[1] == 0 {
			break
		}
		s = s[loc[1]:]
	}
	return strings.Join(strings.Fields(search.Fold(s)), " ")
}

// EmbedSource builds the text an embedding is made from: the subject, a
// blank line and the body, cut to maxChars characters.
func EmbedSource(subject, body string, maxChars int) string {
	s := subject + "\n\n" + body
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	n := 0
	for i := range s {
		if n == maxChars {
			return s[:i]
		}
		n++
	}
	return s
}

// SourceHash is the SHA-256 of an embedding source text.
func SourceHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

func contentHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
