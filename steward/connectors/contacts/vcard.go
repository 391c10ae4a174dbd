package contacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// MaxVCardFileBytes bounds one .vcf file; a larger one is a record error.
const MaxVCardFileBytes = 16 << 20

// maxVCardFiles bounds a folder walk.
const maxVCardFiles = 200_000

// ReadVCards reads a .vcf file or a folder of them (a vdir: the folder and
// its direct sub-folders). vCard 2.1 (bare TYPE parameters, quoted-printable,
// CHARSET), 3.0 and 4.0 are understood. A file or card that cannot be
// parsed is a record error; the rest still reads.
func ReadVCards(ctx context.Context, src SourceConfig) (*SourceResult, error) {
	info, err := os.Stat(src.Path)
	if err != nil {
		return nil, sourceError("read contacts", src.Path, err)
	}
	res := &SourceResult{}
	if !info.IsDir() {
		readVCardFile(res, src, src.Path, filepath.Base(src.Path))
		return res, nil
	}
	files, err := vcardFiles(src.Path)
	if err != nil {
		return nil, sourceError("read contacts folder", src.Path, err)
	}
	if len(files) > maxVCardFiles {
		return nil, fmt.Errorf("read contacts folder %s: more than %d files", src.Path, maxVCardFiles)
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(src.Path, f)
		readVCardFile(res, src, f, rel)
	}
	return res, nil
}

// vcardFiles lists the .vcf files of a vdir root and its direct
// sub-folders, skipping hidden entries and symbolic links.
func vcardFiles(root string) ([]string, error) {
	folders, err := localsource.Vdir(root, ".vcf", ".vcard")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range folders {
		out = append(out, f.Files...)
	}
	sort.Strings(out)
	return out, nil
}

func readVCardFile(res *SourceResult, src SourceConfig, path, sourceID string) {
	f, err := os.Open(path)
	if err != nil {
		res.Errors = append(res.Errors, RecordError{Path: path, Err: err})
		res.FailedPaths = append(res.FailedPaths, path)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxVCardFileBytes+1))
	if err == nil && len(data) > MaxVCardFileBytes {
		err = fmt.Errorf("larger than %d bytes", MaxVCardFileBytes)
	}
	if err != nil {
		res.Errors = append(res.Errors, RecordError{Path: path, Err: fmt.Errorf("read: %w", err)})
		res.FailedPaths = append(res.FailedPaths, path)
		return
	}
	cards, errs := ParseVCards(data)
	if len(cards) == 0 && len(errs) > 0 {
		res.FailedPaths = append(res.FailedPaths, path)
	}
	for _, e := range errs {
		res.Errors = append(res.Errors, RecordError{Path: path, Err: e})
	}
	for _, r := range cards {
		r.Source, r.SourceID, r.path = src.Name, sourceID, path
		if r.empty() {
			continue
		}
		res.Records = append(res.Records, r)
	}
}

// vcProp is one content line of a vCard.
type vcProp struct {
	group, name string
	params      map[string][]string
	value       string
}

func (p vcProp) param(name string) string {
	if v := p.params[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// types returns the TYPE values in lower case, including vCard 2.1's bare
// parameters ("TEL;WORK;VOICE").
func (p vcProp) types() []string {
	var out []string
	for _, t := range p.params["TYPE"] {
		for _, v := range strings.Split(t, ",") {
			if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// ParseVCards parses every card in data. Cards that are malformed are
// reported and skipped; the others are returned.
func ParseVCards(data []byte) ([]Record, []error) {
	if !utf8.Valid(data) && !bytes.Contains(bytes.ToUpper(data), []byte("CHARSET")) {
		data = []byte(decodeLatin1(string(data)))
	}
	lines := unfold(string(data))
	var out []Record
	var errs []error
	var cur []vcProp
	in := false
	n := 0
	for _, l := range lines {
		p, ok := parseContentLine(l)
		if !ok {
			continue // junk between or inside cards is ignored, as clients do
		}
		switch {
		case p.name == "BEGIN" && strings.EqualFold(p.value, "VCARD"):
			if in {
				errs = append(errs, fmt.Errorf("card %d has no END:VCARD", n))
			}
			in, cur = true, nil
			n++
		case p.name == "END" && strings.EqualFold(p.value, "VCARD"):
			if in {
				out = append(out, cardRecord(cur))
			}
			in, cur = false, nil
		case in:
			cur = append(cur, p)
		}
	}
	if in {
		errs = append(errs, fmt.Errorf("card %d has no END:VCARD", n))
	}
	if n == 0 {
		errs = append(errs, errors.New("no BEGIN:VCARD found"))
	}
	return out, errs
}

// unfold joins folded lines: a line starting with a space or tab continues
// the previous one, and a quoted-printable value ending in '=' continues on
// the next line (vCard 2.1 soft line breaks). It runs in linear time, so a
// large folded PHOTO costs no more than reading it.
func unfold(s string) []string {
	var out []string
	var cur strings.Builder
	have, isQP, soft := false, false, false
	write := func(l string) {
		if isQP && strings.HasSuffix(l, "=") {
			cur.WriteString(l[:len(l)-1]) // soft line break: the value goes on
			soft = true
			return
		}
		cur.WriteString(l)
		soft = false
	}
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case soft && have:
			write(l)
		case len(l) > 0 && (l[0] == ' ' || l[0] == '\t') && have:
			write(l[1:])
		case strings.TrimSpace(l) == "":
			soft = false
		default:
			if have {
				out = append(out, cur.String())
				cur.Reset()
			}
			head, _, _ := strings.Cut(l, ":")
			isQP = strings.Contains(strings.ToUpper(head), "QUOTED-PRINTABLE")
			have = true
			write(l)
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// parseContentLine splits "group.NAME;param=value;BARE:value".
func parseContentLine(l string) (vcProp, bool) {
	colon := -1
	quoted := false
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '"':
			quoted = !quoted
		case ':':
			if !quoted {
				colon = i
			}
		}
		if colon >= 0 {
			break
		}
	}
	if colon <= 0 {
		return vcProp{}, false
	}
	head, value := l[:colon], l[colon+1:]
	parts := splitUnquoted(head, ';')
	p := vcProp{params: map[string][]string{}, value: value}
	name := parts[0]
	if g, n, ok := strings.Cut(name, "."); ok {
		p.group, name = g, n
	}
	p.name = strings.ToUpper(strings.TrimSpace(name))
	if p.name == "" {
		return vcProp{}, false
	}
	for _, param := range parts[1:] {
		k, v, ok := strings.Cut(param, "=")
		k = strings.ToUpper(strings.TrimSpace(k))
		if !ok {
			// vCard 2.1 bare parameter: a type, or an encoding/charset keyword.
			switch k {
			case "QUOTED-PRINTABLE", "BASE64", "8BIT", "7BIT":
				p.params["ENCODING"] = append(p.params["ENCODING"], k)
			default:
				p.params["TYPE"] = append(p.params["TYPE"], k)
			}
			continue
		}
		p.params[k] = append(p.params[k], strings.Trim(v, `"`))
	}
	return p, true
}

func splitUnquoted(s string, sep byte) []string {
	var out []string
	quoted := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// decoded returns the property value with quoted-printable and charset
// decoding applied.
func (p vcProp) decoded() string {
	v := p.value
	if strings.EqualFold(p.param("ENCODING"), "QUOTED-PRINTABLE") {
		if b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(v))); err == nil {
			v = string(b)
		}
	}
	switch strings.ToUpper(p.param("CHARSET")) {
	case "", "UTF-8", "US-ASCII":
	case "ISO-8859-1", "LATIN1":
		v = decodeLatin1(v)
	case "WINDOWS-1252", "CP1252":
		if s, err := charmap.Windows1252.NewDecoder().String(v); err == nil {
			v = s
		}
	}
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	return strings.ReplaceAll(v, "\r\n", "\n")
}

func decodeLatin1(s string) string {
	out, err := charmap.ISO8859_1.NewDecoder().String(s)
	if err != nil {
		return s
	}
	return out
}

var textUnescaper = strings.NewReplacer(`\n`, "\n", `\N`, "\n", `\,`, ",", `\;`, ";", `\:`, ":", `\"`, `"`, `\\`, `\`)

// text is a single text value, unescaped.
func (p vcProp) text() string { return strings.TrimSpace(textUnescaper.Replace(p.decoded())) }

// components splits a structured value (N, ADR, ORG) on unescaped ';'.
func (p vcProp) components() []string {
	v := p.decoded()
	var out []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			cur.WriteByte(v[i])
			cur.WriteByte(v[i+1])
			i++
			continue
		}
		if v[i] == ';' {
			out = append(out, strings.TrimSpace(textUnescaper.Replace(cur.String())))
			cur.Reset()
			continue
		}
		cur.WriteByte(v[i])
	}
	return append(out, strings.TrimSpace(textUnescaper.Replace(cur.String())))
}

func component(c []string, i int) string {
	if i < len(c) {
		return c[i]
	}
	return ""
}

// labelFor picks a label: an Apple X-ABLabel in the same group, else the
// first TYPE that is not a technical one.
func labelFor(p vcProp, groupLabels map[string]string) string {
	if l, ok := groupLabels[strings.ToUpper(p.group)]; ok && p.group != "" {
		return l
	}
	for _, t := range p.types() {
		switch t {
		case "internet", "pref", "voice", "x400", "postal", "parcel", "dom", "intl", "msg":
			continue
		}
		return t
	}
	return ""
}

func isPreferred(p vcProp) bool {
	return p.param("PREF") != "" || containsFold(p.types(), "pref")
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// cardRecord interprets the properties of one card.
func cardRecord(props []vcProp) Record {
	var r Record
	groupLabels := map[string]string{}
	for _, p := range props {
		if p.name == "X-ABLABEL" && p.group != "" {
			groupLabels[strings.ToUpper(p.group)] = cleanLabel(p.text())
		}
	}
	for _, p := range props {
		switch p.name {
		case "FN":
			r.FullName = p.text()
		case "N":
			c := p.components()
			r.Last, r.First, r.Middle, r.Prefix, r.Suffix = component(c, 0), component(c, 1), component(c, 2), component(c, 3), component(c, 4)
		case "NICKNAME":
			r.Nickname = p.text()
		case "ORG":
			c := p.components()
			r.Org = component(c, 0)
			r.Department = strings.Join(nonEmpty(c[min(1, len(c)):]...), ", ")
		case "TITLE":
			r.Title = p.text()
		case "ROLE":
			if r.Title == "" {
				r.Title = p.text()
			}
		case "NOTE":
			r.Notes = strings.TrimSpace(strings.Join(nonEmpty(r.Notes, p.text()), "\n"))
		case "EMAIL":
			if v := NormalizeEmail(p.text()); strings.Contains(v, "@") {
				r.Emails = append(r.Emails, Labeled{Label: labelFor(p, groupLabels), Value: strings.TrimPrefix(strings.TrimSpace(p.text()), "mailto:"), Primary: isPreferred(p)})
			}
		case "TEL":
			if v := strings.TrimSpace(strings.TrimPrefix(p.text(), "tel:")); normalizePhone(v) != "" {
				r.Phones = append(r.Phones, Labeled{Label: labelFor(p, groupLabels), Value: v, Primary: isPreferred(p)})
			}
		case "ADR":
			c := p.components()
			a := Address{Label: labelFor(p, groupLabels),
				Street: strings.Join(nonEmpty(component(c, 1), component(c, 2)), ", "), City: component(c, 3),
				Region: component(c, 4), Postcode: component(c, 5), Country: component(c, 6)}
			if a.String() != "" {
				r.Addresses = append(r.Addresses, a)
			}
		case "UID":
			r.NativeID = strings.TrimPrefix(p.text(), "urn:uuid:")
		case "X-ABUID":
			if r.NativeID == "" {
				r.NativeID = p.text()
			}
		case "BDAY":
			r.Birthday = p.text()
		case "REV":
			for _, layout := range []string{"20060102T150405Z", time.RFC3339, "2006-01-02T15:04:05Z", "20060102"} {
				if t, err := time.Parse(layout, p.text()); err == nil {
					r.Modified = t.UTC()
					break
				}
			}
		}
	}
	if r.NativeID == "" {
		// No UID: derive one from the content so re-reads agree.
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", r.DisplayName(), r.Org, r.PrimaryEmail(), r.Birthday)
		for _, ph := range r.Phones {
			fmt.Fprintf(h, "\x00%s", normalizePhone(ph.Value))
		}
		r.NativeID = "vcard-" + hex.EncodeToString(h.Sum(nil))[:20]
	}
	return r
}
