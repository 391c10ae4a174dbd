package documents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Format is a supported document format.
type Format string

// Supported formats.
const (
	FormatPDF      Format = "pdf"
	FormatDOCX     Format = "docx"
	FormatPPTX     Format = "pptx"
	FormatODT      Format = "odt"
	FormatRTF      Format = "rtf"
	FormatHTML     Format = "html"
	FormatMarkdown Format = "markdown"
	FormatText     Format = "text"
)

// extensions maps allowed file extensions to formats; anything else is
// refused before the file is opened.
var extensions = map[string]Format{
	".pdf": FormatPDF, ".docx": FormatDOCX, ".pptx": FormatPPTX, ".odt": FormatODT, ".rtf": FormatRTF,
	".html": FormatHTML, ".htm": FormatHTML, ".xhtml": FormatHTML,
	".md": FormatMarkdown, ".markdown": FormatMarkdown,
	".txt": FormatText, ".text": FormatText, ".csv": FormatText, ".tsv": FormatText, ".json": FormatText,
	".jsonl": FormatText, ".ndjson": FormatText, ".xml": FormatText, ".yaml": FormatText, ".yml": FormatText,
	".toml": FormatText, ".log": FormatText, ".ics": FormatText, ".vcf": FormatText, ".eml": FormatText,
}

// FormatOf returns the format for path's extension.
func FormatOf(path string) (Format, bool) {
	f, ok := extensions[strings.ToLower(filepath.Ext(path))]
	return f, ok
}

// Page is one logical page of extracted text: a PDF page, a PPTX slide, or
// the whole text of the single-page formats.
type Page struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
}

// Heading is a structural heading found during extraction.
type Heading struct {
	Level  int    `json:"level"`
	Text   string `json:"text"`
	Page   int    `json:"page"`
	Offset int    `json:"offset"` // byte offset within the page text
}

// Extracted is the text of one document.
type Extracted struct {
	Format   Format    `json:"format"`
	Pages    []Page    `json:"pages"`
	Headings []Heading `json:"headings,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	Chars    int       `json:"chars"` // total characters (runes) over all pages
}

// Limits bound one extraction.
type Limits struct {
	MaxChars          int   // extracted characters, over all pages
	ArchiveMaxBytes   int64 // declared uncompressed bytes of an Office ZIP
	ArchiveMaxEntries int   // entries of an Office ZIP
	// WorkerHeapBytes is the extraction worker's soft heap limit
	// (DOCUMENT_WORKER_HEAP_MB); zero means DefaultWorkerHeapBytes.
	WorkerHeapBytes int64 `json:",omitempty"`
	// PDFToText is the pdftotext binary that reads PDFs (see
	// ResolvePDFExtractor); "" uses the built-in extractor.
	PDFToText string `json:",omitempty"`
	// pdfNoFallback makes a pdftotext failure an error (errPopplerFailed)
	// instead of a fallback, so the caller can run the fallback elsewhere.
	pdfNoFallback bool
}

const maxHeadings = 50

// extractFile extracts path (already guarded and stat'ed by the caller) in
// the calling goroutine, checking ctx throughout so that a cancelled
// extraction stops its work.
func extractFile(ctx context.Context, path string, format Format, lim Limits) (*Extracted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errorf(CodeNotFound, "cannot open %s: %v", filepath.Base(path), errors.Unwrap(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	out := newTextOut(ctx, lim.MaxChars)
	switch format {
	case FormatPDF:
		err = extractPDFFile(ctx, f, path, info.Size(), lim, out)
	case FormatDOCX, FormatPPTX, FormatODT:
		err = extractOffice(ctx, f, info.Size(), format, lim, out)
	default:
		var data []byte
		data, err = io.ReadAll(&ctxReader{ctx: ctx, r: f})
		if err == nil {
			switch format {
			case FormatRTF:
				err = extractRTF(data, out)
			case FormatHTML:
				err = extractHTML(bytes.NewReader(data), out)
			case FormatMarkdown, FormatText:
				err = extractPlain(data, format, out)
			default:
				err = errorf(CodeUnsupported, "format %s is not supported", format)
			}
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if err != nil && !errors.Is(err, errBudget) {
		return nil, err
	}
	doc := out.finish(format)
	if errors.Is(err, errBudget) {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("extracted text truncated at the %d-character limit (DOCUMENT_MAX_EXTRACTED_CHARS)", lim.MaxChars))
	}
	if !hasText(doc.Pages) {
		if format == FormatPDF {
			return nil, errorf(CodeNoText, "the PDF has no text layer (scanned or image-only); no OCR is attempted")
		}
		doc.Warnings = append(doc.Warnings, "the document contains no text")
	}
	return doc, nil
}

func hasText(pages []Page) bool {
	for _, p := range pages {
		if strings.TrimSpace(p.Text) != "" {
			return true
		}
	}
	return false
}

// errBudget stops an extractor once the character budget is spent.
var errBudget = errors.New("character budget reached")

// textOut collects pages with a shared character budget and periodic
// context checks; extractors write through it.
type textOut struct {
	ctx      context.Context
	max      int
	chars    int
	pages    []Page
	cur      strings.Builder
	curNum   int
	headings []Heading
	warnings []string
	writes   int
	full     bool
}

func newTextOut(ctx context.Context, max int) *textOut {
	return &textOut{ctx: ctx, max: max, curNum: 1}
}

// write appends s to the current page. It returns errBudget when the budget
// is exhausted (having written what fits) and the context error when
// cancelled.
func (o *textOut) write(s string) error {
	if o.full {
		return errBudget
	}
	if o.writes++; o.writes&255 == 0 {
		if err := o.ctx.Err(); err != nil {
			return err
		}
	}
	n := utf8.RuneCountInString(s)
	if o.max > 0 && o.chars+n > o.max {
		rest := o.max - o.chars
		i := 0
		for rest > 0 && i < len(s) {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			rest--
		}
		o.cur.WriteString(s[:i])
		o.chars = o.max
		o.full = true
		return errBudget
	}
	o.cur.WriteString(s)
	o.chars += n
	return nil
}

// newline ends a line unless the page is empty or already ends with one.
func (o *textOut) newline() error {
	if o.cur.Len() == 0 {
		return nil
	}
	if s := o.cur.String(); s[len(s)-1] == '\n' {
		return nil
	}
	return o.write("\n")
}

// heading records a heading of the current page starting at byte offset.
func (o *textOut) heading(level int, text string, offset int) {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" || len(o.headings) >= maxHeadings {
		return
	}
	if len(text) > 200 {
		text = truncateRunes(text, 200)
	}
	o.headings = append(o.headings, Heading{Level: level, Text: text, Page: o.curNum, Offset: offset})
}

// pageBreak closes the current page and starts page number next.
func (o *textOut) pageBreak(next int) {
	o.pages = append(o.pages, Page{Number: o.curNum, Text: o.cur.String()})
	o.cur.Reset()
	o.curNum = next
}

func (o *textOut) warn(msg string) { o.warnings = append(o.warnings, msg) }

func (o *textOut) finish(format Format) *Extracted {
	o.pages = append(o.pages, Page{Number: o.curNum, Text: o.cur.String()})
	chars := 0
	for i := range o.pages {
		o.pages[i].Text = strings.TrimRight(o.pages[i].Text, " \t\n")
		chars += utf8.RuneCountInString(o.pages[i].Text)
	}
	return &Extracted{Format: format, Pages: o.pages, Headings: o.headings, Warnings: o.warnings, Chars: chars}
}

// ctxReader fails reads once ctx is done, so stream parsers built on it
// (zip inflation, XML decoding) stop with the extraction deadline.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c *ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

func truncateRunes(s string, n int) string {
	i := 0
	for n > 0 && i < len(s) {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		n--
	}
	return s[:i]
}
