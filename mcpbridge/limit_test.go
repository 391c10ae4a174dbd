package mcpbridge

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineLimiter(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      int
		tooLarge bool
	}{
		{"lines within", "abcd\nefgh\n", 4, false},
		{"unterminated last line within", "abcd\nefgh", 4, false},
		{"second line over", "abcd\nefghi\nxy\n", 4, true},
		{"first line over", "abcdefgh\n", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte per Read (the count must carry across reads) and
			// whole-buffer reads give the same verdict.
			for _, r := range []io.Reader{iotest.OneByteReader(strings.NewReader(tc.in)), strings.NewReader(tc.in)} {
				hit := false
				got, err := io.ReadAll(&lineLimiter{r: io.NopCloser(r), max: tc.max, onHit: func() { hit = true }})
				var mte *MessageTooLargeError
				if errors.As(err, &mte) != tc.tooLarge || hit != tc.tooLarge || !strings.HasPrefix(tc.in, string(got)) {
					t.Fatalf("read %q, err %v, hit %v", got, err, hit)
				}
				if !tc.tooLarge && string(got) != tc.in {
					t.Fatalf("read %q, want all of it", got)
				}
				// No over-long line is ever completed.
				for _, line := range strings.SplitAfter(string(got), "\n") {
					if strings.HasSuffix(line, "\n") && len(line)-1 > tc.max {
						t.Fatalf("passed on the whole over-long line %q", line)
					}
				}
			}
		})
	}
}
