package contacts

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseVCards checks that any input parses without panicking, that
// every returned record is valid UTF-8, and that merging the records keeps
// one person per distinct primary email.
func FuzzParseVCards(f *testing.F) {
	f.Add([]byte("BEGIN:VCARD\nFN:A\nEMAIL:a@x.org\nEND:VCARD\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, _ := ParseVCards(data)
		emails := map[string]bool{}
		for _, r := range recs {
			for _, s := range []string{r.FullName, r.First, r.Last, r.Org, r.Notes, r.NativeID} {
				if !utf8.ValidString(s) {
					t.Fatalf("invalid UTF-8 in %q", s)
				}
			}
			if e := r.PrimaryEmail(); e != "" {
				emails[e] = true
			}
			if strings.TrimSpace(r.NativeID) == "" {
				t.Fatal("record without native id")
			}
		}
		people := Merge(recs)
		withEmail := 0
		for _, p := range people {
			if p.PrimaryEmail != "" {
				withEmail++
			}
		}
		if withEmail != len(emails) {
			t.Fatalf("%d distinct primary emails merged into %d people", len(emails), withEmail)
		}
	})
}
