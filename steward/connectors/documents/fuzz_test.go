package documents

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unicode/utf8"
)

// checkOut asserts the invariants every extractor keeps on any input: valid
// UTF-8 in every page and heading, the character budget, and errors that are
// either documents errors or the budget.
func checkOut(t *testing.T, out *textOut, err error, budget int) {
	t.Helper()
	if err != nil && !errors.Is(err, errBudget) && ErrorCode(err) == "" {
		t.Fatalf("unclassified error: %v", err)
	}
	doc := out.finish(FormatText)
	if doc.Chars > budget {
		t.Fatalf("%d chars over the %d budget", doc.Chars, budget)
	}
	for _, p := range doc.Pages {
		if !utf8.ValidString(p.Text) {
			t.Fatalf("page %d: invalid UTF-8 text %q", p.Number, p.Text)
		}
	}
	for _, h := range doc.Headings {
		if !utf8.ValidString(h.Text) {
			t.Fatalf("invalid UTF-8 heading %q", h.Text)
		}
		if h.Page < 1 || h.Page > len(doc.Pages) || h.Offset < 0 {
			t.Fatalf("heading out of range: %+v", h)
		}
	}
}

func FuzzRTF(f *testing.F) {
	f.Add([]byte(`{\rtf1\ansi{\fonttbl{\f0 Arial;}}\f0 Hello\par {\*\x hidden} caf\'e9 \u8364?}`))
	f.Add([]byte(`{\rtf1 {\pict\bin4 abcd} text \uc2\u1234ab}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const budget = 10_000
		out := newTextOut(context.Background(), budget)
		err := extractRTF(data, out)
		checkOut(t, out, err, budget)
		// An ignorable destination opening the document has no effect on
		// the text: changing its content changes nothing.
		const dest, other = `{\rtf1 {\*\secretdest HIDDEN}`, `{\rtf1 {\*\secretdest XXXXXX}`
		if rest, ok := bytes.CutPrefix(data, []byte(dest)); ok {
			alt := newTextOut(context.Background(), budget)
			altErr := extractRTF(append([]byte(other), rest...), alt)
			if (err == nil) != (altErr == nil) || out.cur.String() != alt.cur.String() {
				t.Fatalf("ignorable destination leaked into text: %q vs %q", out.cur.String(), alt.cur.String())
			}
		}
	})
}

func FuzzHTML(f *testing.F) {
	f.Add([]byte(`<html><script>var x="<p>SCRIPTTEXT</p>"</script><p>Hi &amp; bye</p><h2>T</h2></html>`))
	f.Add([]byte(`<style>p{}</style><pre>  a  b </pre><table><tr><td>1</td></tr></table>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const budget = 10_000
		out := newTextOut(context.Background(), budget)
		err := extractHTML(bytes.NewReader(data), out)
		checkOut(t, out, err, budget)
		// A well-formed script element's body has no effect on the text:
		// changing it changes nothing.
		const script, other = "<script>SCRIPTTEXT</script>", "<script>XXXXXXXXXX</script>"
		if rest, ok := bytes.CutPrefix(data, []byte(script)); ok {
			alt := newTextOut(context.Background(), budget)
			altErr := extractHTML(bytes.NewReader(append([]byte(other), rest...)), alt)
			if (err == nil) != (altErr == nil) || out.cur.String() != alt.cur.String() {
				t.Fatalf("script content extracted: %q vs %q", out.cur.String(), alt.cur.String())
			}
		}
	})
}

// FuzzOfficeXML fuzzes the XML part of each Office format, wrapped in an
// otherwise valid package, and the ZIP container itself.
func FuzzOfficeXML(f *testing.F) {
	f.Add(uint8(0), []byte(`<w:document><w:body><w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Hi</w:t><w:tab/></w:r></w:p></w:body></w:document>`))
	f.Add(uint8(1), []byte(`<p:sld><p:sp><p:nvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><a:p><a:r><a:t>T</a:t></a:r></a:p></p:sp></p:sld>`))
	f.Add(uint8(2), []byte(`<office:text><text:h text:outline-level="2">H</text:h><text:p>a<text:s text:c="3"/>b</text:p></office:text>`))
	f.Add(uint8(3), generateDOCX([]string{"# Title", "body"}))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var pkg []byte
		var format Format
		switch kind % 4 {
		case 0:
			pkg, format = zipFiles([2]string{"word/document.xml", string(data)}), FormatDOCX
		case 1:
			pkg, format = zipFiles([2]string{"ppt/slides/slide1.xml", string(data)}), FormatPPTX
		case 2:
			pkg, format = zipFiles([2]string{"content.xml", string(data)}), FormatODT
		default:
			pkg, format = data, FormatDOCX // raw container bytes
		}
		const budget = 10_000
		out := newTextOut(context.Background(), budget)
		lim := Limits{MaxChars: budget, ArchiveMaxBytes: 1 << 20, ArchiveMaxEntries: 100}
		err := extractOffice(context.Background(), bytes.NewReader(pkg), int64(len(pkg)), format, lim, out)
		checkOut(t, out, err, budget)
	})
}
