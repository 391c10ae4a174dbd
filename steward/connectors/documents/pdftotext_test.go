package documents

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestResolvePDFExtractor(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/pdftotext", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	tests := []struct {
		setting string
		look    func(string) (string, error)
		bin     string
		desc    string
		err     string
	}{
		{"", found, "/usr/bin/pdftotext", "Poppler", ""},
		{"auto", missing, "", "not installed", ""},
		{"pdftotext", found, "/usr/bin/pdftotext", "required", ""},
		{"pdftotext", missing, "", "", "not installed"},
		{"GO", found, "", "built-in", ""},
		{"mupdf", found, "", "", "not auto, pdftotext or go"},
	}
	for _, tt := range tests {
		bin, desc, err := ResolvePDFExtractor(tt.setting, tt.look)
		if bin != tt.bin || !strings.Contains(desc, tt.desc) || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%q: %q, %q, %v", tt.setting, bin, desc, err)
		}
	}
}

func pdftotextOrSkip(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext (poppler-utils) is not installed")
	}
	return bin
}

// TestEncryptedPDFs: a PDF encrypted with an empty user password is read by
// both extractors; one that needs a password is password_required.
func TestEncryptedPDFs(t *testing.T) {
	open := writeFile(t, "open.pdf", generatePDF([]string{"open sesame", "second page"}, pdfOptions{Encrypted: true, Compress: true}))
	locked := writeFile(t, "locked.pdf", generatePDF([]string{"closed"}, pdfOptions{Encrypted: true, UserPassword: "hunter2"}))
	for _, bin := range []string{"", pdftotextOrSkip(t)} {
		lim := testLimits
		lim.PDFToText = bin
		d, err := extractFile(context.Background(), open, FormatPDF, lim)
		if err != nil || len(d.Pages) != 2 || d.Pages[0].Text != "open sesame" || d.Pages[1].Text != "second page" {
			t.Errorf("extractor %q: empty-password PDF: %+v %v", bin, d, err)
		}
		if _, err := extractFile(context.Background(), locked, FormatPDF, lim); ErrorCode(err) != CodePasswordRequired {
			t.Errorf("extractor %q: password-protected PDF: %v", bin, err)
		}
	}
}

// fakePdftotext writes a shell script standing in for pdftotext.
func fakePdftotext(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pdftotext")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPdftotextLimitsAndFallback(t *testing.T) {
	pdf := writeFile(t, "a.pdf", generatePDF([]string{"alpha page", "beta page"}, pdfOptions{}))

	// The address space is capped at the worker heap limit plus slack.
	lim := testLimits
	lim.WorkerHeapBytes = 64 << 20
	lim.PDFToText = fakePdftotext(t, `printf 'limit %s\f' "$(ulimit -v)"`)
	d, err := extractFile(context.Background(), pdf, FormatPDF, lim)
	want := "limit " + strconv.Itoa((64<<20+popplerAddressSlack)>>10)
	if err != nil || d.Pages[0].Text != want {
		t.Fatalf("ulimit: %+v %v, want %q", d, err, want)
	}

	// A pdftotext that fails falls back to the built-in extractor, saying so.
	lim.PDFToText = fakePdftotext(t, `echo "Syntax Error: broken" >&2; exit 1`)
	d, err = extractFile(context.Background(), pdf, FormatPDF, lim)
	if err != nil || len(d.Pages) != 2 || d.Pages[1].Text != "beta page" || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "built-in extractor") {
		t.Fatalf("fallback: %+v %v", d, err)
	}

	// The extraction deadline kills a pdftotext that hangs.
	lim.PDFToText = fakePdftotext(t, `sleep 60`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := extractFile(ctx, pdf, FormatPDF, lim); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging pdftotext: %v", err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the hanging pdftotext was not stopped at the deadline (%s)", el)
	}

	// The character budget applies to pdftotext's output too.
	lim.PDFToText, lim.MaxChars = pdftotextOrSkip(t), 8
	d, err = extractFile(context.Background(), pdf, FormatPDF, lim)
	if err != nil || d.Chars != 8 || !strings.Contains(strings.Join(d.Warnings, ";"), "truncated") {
		t.Fatalf("budget: %+v %v", d, err)
	}
}

// TestServiceRunsPdftotextWithoutWorker: with pdftotext the PDF is read
// without starting a worker (here a worker that always fails), and only a
// pdftotext failure sends it to the worker.
func TestServiceRunsPdftotextWithoutWorker(t *testing.T) {
	bin := pdftotextOrSkip(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "a.pdf")
	os.WriteFile(p, generatePDF([]string{"alpha page", "beta page"}, pdfOptions{}), 0o600)
	svc := New(Options{WorkerCommand: []string{"/bin/false"}, Limits: Limits{PDFToText: bin}})
	info, err := svc.Info(context.Background(), p)
	if err != nil || info.Pages != 2 {
		t.Fatalf("pdftotext without a worker: %+v %v", info, err)
	}
	q := filepath.Join(dir, "b.pdf")
	os.WriteFile(q, generatePDF([]string{"gamma"}, pdfOptions{}), 0o600)
	svc = New(Options{WorkerCommand: []string{"/bin/false"}, Limits: Limits{PDFToText: fakePdftotext(t, `exit 1`)}})
	if _, err := svc.Info(context.Background(), q); err == nil || !strings.Contains(err.Error(), "worker") {
		t.Fatalf("a pdftotext failure should go to the worker (which fails here): %v", err)
	}
}
