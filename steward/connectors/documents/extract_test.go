package documents

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var testLimits = Limits{MaxChars: 8_000_000, ArchiveMaxBytes: 64 << 20, ArchiveMaxEntries: 10_000}

const fixturesDir = "../../../../shared/fixtures/documents"

func fixture(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(fixturesDir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s is absent (%v): run from the project tree with ../shared beside it", rel, err)
	}
	return p
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func extractPath(t *testing.T, p string) (*Extracted, error) {
	t.Helper()
	f, ok := FormatOf(p)
	if !ok {
		t.Fatalf("no format for %s", p)
	}
	return extractFile(context.Background(), p, f, testLimits)
}

func allText(d *Extracted) string {
	var parts []string
	for _, p := range d.Pages {
		parts = append(parts, p.Text)
	}
	return strings.Join(parts, "\n")
}

// words normalises text for comparisons across extractors.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestRealDOCXFixtures(t *testing.T) {
	cases := []struct {
		file string
		want []string // in order, each as normalised words
		none bool     // no text at all
	}{
		{file: "mammoth-docx/single-paragraph.docx", want: []string{"Walking on imported air"}},
		{file: "mammoth-docx/utf8-bom.docx", want: []string{"This XML has a byte order mark."}},
		{file: "mammoth-docx/simple-list.docx", want: []string{"Apple", "Banana"}},
		{file: "mammoth-docx/tables.docx", want: []string{"Above", "Top left", "Top right", "Bottom left", "Bottom right", "Below"}},
		{file: "mammoth-docx/footnotes.docx", want: []string{"Ouch", "A tachyon walks into a bar.", "Fin."}},
		{file: "mammoth-docx/endnotes.docx", want: []string{"Ouch", "A tachyon walks into a bar.", "Fin."}},
		{file: "mammoth-docx/comments.docx", want: []string{"Ouch", "A tachyon walks into a bar.", "Fin."}},
		{file: "mammoth-docx/text-box.docx", want: []string{"Datum plane"}},
		{file: "mammoth-docx/underline.docx", want: []string{"The Sunset Tree"}},
		{file: "mammoth-docx/strikethrough.docx", want: []string{"Today's Special: Salmon", "Sold out"}},
		{file: "mammoth-docx/strict-format.docx", want: []string{"Test"}},
		{file: "mammoth-docx/embedded-style-map.docx", want: []string{"Walking on imported air"}},
		{file: "mammoth-docx/empty.docx", none: true},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			d, err := extractPath(t, fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got := words(allText(d))
			if tc.none {
				if got != "" || len(d.Warnings) == 0 {
					t.Fatalf("empty.docx gave %q, warnings %v", got, d.Warnings)
				}
				return
			}
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in %q", w, got)
				}
				rest = rest[i+len(w):]
			}
			if len(d.Pages) != 1 {
				t.Fatalf("DOCX is one logical page, got %d", len(d.Pages))
			}
		})
	}
}

func TestRealPythonDOCXFixtures(t *testing.T) {
	dir := fixture(t, "python-docx")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	textless := map[string]bool{ // these python-docx fixtures hold only properties, images or empty tables
		"doc-coreprops.docx": true, "having-images.docx": true, "tbl-2x2-table.docx": true, "tbl-having-tables.docx": true,
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			d, err := extractPath(t, filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if textless[e.Name()] {
				if d.Chars != 0 || len(d.Warnings) == 0 {
					t.Fatalf("textless %s gave %d chars, warnings %v", e.Name(), d.Chars, d.Warnings)
				}
			} else if d.Chars == 0 {
				t.Fatalf("no text from %s", e.Name())
			}
		})
	}
}

func TestGeneratedFormats(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		pages    []string // normalised words per page
		headings []string
	}{
		{name: "a.pdf", data: generatePDF([]string{"First page line one\nline two", "Second page (with parens)"}, pdfOptions{}),
			pages: []string{"First page line one line two", "Second page (with parens)"}},
		{name: "pdf20.pdf", data: bytes.Replace(generatePDF([]string{"Version two header"}, pdfOptions{}), []byte("%PDF-1.4"), []byte("%PDF-2.0"), 1),
			pages: []string{"Version two header"}},
		{name: "b.pdf", data: generatePDF([]string{"Compressed content stream"}, pdfOptions{Compress: true}),
			pages: []string{"Compressed content stream"}},
		{name: "c.docx", data: generateDOCX([]string{"# Introduction", "Body & text <here>"}),
			pages: []string{"Introduction Body & text <here>"}, headings: []string{"Introduction"}},
		{name: "d.pptx", data: generatePPTX([]string{"Slide One\nalpha", "Slide Two\nbeta", "Slide Three\ngamma"}),
			pages: []string{"Slide One alpha", "Slide Two beta", "Slide Three gamma"}, headings: []string{"Slide One", "Slide Two", "Slide Three"}},
		{name: "e.odt", data: generateODT([]string{"# Chapter", "Città di Milano"}),
			pages: []string{"Chapter Città di Milano"}, headings: []string{"Chapter"}},
		{name: "f.rtf", data: []byte(`{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Times;}}{\*\generator Foo;}\f0 Hello {\b bold} caf\'e9\par Unicode \u8364? euro{\pict 89504e47}\par}`),
			pages: []string{"Hello bold café Unicode € euro"}},
		{name: "g.html", data: []byte(`<html><head><title>T</title><style>p{color:red}</style><script>alert("x")</script></head><body><h1>Main  Title</h1><p>Para&nbsp;one &amp; two</p><noscript>no</noscript><ul><li>a</li><li>b</li></ul></body></html>`),
			pages: []string{"T Main Title Para one & two a b"}, headings: []string{"Main Title"}},
		{name: "h.md", data: []byte("# Top\ntext\n```\n# not a heading\n```\n## Sub\nmore\n"),
			pages: []string{"# Top text ``` # not a heading ``` ## Sub more"}, headings: []string{"Top", "Sub"}},
		{name: "i.txt", data: append([]byte{0xEF, 0xBB, 0xBF}, "plain\r\ntext"...), pages: []string{"plain text"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := extractPath(t, writeFile(t, tc.name, tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Pages) != len(tc.pages) {
				t.Fatalf("got %d pages, want %d: %+v", len(d.Pages), len(tc.pages), d.Pages)
			}
			for i, p := range d.Pages {
				if p.Number != i+1 || words(p.Text) != tc.pages[i] {
					t.Fatalf("page %d = %d %q, want %q", i+1, p.Number, words(p.Text), tc.pages[i])
				}
			}
			var hs []string
			for _, h := range d.Headings {
				hs = append(hs, h.Text)
				page := d.Pages[h.Page-1].Text
				if !strings.Contains(page[h.Offset:min(len(page), h.Offset+len(h.Text)+8)], h.Text) {
					t.Fatalf("heading %q offset %d points at %q", h.Text, h.Offset, page[h.Offset:min(len(page), h.Offset+20)])
				}
			}
			if strings.Join(hs, "|") != strings.Join(tc.headings, "|") {
				t.Fatalf("headings %q, want %q", hs, tc.headings)
			}
		})
	}
}

func TestPDFMatchesPdftotext(t *testing.T) {
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext (Debian poppler-utils) is not installed; skipping the comparison")
	}
	var pages []string
	for i := range 5 {
		pages = append(pages, fmt.Sprintf("Page %d heading\nThe quick brown fox jumps over the lazy dog %d times.\nSecond line of page %d", i+1, i*7, i+1))
	}
	p := writeFile(t, "cmp.pdf", generatePDF(pages, pdfOptions{Compress: true}))
	d, err := extractPath(t, p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pages {
		out, err := exec.Command(bin, "-f", fmt.Sprint(i+1), "-l", fmt.Sprint(i+1), p, "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := words(d.Pages[i].Text), words(string(out)); got != want {
			t.Fatalf("page %d: ours %q, pdftotext %q", i+1, got, want)
		}
	}
}

// zipWithEOCD rewrites fields of a ZIP's end-of-central-directory record.
func zipWithEOCD(t *testing.T, data []byte, patch func(eocd []byte)) []byte {
	t.Helper()
	data = bytes.Clone(data)
	i := bytes.LastIndex(data, []byte("PK\x05\x06"))
	if i < 0 {
		t.Fatal("no EOCD")
	}
	patch(data[i:])
	return data
}

func TestExtractionErrors(t *testing.T) {
	docx := generateDOCX([]string{"hello world", strings.Repeat("filler text ", 200)})
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, _ := zw.Create("word/document.xml")
	w.Write(make([]byte, 65<<20))
	zw.Close()
	var many bytes.Buffer
	zw = zip.NewWriter(&many)
	for i := range 10_001 {
		zw.Create(fmt.Sprintf("f%d", i))
	}
	zw.Close()
	cases := []struct {
		name, file string
		data       []byte
		code       string
		msg        string
	}{
		{"zip bomb", "bomb.docx", bomb.Bytes(), CodeArchiveLimit, "uncompressed bytes"},
		{"too many entries", "many.docx", many.Bytes(), CodeArchiveLimit, "entries"},
		{"zip64", "z64.docx", zipWithEOCD(t, docx, func(e []byte) { binary.LittleEndian.PutUint32(e[16:], 0xFFFFFFFF) }), CodeArchiveLimit, "ZIP64"},
		{"multipart", "multi.docx", zipWithEOCD(t, docx, func(e []byte) { binary.LittleEndian.PutUint16(e[4:], 1) }), CodeArchiveLimit, "multipart"},
		{"truncated docx", "cut.docx", docx[:len(docx)/2], CodeMalformed, "truncated"},
		{"not a zip", "fake.docx", []byte("this is not a zip file at all, only text pretending"), CodeMalformed, "truncated"},
		{"password-protected pdf", "enc.pdf", generatePDF([]string{"secret"}, pdfOptions{Encrypted: true, UserPassword: "hunter2"}), CodePasswordRequired, "password"},
		{"image-only pdf", "scan.pdf", generatePDF([]string{"", ""}, pdfOptions{ImageOnly: true}), CodeNoText, "no text layer"},
		{"not a pdf", "x.pdf", []byte("hello"), CodeMalformed, "PDF"},
		{"binary text", "bin.txt", []byte("abc\x00def"), CodeMalformed, "binary"},
		{"not rtf", "x.rtf", []byte("plain"), CodeMalformed, "RTF"},
		{"deep rtf", "deep.rtf", []byte(`{\rtf1` + strings.Repeat("{", 600) + "x}"), CodeMalformed, "nested"},
		{"docx without body", "nobody.docx", zipFiles([2]string{"a.txt", "x"}), CodeMalformed, "document.xml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := extractPath(t, writeFile(t, tc.file, tc.data))
			if ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (doc %v), want code %s containing %q", err, d != nil, tc.code, tc.msg)
			}
		})
	}
}

func TestCharacterBudgetTruncates(t *testing.T) {
	p := writeFile(t, "big.txt", []byte(strings.Repeat("ab", 5000)))
	d, err := extractFile(context.Background(), p, FormatText, Limits{MaxChars: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if d.Chars != 1000 || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "truncated") {
		t.Fatalf("chars %d warnings %v", d.Chars, d.Warnings)
	}
}

func TestCancelledExtractionStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"a.pdf", generatePDF([]string{"x"}, pdfOptions{})},
		{"a.docx", generateDOCX([]string{"x"})},
		{"a.txt", []byte("x")},
	} {
		p := writeFile(t, tc.name, tc.data)
		f, _ := FormatOf(p)
		if _, err := extractFile(ctx, p, f, testLimits); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: got %v, want context.Canceled", tc.name, err)
		}
	}
}
