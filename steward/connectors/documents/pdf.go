package documents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

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
	for _, name := range page.Fonts() {
		f := page.Font(name)
		fonts[name] = &f
	}
	var enc pdf.TextEncoding
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
	show := func(raw string) {
		if enc == nil {
			emit(raw)
			return
		}
		emit(enc.Decode(raw))
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
					enc = f.Encoder()
				} else {
					enc = nil
				}
			}
		case "TL":
			leading = num(0)
		case "Td", "TD":
			if op == "TD" {
				leading = -num(1)
			}
			if num(1) != 0 {
				curY += num(1)
			} else if num(0) != 0 {
				space()
			}
		case "Tm":
			y := num(5)
			if lineSet && math.Abs(y-curY) <= 1 {
				space()
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
						if v.Float64() < -200 {
							space()
						}
					}
				}
			}
		case "ET":
			space()
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
