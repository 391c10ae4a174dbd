package llm

import "time"

// ParseRetryAfter reads a Retry-After header value, delay seconds or an
// HTTP date, as a wait from now: 0 when it is absent, malformed or past.
func ParseRetryAfter(v string, now time.Time) time.Duration { return retryAfter(v, now) }
