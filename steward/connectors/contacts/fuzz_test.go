package contacts

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
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

// FuzzEditCard rewrites the card with UID u1 in arbitrary input: when it
// succeeds the result must still parse, hold that card with exactly the new
// email, and fold every line at 75 octets.
func FuzzEditCard(f *testing.F) {
	f.Add([]byte("BEGIN:VCARD\nVERSION:3.0\nUID:u1\nFN:A\nitem1.EMAIL:a@x.org\nitem1.X-ABLabel:home\nEND:VCARD\n"), "Boss; \"big\"")
	f.Add([]byte("BEGIN:VCARD\r\nUID:urn:uuid:u1\r\nNOTE:long\r\n  folded\r\nEND:VCARD\r\n"), "è")
	f.Fuzz(func(t *testing.T, data []byte, title string) {
		emails := []Labeled{{Label: "work", Value: "new@x.org"}}
		out, err := editCard(data, "u1", Contact{Title: &title, Emails: &emails}, time.Unix(0, 0))
		if err != nil {
			return
		}
		for _, l := range bytes.Split(out, []byte("\r\n")) {
			if len(l) > 75 {
				t.Fatalf("line of %d octets: %q", len(l), l)
			}
		}
		recs, _ := ParseVCards(out)
		found := slices.ContainsFunc(recs, func(r Record) bool {
			return r.NativeID == "u1" && len(r.Emails) == 1 && r.Emails[0].Value == "new@x.org"
		})
		if !found {
			t.Fatalf("the edited card is gone or kept other emails: %+v\n%s", recs, out)
		}
	})
}
