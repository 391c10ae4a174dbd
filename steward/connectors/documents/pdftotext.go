package documents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// How PDF text is extracted (DOCUMENT_PDF_EXTRACTOR).
const (
	// PDFExtractorAuto uses Poppler's pdftotext when it is installed and the
	// built-in extractor otherwise.
	PDFExtractorAuto = "auto"
	// PDFExtractorPoppler requires pdftotext.
	PDFExtractorPoppler = "pdftotext"
	// PDFExtractorGo always uses the built-in pure-Go extractor.
	PDFExtractorGo = "go"
)

// ResolvePDFExtractor turns the DOCUMENT_PDF_EXTRACTOR setting into the
// pdftotext binary to run ("" for the pure-Go extractor) and a sentence for
// the System page. lookPath is exec.LookPath outside tests.
func ResolvePDFExtractor(setting string, lookPath func(string) (string, error)) (bin, desc string, err error) {
	switch strings.ToLower(strings.TrimSpace(setting)) {
	case "", PDFExtractorAuto:
		if p, err := lookPath("pdftotext"); err == nil {
			return p, "PDF text via Poppler's pdftotext (" + p + "); the built-in extractor is the fallback", nil
		}
		return "", "PDF text via the built-in pure-Go extractor: pdftotext (poppler-utils) is not installed, so some PDFs read less well", nil
	case PDFExtractorPoppler:
		p, err := lookPath("pdftotext")
		if err != nil {
			return "", "", fmt.Errorf("DOCUMENT_PDF_EXTRACTOR=pdftotext but pdftotext is not installed (install poppler-utils): %w", err)
		}
		return p, "PDF text via Poppler's pdftotext (" + p + "), required by DOCUMENT_PDF_EXTRACTOR", nil
	case PDFExtractorGo:
		return "", "PDF text via the built-in pure-Go extractor (DOCUMENT_PDF_EXTRACTOR=go)", nil
	}
	return "", "", fmt.Errorf("DOCUMENT_PDF_EXTRACTOR=%q is not auto, pdftotext or go", setting)
}

// popplerAddressSlack is address space pdftotext needs beyond the heap
// limit for its code, shared libraries and mappings.
const popplerAddressSlack = 256 << 20

// errPopplerFailed is a pdftotext failure that is not about the document's
// password; the caller falls back to the built-in extractor.
var errPopplerFailed = errors.New("pdftotext failed")

// extractPDFPoppler runs `pdftotext -layout -enc UTF-8` on path under the
// documents connector's limits: ctx's deadline (the process is killed), an
// address-space cap of the worker heap limit plus slack (ulimit -v), and the
// character budget on its output. Pages come from the form feeds pdftotext
// writes after each page, so page numbers are kept.
func extractPDFPoppler(ctx context.Context, bin, path string, lim Limits, out *textOut) error {
	heap := lim.WorkerHeapBytes
	if heap <= 0 {
		heap = DefaultWorkerHeapBytes
	}
	kib := strconv.FormatInt((heap+popplerAddressSlack)>>10, 10)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -v "$1" 2>/dev/null; exec "$2" -layout -enc UTF-8 "$3" -`, "sh", kib, bin, path)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	setChildAttrs(cmd)
	cmd.WaitDelay = time.Second
	// Four bytes per character bound the UTF-8 the budget can take; more
	// is dropped and the budget reports the truncation.
	stdout := &limitedBuffer{max: max(lim.MaxChars, 1)*4 + 4096}
	stderr := &limitedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Incorrect password") {
			return errorf(CodePasswordRequired, "the PDF is protected by a password; Steward cannot open it without one")
		}
		return fmt.Errorf("%w: %v: %s", errPopplerFailed, err, msg)
	}
	pages := strings.Split(stdout.String(), "\f")
	if len(pages) > 1 && strings.TrimSpace(pages[len(pages)-1]) == "" {
		pages = pages[:len(pages)-1]
	}
	for i, p := range pages {
		if i > 0 {
			out.pageBreak(i + 1)
		}
		if err := out.write(pdfTidy(p)); err != nil {
			return err
		}
	}
	return nil
}

// extractPDFFile reads a PDF with pdftotext when lim names it, falling back
// to the built-in extractor (with a warning) when pdftotext fails for a
// reason other than a password.
func extractPDFFile(ctx context.Context, f *os.File, path string, size int64, lim Limits, out *textOut) error {
	if lim.PDFToText != "" {
		err := extractPDFPoppler(ctx, lim.PDFToText, path, lim, out)
		if !errors.Is(err, errPopplerFailed) || lim.pdfNoFallback {
			return err
		}
		out.warn(popplerFallbackNote(err))
	}
	return extractPDF(ctx, &ctxReaderAt{ctx: ctx, r: f}, size, out)
}

func popplerFallbackNote(err error) string {
	return fmt.Sprintf("pdftotext could not read the file (%v); read with the built-in extractor", trimErr(err))
}

func trimErr(err error) string {
	s := err.Error()
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
