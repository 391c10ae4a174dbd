package documents

import (
	"io"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlSkip are elements whose content is never text: scripts and styles are
// dropped, never executed.
var htmlSkip = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Iframe: true, atom.Object: true, atom.Svg: true, atom.Math: true, atom.Canvas: true,
}

// htmlBlock are elements that end a line.
var htmlBlock = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true, atom.Table: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true, atom.Blockquote: true,
	atom.Pre: true, atom.Ul: true, atom.Ol: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
	atom.Title: true, atom.Hr: true, atom.Figcaption: true, atom.Address: true, atom.Main: true, atom.Nav: true,
}

var htmlHeadingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// extractHTML tokenizes HTML (no DOM, no scripts) and writes its visible
// text, one block per line, recording h1–h6 as headings.
func extractHTML(r io.Reader, out *textOut) error {
	z := html.NewTokenizer(r)
	z.SetMaxBuf(0)
	skipDepth := 0
	var skipTag atom.Atom
	inPre := 0
	var heading *strings.Builder
	headingLevel, headingOffset := 0, 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				return nil
			}
			return errorf(CodeMalformed, "read HTML: %v", z.Err())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if skipDepth > 0 {
				if a == skipTag && tt == html.StartTagToken {
					skipDepth++
				}
				continue
			}
			if htmlSkip[a] && tt == html.StartTagToken {
				skipDepth, skipTag = 1, a
				continue
			}
			if a == atom.Pre {
				inPre++
			}
			if htmlBlock[a] {
				if err := out.newline(); err != nil {
					return err
				}
			}
			if lvl, ok := htmlHeadingLevel[a]; ok && tt == html.StartTagToken {
				heading, headingLevel, headingOffset = &strings.Builder{}, lvl, out.cur.Len()
			}
			if a == atom.Td || a == atom.Th {
				if err := out.write("\t"); err != nil {
					return err
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if skipDepth > 0 {
				if a == skipTag {
					skipDepth--
				}
				continue
			}
			if a == atom.Pre && inPre > 0 {
				inPre--
			}
			if _, ok := htmlHeadingLevel[a]; ok && heading != nil {
				out.heading(headingLevel, heading.String(), headingOffset)
				heading = nil
			}
			if htmlBlock[a] {
				if err := out.newline(); err != nil {
					return err
				}
			}
		case html.TextToken:
			if skipDepth > 0 {
				continue
			}
			// The tokenizer passes bytes through as they are; text inside
			// <pre> is not re-encoded by collapseSpace, so repair it here.
			text := strings.ToValidUTF8(string(z.Text()), "\uFFFD")
			if inPre == 0 {
				text = collapseSpace(text)
				if text == " " && endsWithSpace(out) {
					continue
				}
			}
			if heading != nil {
				heading.WriteString(text)
			}
			if err := out.write(text); err != nil {
				return err
			}
		}
	}
}

// collapseSpace folds runs of HTML whitespace to one space, as a browser
// renders them.
func collapseSpace(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\f' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

func endsWithSpace(o *textOut) bool {
	if o.cur.Len() == 0 {
		return true
	}
	s := o.cur.String()
	c := s[len(s)-1]
	return c == ' ' || c == '\n' || c == '\t'
}
