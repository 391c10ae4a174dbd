package localsource

import (
	"crypto/rand"
	"encoding/hex"
	"unicode/utf8"
)

// NewUUID returns a random RFC 4122 version 4 UUID in lower case: the
// identifier of a new calendar event or contact, and a request's name.
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// FoldLine folds one iCalendar or vCard content line (without its line
// break) into lines of at most 75 octets joined by CRLF and a space (RFC
// 5545 3.1, RFC 6350 3.2), never splitting a UTF-8 sequence.
func FoldLine(line string) string {
	if len(line) <= 75 {
		return line
	}
	out := make([]byte, 0, len(line)+len(line)/37)
	limit := 75
	for len(line) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		out = append(out, line[:cut]...)
		out = append(out, "\r\n "...)
		line = line[cut:]
		limit = 74 // the leading space counts
	}
	return string(append(out, line...))
}
