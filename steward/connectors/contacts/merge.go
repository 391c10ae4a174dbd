package contacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
)

// SourceRef names one record that contributed to a person.
type SourceRef struct {
	Source   string `json:"source"`
	SourceID string `json:"sourceId"`
	// NativeID is the source's own person id (Apple ZUNIQUEID or vCard
	// UID): what Contacts.app and AppleScript need, never the sidecar uid.
	NativeID string `json:"nativeId"`
}

// Person is a de-duplicated contact.
type Person struct {
	// UID is the sidecar id: derived from the shared primary email (or, for
	// a person without email, from the one contributing record), so it is
	// stable across rebuilds.
	UID          string      `json:"uid"`
	Name         string      `json:"name"`
	First        string      `json:"first,omitempty"`
	Last         string      `json:"last,omitempty"`
	Nickname     string      `json:"nickname,omitempty"`
	Org          string      `json:"organization,omitempty"`
	Department   string      `json:"department,omitempty"`
	Title        string      `json:"title,omitempty"`
	Notes        string      `json:"notes,omitempty"`
	Emails       []Labeled   `json:"emails,omitempty"`
	Phones       []Labeled   `json:"phones,omitempty"`
	Addresses    []Address   `json:"addresses,omitempty"`
	Birthday     string      `json:"birthday,omitempty"`
	PrimaryEmail string      `json:"primaryEmail,omitempty"`
	Sources      []SourceRef `json:"sources"`
}

// Merge groups records that share a primary email (email-first
// de-duplication) and merges each group into one Person. Records without an
// email stay separate. The result is sorted by name then uid.
func Merge(records []Record) []Person {
	parent := make([]int, len(records))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	byEmail := map[string]int{}
	for i := range records {
		if e := records[i].PrimaryEmail(); e != "" {
			if j, ok := byEmail[e]; ok {
				parent[find(i)] = find(j)
			} else {
				byEmail[e] = i
			}
		}
	}
	groups := map[int][]int{}
	var roots []int
	for i := range records {
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]Person, 0, len(roots))
	for _, r := range roots {
		var recs []*Record
		for _, i := range groups[r] {
			recs = append(recs, &records[i])
		}
		out = append(out, mergeGroup(recs))
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Name != out[b].Name {
			return strings.ToLower(out[a].Name) < strings.ToLower(out[b].Name)
		}
		return out[a].UID < out[b].UID
	})
	return out
}

// richness scores how complete a record's identity fields are.
func richness(r *Record) int {
	n := 0
	for _, v := range []string{r.FullName, r.First, r.Last, r.Nickname, r.Org, r.Title} {
		if strings.TrimSpace(v) != "" {
			n++
		}
	}
	return n*10 + len(r.Emails) + len(r.Phones)
}

func mergeGroup(recs []*Record) Person {
	sort.SliceStable(recs, func(a, b int) bool {
		ra, rb := richness(recs[a]), richness(recs[b])
		if ra != rb {
			return ra > rb
		}
		ka := recs[a].Source + "\x00" + recs[a].SourceID + "\x00" + recs[a].NativeID
		kb := recs[b].Source + "\x00" + recs[b].SourceID + "\x00" + recs[b].NativeID
		return ka < kb
	})
	base := recs[0]
	p := Person{Name: base.DisplayName(), First: base.First, Last: base.Last, Nickname: base.Nickname, Org: base.Org,
		Department: base.Department, Title: base.Title, Birthday: base.Birthday, PrimaryEmail: base.PrimaryEmail()}
	first := func(get func(*Record) string) string {
		for _, r := range recs {
			if v := strings.TrimSpace(get(r)); v != "" {
				return v
			}
		}
		return ""
	}
	if p.Nickname == "" {
		p.Nickname = first(func(r *Record) string { return r.Nickname })
	}
	if p.Org == "" {
		p.Org = first(func(r *Record) string { return r.Org })
	}
	if p.Title == "" {
		p.Title = first(func(r *Record) string { return r.Title })
	}
	if p.Department == "" {
		p.Department = first(func(r *Record) string { return r.Department })
	}
	if p.Birthday == "" {
		p.Birthday = first(func(r *Record) string { return r.Birthday })
	}
	var notes []string
	seenEmail, seenPhone, seenAddr := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		if n := strings.TrimSpace(r.Notes); n != "" && !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
		for _, e := range r.Emails {
			k := NormalizeEmail(e.Value)
			if seenEmail[k] {
				continue
			}
			seenEmail[k] = true
			e.Primary = k == p.PrimaryEmail
			p.Emails = append(p.Emails, e)
		}
		for _, ph := range r.Phones {
			k := normalizePhone(ph.Value)
			if seenPhone[k] {
				continue
			}
			seenPhone[k] = true
			p.Phones = append(p.Phones, ph)
		}
		for _, a := range r.Addresses {
			k := strings.ToLower(a.String())
			if seenAddr[k] {
				continue
			}
			seenAddr[k] = true
			p.Addresses = append(p.Addresses, a)
		}
		p.Sources = append(p.Sources, SourceRef{Source: r.Source, SourceID: r.SourceID, NativeID: r.NativeID})
	}
	// The primary email leads the list.
	sort.SliceStable(p.Emails, func(a, b int) bool { return p.Emails[a].Primary && !p.Emails[b].Primary })
	p.Notes = strings.Join(notes, "\n\n")
	if p.Name == "" {
		p.Name = first(func(r *Record) string { return r.DisplayName() })
	}
	if p.PrimaryEmail != "" {
		p.UID = sidecarUID("email:" + p.PrimaryEmail)
	} else {
		p.UID = sidecarUID("record:" + base.Source + "/" + base.SourceID + "/" + base.NativeID)
	}
	return p
}

func sidecarUID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "c-" + hex.EncodeToString(h[:10])
}

// hash fingerprints everything stored for a person.
func (p *Person) hash() string {
	b, _ := json.Marshal(p)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
