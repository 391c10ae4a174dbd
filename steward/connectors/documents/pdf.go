package documents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// extractPDF extracts the text layer page by page. The parser is
// github.com/ledongthuc/pdf (pure Go); text placement is interpreted here so
// that line moves become newlines and wide kerning gaps become spaces, which
// keeps words apart as pdftotext does. Every read goes through r, which fails
// once ctx is done, and the operator callback checks ctx as well, so a
// cancelled extraction stops.
func extractPDF(ctx context.Context, r io.ReaderAt, size int64, out *textOut) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok && (errors.Is(e, errBudget) || ctx.Err() != nil) {
				err = e
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				return
			}
			err = errorf(CodeMalformed, "the PDF is damaged: %v", p)
		}
	}()
	rd, err := pdf.NewReader(pdf20Header{r}, size)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := err.Error()
		if errors.Is(err, pdf.ErrInvalidPassword) {
			return errorf(CodePasswordRequired, "the PDF is protected by a password; Steward cannot open it without one")
		}
		if strings.Contains(strings.ToLower(msg), "encrypt") {
			// An empty user password opens RC4 and AES-128 files here;
			// AES-256 (revision 5 and 6) needs pdftotext.
			return errorf(CodeEncrypted, "the PDF is encrypted in a way the built-in extractor cannot read (%s); install pdftotext (poppler-utils) to read it", msg)
		}
		return errorf(CodeMalformed, "cannot read the PDF: %s", msg)
	}
	n := rd.NumPage()
	if n == 0 {
		return errorf(CodeMalformed, "the PDF has no pages")
	}
	var failed []int
	for i := 1; i <= n; i++ {
		if i > 1 {
			out.pageBreak(i)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if perr := pdfPageText(ctx, rd.Page(i), out); perr != nil {
			if errors.Is(perr, errBudget) || ctx.Err() != nil {
				return perr
			}
			failed = append(failed, i)
		}
	}
	if len(failed) > 0 {
		out.warn(fmt.Sprintf("%d page(s) could not be read and are empty: %v", len(failed), failed))
	}
	return nil
}

// pdf20Header presents a PDF 2.0 header as 1.7: the parser only accepts 1.x
// headers, and the header comment carries no other meaning for it.
type pdf20Header struct{ r io.ReaderAt }

func (h pdf20Header) ReadAt(p []byte, off int64) (int, error) {
	n, err := h.r.ReadAt(p, off)
	if off == 0 && n >= 8 && string(p[:8]) == "%PDF-2.0" {
		copy(p[5:8], "1.7")
	}
	return n, err
}

// pdfPageText interprets one page's content stream.
func pdfPageText(ctx context.Context, page pdf.Page, out *textOut) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok && (errors.Is(e, errBudget) || errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded)) {
				err = e
				return
			}
			err = fmt.Errorf("page content: %v", p)
		}
	}()
	if page.V.IsNull() || page.V.Key("Contents").Kind() == pdf.Null {
		return nil
	}
	fonts := map[string]*pdf.Font{}
	metrics := map[*pdf.Font]fontMetrics{}
	for _, name := range page.Fonts() {
		f := page.Font(name)
		fonts[name] = &f
		metrics[&f] = fontMetrics{cid: readCIDMetrics(f), simple: readSimpleWidths(f)}
	}
	var enc pdf.TextEncoding
	var font *pdf.Font
	// Horizontal placement, in user-space units: where the current line
	// started, where the last glyph ended, the font size and the text
	// matrix's scale. A move that leaves a gap wider than a fraction of the
	// font size is a word break; smaller moves (kerning, one glyph per
	// operator as Google Docs and Scribus write) are not.
	var lineX, endX float64
	var haveX bool
	fontSize, scale := 12.0, 1.0
	hscale, charSpace, wordSpace := 1.0, 0.0, 0.0 // Tz, Tc, Tw
	var line strings.Builder
	var lineY, curY float64
	var lineSet bool
	leading := 0.0
	emit := func(s string) {
		if s == "" {
			return
		}
		if lineSet && math.Abs(curY-lineY) > 1 {
			line.WriteByte('\n')
		}
		lineY, lineSet = curY, true
		line.WriteString(s)
	}
	space := func() {
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
	}
	// Without glyph widths the end of the last run is a guess, so any
	// explicit move on a line breaks the word, as before.
	guessed := false
	gapSpace := func(x float64) {
		if haveX && (guessed || x-endX > pdfWordGap*fontSize*scale) {
			space()
		}
		endX, haveX = x, true
	}
	show := func(raw string) {
		text := raw
		if enc != nil {
			text = enc.Decode(raw)
		}
		emit(text)
		n := float64(utf8.RuneCountInString(text))
		adv, known := pdfAdvance(metrics[font], raw, text)
		guessed = !known
		endX += (adv*fontSize + charSpace*n + wordSpace*float64(strings.Count(text, " "))) * hscale * scale
		haveX = true
	}
	ops := 0
	pdf.Interpret(page.V.Key("Contents"), func(stk *pdf.Stack, op string) {
		if ops++; ops&255 == 0 {
			if e := ctx.Err(); e != nil {
				panic(e)
			}
			// Flush long pages by whole lines so the budget applies early.
			if s := line.String(); len(s) > 4096 {
				if i := strings.LastIndexByte(s, '\n'); i > 0 {
					if e := out.write(pdfTidy(s[:i+1])); e != nil {
						panic(e)
					}
					rest := s[i+1:]
					line.Reset()
					line.WriteString(rest)
				}
			}
		}
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		num := func(i int) float64 {
			if i < len(args) {
				return args[i].Float64()
			}
			return 0
		}
		switch op {
		case "Tf":
			if len(args) == 2 {
				if f, ok := fonts[args[0].Name()]; ok {
					enc, font = f.Encoder(), f
				} else {
					enc, font = nil, nil
				}
				if sz := math.Abs(num(1)); sz > 0 {
					fontSize = sz
				}
			}
		case "Tz":
			hscale = num(0) / 100
		case "Tc":
			charSpace = num(0)
		case "Tw":
			wordSpace = num(0)
		case "TL":
			leading = num(0)
		case "Td", "TD":
			if op == "TD" {
				leading = -num(1)
			}
			lineX += num(0) * scale
			if num(1) != 0 {
				curY += num(1)
				endX, haveX = lineX, false
			} else if num(0) != 0 {
				gapSpace(lineX)
			}
		case "Tm":
			y := num(5)
			if a, b := num(0), num(1); math.Hypot(a, b) > 0 {
				scale = math.Hypot(a, b)
			}
			lineX = num(4)
			if lineSet && math.Abs(y-curY) <= 1 {
				gapSpace(lineX)
			} else {
				endX, haveX = lineX, false
			}
			curY = y
		case "T*":
			curY -= math.Max(leading, 2)
		case "'", "\"":
			curY -= math.Max(leading, 2)
			if len(args) > 0 {
				show(args[len(args)-1].RawString())
			}
		case "Tj":
			if len(args) == 1 {
				show(args[0].RawString())
			}
		case "TJ":
			if len(args) == 1 {
				a := args[0]
				for i := 0; i < a.Len(); i++ {
					v := a.Index(i)
					switch v.Kind() {
					case pdf.String:
						show(v.RawString())
					case pdf.Integer, pdf.Real:
						if v.Float64() < -1000*pdfWordGap {
							space()
						}
						endX -= v.Float64() / 1000 * fontSize * hscale * scale
					}
				}
			}
		case "ET":
			space()
		case "BT":
			lineX, scale = 0, 1
		}
	})
	if line.Len() > 0 {
		if err := out.write(pdfTidy(line.String())); err != nil {
			return err
		}
	}
	return nil
}

// pdfTidy collapses the spaces the placement heuristics may double and
// trims line ends.
func pdfTidy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// pdfWordGap is the horizontal gap, as a fraction of the font size, above
// which two runs of glyphs on one line are separate words (pdftotext uses a
// similar share of the font size).
const pdfWordGap = 0.15

// pdfAdvance estimates the width of a shown string in text-space units per
// unit of font size: the font's /Widths for simple fonts (known), half an
// em per character otherwise (a guess).
func pdfAdvance(m fontMetrics, raw, text string) (float64, bool) {
	if cid := m.cid; cid != nil {
		w := 0.0
		for i := 0; i+1 < len(raw); i += 2 {
			c := int(raw[i])<<8 | int(raw[i+1])
			if v, ok := cid.w[c]; ok {
				w += v
			} else {
				w += cid.dw
			}
		}
		return w / 1000, true
	}
	if sw := m.simple; sw != nil {
		w := 0.0
		for i := 0; i < len(raw); i++ {
			w += sw.width(int(raw[i]))
		}
		if w > 0 {
			return w / 1000, true
		}
	}
	return 0.5 * float64(utf8.RuneCountInString(text)), false
}

// fontMetrics are a page font's glyph widths, read once per page: the
// library's Font.Width resolves /FirstChar, /LastChar and /Widths from the
// file on every call, which made width lookups per glyph the bulk of the
// extraction time.
type fontMetrics struct {
	cid    *cidMetrics
	simple *simpleWidths
}

// simpleWidths are the /Widths of a simple font, from code first to last.
type simpleWidths struct {
	first, last int
	w           []float64
}

// readSimpleWidths reads f's /Widths, or nil when it has none.
func readSimpleWidths(f pdf.Font) *simpleWidths {
	ws := f.Widths()
	if len(ws) == 0 {
		return nil
	}
	return &simpleWidths{first: f.FirstChar(), last: f.LastChar(), w: ws}
}

// width is the width of code, as pdf.Font.Width gives it: 0 outside
// first..last or past the end of /Widths.
func (s *simpleWidths) width(code int) float64 {
	if code < s.first || s.last < code || code-s.first >= len(s.w) {
		return 0
	}
	return s.w[code-s.first]
}

// cidMetrics are the glyph widths of a Type 0 font with a two-byte
// Identity encoding: /W of its descendant font by CID, /DW for the rest.
type cidMetrics struct {
	w  map[int]float64
	dw float64
}

// maxCIDRange bounds one "first last width" entry of /W.
const maxCIDRange = 1 << 16

func readCIDMetrics(f pdf.Font) *cidMetrics {
	if f.V.Key("Subtype").Name() != "Type0" {
		return nil
	}
	if e := f.V.Key("Encoding").Name(); e != "Identity-H" && e != "Identity-V" {
		return nil
	}
	desc := f.V.Key("DescendantFonts").Index(0)
	m := &cidMetrics{w: map[int]float64{}, dw: 1000}
	if dw := desc.Key("DW"); dw.Kind() == pdf.Integer || dw.Kind() == pdf.Real {
		m.dw = dw.Float64()
	}
	w := desc.Key("W")
	for i := 0; i+1 < w.Len(); {
		first := int(w.Index(i).Int64())
		if next := w.Index(i + 1); next.Kind() == pdf.Array {
			for j := 0; j < next.Len() && j < maxCIDRange; j++ {
				m.w[first+j] = next.Index(j).Float64()
			}
			i += 2
			continue
		}
		if i+2 >= w.Len() {
			break
		}
		last, width := int(w.Index(i+1).Int64()), w.Index(i+2).Float64()
		for c := first; c <= last && c-first < maxCIDRange; c++ {
			m.w[c] = width
		}
		i += 3
	}
	return m
}
