package rrule

import (
	"testing"
	"time"
)

// FuzzParse checks that any text either fails to parse or yields a rule
// whose canonical form parses back to an equal rule, and that expanding it
// over a bounded window terminates without panicking.
func FuzzParse(f *testing.F) {
	f.Add("FREQ=DAILY")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if r.Expandable() == nil {
			again, err := Parse(r.Canonical())
			if err != nil {
				t.Fatalf("canonical form %q of %q does not parse: %v", r.Canonical(), s, err)
			}
			if !Equal(r, again) {
				t.Fatalf("canonical form %q of %q changes meaning: %q", r.Canonical(), s, again.Canonical())
			}
		}
		start := time.Date(2020, 2, 29, 9, 30, 0, 0, time.UTC)
		got, err := r.Between(start, start.Add(-time.Second), start.AddDate(2, 0, 0), 50)
		if err == nil && len(got) > 50 {
			t.Fatalf("%q: %d occurrences beyond the limit without ErrTooMany", s, len(got))
		}
	})
}
