// Package contacts is Steward's contacts connector: it reads Apple
// AddressBook stores (.abcddb) and vCard files or vdir folders, merges the
// same person found in several sources (email first), keeps a local SQLite
// index with full-text search and optional vectors, and serves
// search_contacts, read_contact and resolve_recipient over MCP, plus the
// approved, journaled writes create_contact and update_contact (vCard 4.0
// files in vdir folders, or Contacts.app on macOS).
//
// Two identifiers must not be confused. The index's uid ("c-…") is a
// sidecar id: stable for a person across rebuilds and across the sources
// merged into it. The native person id (Apple's ZUNIQUEID, "…:ABPerson", or
// a vCard UID) belongs to one source record; Contacts.app and AppleScript
// need it to change that record. Every person keeps the native ids of all
// the records that contributed to it.
package contacts

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// Labeled is an email address or phone number with its label.
type Labeled struct {
	Label   string `json:"label,omitempty"`
	Value   string `json:"value"`
	Primary bool   `json:"primary,omitempty"`
}

// Address is a postal address.
type Address struct {
	Label    string `json:"label,omitempty"`
	Street   string `json:"street,omitempty"`
	City     string `json:"city,omitempty"`
	Region   string `json:"region,omitempty"`
	Postcode string `json:"postcode,omitempty"`
	Country  string `json:"country,omitempty"`
}

func (a Address) String() string {
	var parts []string
	for _, p := range []string{a.Street, strings.TrimSpace(a.Postcode + " " + a.City), a.Region, a.Country} {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

// Record is one contact as one source stores it.
type Record struct {
	Source   string `json:"source"`   // configured source name
	SourceID string `json:"sourceId"` // AddressBook source UUID, or the vCard file
	NativeID string `json:"nativeId"` // Apple ZUNIQUEID or vCard UID

	FullName   string    `json:"fullName,omitempty"`
	First      string    `json:"first,omitempty"`
	Middle     string    `json:"middle,omitempty"`
	Last       string    `json:"last,omitempty"`
	Prefix     string    `json:"prefix,omitempty"`
	Suffix     string    `json:"suffix,omitempty"`
	Nickname   string    `json:"nickname,omitempty"`
	Org        string    `json:"org,omitempty"`
	Department string    `json:"department,omitempty"`
	Title      string    `json:"title,omitempty"`
	Notes      string    `json:"notes,omitempty"`
	Emails     []Labeled `json:"emails,omitempty"`
	Phones     []Labeled `json:"phones,omitempty"`
	Addresses  []Address `json:"addresses,omitempty"`
	Birthday   string    `json:"birthday,omitempty"`
	Modified   time.Time `json:"modified,omitzero"`

	path string // file or store the record was read from (not stored)
}

// DisplayName is the best human name of the record.
func (r *Record) DisplayName() string {
	if n := strings.TrimSpace(r.FullName); n != "" {
		return n
	}
	if n := strings.TrimSpace(strings.Join(nonEmpty(r.Prefix, r.First, r.Middle, r.Last, r.Suffix), " ")); n != "" {
		return n
	}
	for _, v := range []string{r.Nickname, r.Org} {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	if len(r.Emails) > 0 {
		return r.Emails[0].Value
	}
	return ""
}

// PrimaryEmail is the address marked primary, else the first one, normalised.
func (r *Record) PrimaryEmail() string {
	for _, e := range r.Emails {
		if e.Primary {
			return NormalizeEmail(e.Value)
		}
	}
	if len(r.Emails) > 0 {
		return NormalizeEmail(r.Emails[0].Value)
	}
	return ""
}

// empty reports a record with nothing to index.
func (r *Record) empty() bool {
	return r.DisplayName() == "" && len(r.Phones) == 0
}

// NormalizeEmail lowercases an address and strips a "mailto:" prefix and
// surrounding space or angle brackets.
func NormalizeEmail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 7 && strings.EqualFold(s[:7], "mailto:") {
		s = s[7:]
	}
	return strings.ToLower(strings.Trim(s, " <>\t"))
}

// normalizePhone keeps the digits and a leading '+', for de-duplication.
func normalizePhone(s string) string {
	var b strings.Builder
	for i, r := range strings.TrimSpace(strings.TrimPrefix(s, "tel:")) {
		if unicode.IsDigit(r) || r == '+' && i == 0 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cleanLabel turns Apple's "_$!<Work>!$_" and vCard TYPE lists into a
// plain lowercase label.
func cleanLabel(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "_$!<") && strings.HasSuffix(s, ">!$_") {
		s = s[4 : len(s)-4]
	}
	return strings.ToLower(s)
}

func nonEmpty(v ...string) []string {
	var out []string
	for _, s := range v {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// RecordError is a problem with one record or file; the rest of the source
// still indexes.
type RecordError struct {
	Path string
	Err  error
}

func (e RecordError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }

// SourceResult is what one source yielded.
type SourceResult struct {
	Records []Record
	Errors  []RecordError
	// FailedPaths are files that could not be read at all; records indexed
	// earlier from them are kept.
	FailedPaths []string
}

// Whole-source errors, wrapped with advice for the user.
var (
	// ErrPermission means the OS refused access (on macOS: Full Disk Access).
	ErrPermission = localsource.ErrPermission
	// ErrLocked means another process holds the database lock.
	ErrLocked = localsource.ErrLocked
	// ErrMissing means the configured path does not exist.
	ErrMissing = localsource.ErrMissing
)
