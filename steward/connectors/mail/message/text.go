package message

import (
	"html"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// cleanText returns s as valid UTF-8 without NUL or control characters other
// than tab and newline. Bytes that are not UTF-8 are read as Windows-1252, the
// usual encoding of unlabelled 8-bit mail; decodedAs reports when that happened.
func cleanText(s string) (out string, decodedAs bool) {
	if !utf8.ValidString(s) {
		if d, err := charmap.Windows1252.NewDecoder().String(s); err == nil {
			s, decodedAs = d, true
		} else {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	if strings.IndexFunc(s, isBadControl) >= 0 {
		s = strings.Map(func(r rune) rune {
			if isBadControl(r) {
				return -1
			}
			return r
		}, s)
	}
	return s, decodedAs
}

func isBadControl(r rune) bool {
	return (r < 32 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f
}

// normalizeNewlines turns CRLF and lone CR into LF.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// blockTags end a line of text when they open or close.
var blockTags = map[string]bool{
	"p": true, "div": true, "br": true, "tr": true, "li": true, "ul": true, "ol": true, "table": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "blockquote": true,
	"pre": true, "hr": true, "section": true, "article": true, "header": true, "footer": true, "dd": true, "dt": true,
}

// skipTags have content that is never text: scripts, styles and the head.
var skipTags = map[string]bool{"script": true, "style": true, "head": true, "title": true, "noscript": true, "template": true, "svg": true, "object": true, "iframe": true}

// HTMLToText converts an HTML mail body to plain text: tags are removed,
// scripts, styles and the head are dropped with their content, block elements
// become line breaks, table cells are separated by tabs and character
// references are decoded. It never executes or fetches anything, and its cost
// is linear in the input.
func HTMLToText(s string) string {
	var b strings.Builder
	b.Grow(len(s) / 2)
	skip := "" // tag whose content is being skipped
	i := 0
	for i < len(s) {
		lt := strings.IndexByte(s[i:], '<')
		if lt < 0 {
			if skip == "" {
				b.WriteString(s[i:])
			}
			break
		}
		if skip == "" {
			b.WriteString(s[i : i+lt])
		}
		i += lt
		if strings.HasPrefix(s[i:], "<!--") {
			end := strings.Index(s[i+4:], "-->")
			if end < 0 {
				break
			}
			i += 4 + end + 3
			continue
		}
		gt := tagEnd(s, i+1)
		if gt < 0 {
			if skip == "" {
				b.WriteString(s[i:])
			}
			break
		}
		name, closing := tagName(s[i+1 : gt])
		i = gt + 1
		if skip != "" {
			if closing && name == skip {
				skip = ""
			}
			continue
		}
		switch {
		case skipTags[name] && !closing && !strings.HasSuffix(s[:gt], "/"):
			skip = name
		case blockTags[name]:
			b.WriteByte('\n')
		case name == "td" || name == "th":
			if !closing {
				b.WriteByte('\t')
			}
		}
	}
	return tidy(html.UnescapeString(b.String()))
}

// tagEnd finds the '>' closing a tag that starts at from, skipping quoted
// attribute values.
func tagEnd(s string, from int) int {
	var quote byte
	for j := from; j < len(s); j++ {
		c := s[j]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return j
		}
	}
	return -1
}

func tagName(t string) (string, bool) {
	closing := strings.HasPrefix(t, "/")
	t = strings.TrimPrefix(t, "/")
	end := strings.IndexAny(t, " \t\r\n/>")
	if end >= 0 {
		t = t[:end]
	}
	return strings.ToLower(t), closing
}

// tidy collapses runs of spaces on each line, trims lines and keeps at most
// one empty line in a row.
func tidy(s string) string {
	s = strings.ReplaceAll(normalizeNewlines(s), "\u00a0", " ")
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	blank := 0
	for _, l := range lines {
		l = strings.Join(strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '\f' || r == '\v' }), " ")
		l = strings.TrimSpace(l)
		if l == "" {
			blank++
			if blank > 1 || len(out) == 0 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
