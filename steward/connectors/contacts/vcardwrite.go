package contacts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// ProductID is the PRODID of the vCards Steward writes.
const ProductID = "-//Steward//Steward contacts//EN"

var valueEscaper = strings.NewReplacer(`\`, `\\`, ",", `\,`, ";", `\;`, "\r\n", `\n`, "\n", `\n`, "\r", `\n`)

// escape escapes a vCard text value (RFC 6350 3.4).
func escape(s string) string { return valueEscaper.Replace(s) }

// structured joins escaped components with ';'.
func structured(parts ...string) string {
	for i, p := range parts {
		parts[i] = escape(p)
	}
	return strings.Join(parts, ";")
}

// typeParam renders a label as a TYPE parameter (letters, digits and dashes
// only; anything else is dropped rather than breaking the line).
func typeParam(label string, primary bool) string {
	var b strings.Builder
	for _, r := range strings.ToLower(label) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		}
	}
	out := ""
	if b.Len() > 0 {
		out = ";TYPE=" + b.String()
	}
	if primary {
		out += ";PREF=1"
	}
	return out
}

// managedLines renders the properties a write sets, by property name.
func managedLines(c Contact) map[string][]string {
	m := map[string][]string{}
	set := func(name string, v *string, render func(string) string) {
		if v == nil {
			return
		}
		m[name] = nil
		if *v != "" {
			m[name] = []string{render(*v)}
		}
	}
	set("FN", c.FullName, func(v string) string { return "FN:" + escape(v) })
	if c.First != nil || c.Last != nil {
		m["N"] = []string{"N:" + structured(deref(c.Last), deref(c.First), "", "", "")}
	}
	set("NICKNAME", c.Nickname, func(v string) string { return "NICKNAME:" + escape(v) })
	set("ORG", c.Organization, func(v string) string { return "ORG:" + escape(v) })
	set("TITLE", c.Title, func(v string) string { return "TITLE:" + escape(v) })
	set("NOTE", c.Notes, func(v string) string { return "NOTE:" + escape(v) })
	set("BDAY", c.Birthday, func(v string) string { return "BDAY:" + strings.ReplaceAll(v, "-", "") })
	if c.Emails != nil {
		m["EMAIL"] = []string{}
		for _, e := range *c.Emails {
			m["EMAIL"] = append(m["EMAIL"], "EMAIL"+typeParam(e.Label, e.Primary)+":"+escape(e.Value))
		}
	}
	if c.Phones != nil {
		m["TEL"] = []string{}
		for _, p := range *c.Phones {
			m["TEL"] = append(m["TEL"], "TEL"+typeParam(p.Label, p.Primary)+":"+escape(p.Value))
		}
	}
	if c.Addresses != nil {
		m["ADR"] = []string{}
		for _, a := range *c.Addresses {
			m["ADR"] = append(m["ADR"], "ADR"+typeParam(a.Label, false)+":"+structured("", "", a.Street, a.City, a.Region, a.Postcode, a.Country))
		}
	}
	return m
}

// managedOrder is the order new properties are written in.
var managedOrder = []string{"FN", "N", "NICKNAME", "ORG", "TITLE", "EMAIL", "TEL", "ADR", "BDAY", "NOTE"}

func rev(now time.Time) string { return "REV:" + now.UTC().Format("20060102T150405Z") }

// newCard renders a new vCard 4.0.
func newCard(uid string, c Contact, now time.Time) []byte {
	lines := []string{"BEGIN:VCARD", "VERSION:4.0", "PRODID:" + ProductID, "UID:urn:uuid:" + uid}
	m := managedLines(c)
	if _, ok := m["N"]; !ok {
		m["N"] = []string{"N:;;;;"} // N is required by vCard 3.0 readers
	}
	for _, name := range managedOrder {
		lines = append(lines, m[name]...)
	}
	lines = append(lines, rev(now), "END:VCARD")
	return foldCard(lines)
}

// foldCard joins lines with CRLF, folding each at 75 octets.
func foldCard(lines []string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(localsource.FoldLine(l) + "\r\n")
	}
	return b.Bytes()
}

// editCard replaces, in the card of uid within data, the properties the
// change sets (every line of that name, grouped or not, and the labels of
// groups left empty), updates REV, and keeps everything else (photos,
// custom fields, other cards in the file) as it was.
func editCard(data []byte, uid string, c Contact, now time.Time) ([]byte, error) {
	lines := unfold(string(data))
	start, end := -1, -1
	for i := 0; i < len(lines); i++ {
		p, ok := parseContentLine(lines[i])
		if !ok {
			continue
		}
		switch {
		case p.name == "BEGIN" && strings.EqualFold(p.value, "VCARD"):
			start = i
		case p.name == "UID" && start >= 0 && strings.TrimPrefix(p.text(), "urn:uuid:") == uid:
			for j := i; j < len(lines); j++ {
				if q, ok := parseContentLine(lines[j]); ok && q.name == "END" {
					end = j
					break
				}
			}
		}
		if end >= 0 {
			break
		}
	}
	if start < 0 || end < 0 {
		return nil, fmt.Errorf("no card with UID %s", uid)
	}
	m := managedLines(c)
	dropGroups := map[string]bool{}
	var body []string
	for _, l := range lines[start+1 : end] {
		p, ok := parseContentLine(l)
		if !ok {
			body = append(body, l)
			continue
		}
		if _, replaced := m[p.name]; replaced || p.name == "REV" {
			if p.group != "" {
				dropGroups[strings.ToUpper(p.group)] = true
			}
			continue
		}
		body = append(body, l)
	}
	kept := body[:0]
	for _, l := range body {
		if p, ok := parseContentLine(l); ok && p.group != "" && dropGroups[strings.ToUpper(p.group)] && strings.HasPrefix(p.name, "X-AB") {
			continue // the label of a replaced grouped property
		}
		kept = append(kept, l)
	}
	out := append([]string{}, lines[:start+1]...)
	out = append(out, kept...)
	for _, name := range managedOrder {
		out = append(out, m[name]...)
	}
	out = append(out, rev(now))
	out = append(out, lines[end:]...)
	return foldCard(out), nil
}

func jsonUnmarshal(s string, v any) error {
	if s == "" {
		return errors.New("empty")
	}
	return json.Unmarshal([]byte(s), v)
}
