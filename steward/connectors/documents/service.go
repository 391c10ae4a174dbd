// Package documents is Steward's read-only document connector: it extracts
// one explicitly selected local file (PDF text layers, DOCX, PPTX, ODT, RTF,
// HTML, Markdown, text/data), caches the result in a small process-local
// LRU, and serves bounded cursor-paginated reads and hybrid lexical/semantic
// search over it as the MCP tools document_info, document_read and
// document_search.
package documents

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/pathguard"
)

// Defaults and hard caps from the spec.
const (
	DefaultMaxBytes        = 25 << 20
	MaxMaxBytes            = 100 << 20
	DefaultTimeout         = 15 * time.Second
	DefaultMaxChars        = 8_000_000
	MaxMaxChars            = 32_000_000
	DefaultArchiveMaxBytes = 64 << 20
	MaxArchiveMaxBytes     = 256 << 20
	ArchiveMaxEntries      = 10_000
	DefaultCacheMaxBytes   = 64 << 20
	MaxCacheMaxBytes       = 256 << 20
	CacheEntries           = 8
)

// Options configures a Service.
type Options struct {
	// Guard is the shared sensitive-path policy (required).
	Guard *pathguard.Guard
	// MaxBytes is the largest input file.
	MaxBytes int64
	// Timeout bounds one extraction.
	Timeout time.Duration
	// Limits bound extracted characters and Office archives.
	Limits Limits
	// CacheMaxBytes is the estimated budget of the extraction cache.
	CacheMaxBytes int64
	// Embedder computes vectors for semantic search; nil disables it.
	Embedder Embedder
	// EmbedderID names the endpoint, model and dimension; a change
	// invalidates cached vectors.
	EmbedderID string
	// WorkerCommand, when set, runs each extraction in that child process
	// (killed at the timeout). Empty runs it in-process under a context
	// that every extractor checks.
	WorkerCommand []string
	// Log receives operational messages; nil discards them.
	Log *slog.Logger
}

// OptionsFromConfig reads the DOCUMENT_* settings. The guard and worker
// command are supplied by the caller.
func OptionsFromConfig(cfg *config.Config, guard *pathguard.Guard) (Options, error) {
	opts, err := ExtractOptionsFromConfig(cfg, guard)
	if err != nil {
		return opts, err
	}
	emb, id, err := embedderFromConfig(cfg)
	if err != nil {
		return opts, err
	}
	if emb != nil {
		opts.Embedder, opts.EmbedderID = emb, id
	}
	return opts, cfg.Err()
}

// ExtractOptionsFromConfig reads the DOCUMENT_* settings except
// DOCUMENT_EMBED_*, for a caller that sets Options.Embedder to an embedder
// it shares (steward serve's wiki extractor).
func ExtractOptionsFromConfig(cfg *config.Config, guard *pathguard.Guard) (Options, error) {
	opts := Options{
		Guard:    guard,
		MaxBytes: cfg.Clamp("DOCUMENT_MAX_BYTES", DefaultMaxBytes, 1, MaxMaxBytes),
		Timeout:  time.Duration(cfg.Clamp("DOCUMENT_EXTRACT_TIMEOUT_MS", DefaultTimeout.Milliseconds(), 1000, 60000)) * time.Millisecond,
		Limits: Limits{
			MaxChars:          int(cfg.Clamp("DOCUMENT_MAX_EXTRACTED_CHARS", DefaultMaxChars, 1, MaxMaxChars)),
			ArchiveMaxBytes:   cfg.Clamp("DOCUMENT_ARCHIVE_MAX_BYTES", DefaultArchiveMaxBytes, 1, MaxArchiveMaxBytes),
			ArchiveMaxEntries: ArchiveMaxEntries,
			WorkerHeapBytes:   cfg.Clamp("DOCUMENT_WORKER_HEAP_MB", DefaultWorkerHeapBytes>>20, 32, 4096) << 20,
		},
		CacheMaxBytes: cfg.Clamp("DOCUMENT_CACHE_MAX_BYTES", DefaultCacheMaxBytes, 1, MaxCacheMaxBytes),
	}
	bin, _, err := ResolvePDFExtractor(cfg.String("DOCUMENT_PDF_EXTRACTOR", PDFExtractorAuto), exec.LookPath)
	if err != nil {
		return opts, err
	}
	opts.Limits.PDFToText = bin
	return opts, cfg.Err()
}

// Service implements the document tools.
type Service struct {
	opts  Options
	cache *docCache
	log   *slog.Logger
	// afterExtract runs between extraction and the post-extraction stat
	// (tests modify the file there).
	afterExtract func()
}

// New returns a Service; zero option fields take the spec's defaults.
func New(opts Options) *Service {
	if opts.Guard == nil {
		opts.Guard = pathguard.New(pathguard.Options{})
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Limits.MaxChars <= 0 {
		opts.Limits.MaxChars = DefaultMaxChars
	}
	if opts.Limits.ArchiveMaxBytes <= 0 {
		opts.Limits.ArchiveMaxBytes = DefaultArchiveMaxBytes
	}
	if opts.Limits.ArchiveMaxEntries <= 0 {
		opts.Limits.ArchiveMaxEntries = ArchiveMaxEntries
	}
	if opts.CacheMaxBytes <= 0 {
		opts.CacheMaxBytes = DefaultCacheMaxBytes
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, cache: newDocCache(CacheEntries, opts.CacheMaxBytes), log: log}
}

// open validates path and returns its extracted document, from the cache
// when the file's canonical path, size and mtime are unchanged.
func (s *Service) open(ctx context.Context, path string) (*document, error) {
	if strings.TrimSpace(path) == "" {
		return nil, errorf(CodeInvalidArgument, "path is required")
	}
	if !filepath.IsAbs(path) {
		return nil, errorf(CodeInvalidArgument, "path %q must be absolute", path)
	}
	canon, err := s.opts.Guard.Check(path)
	if err != nil {
		if errors.Is(err, pathguard.ErrBlocked) {
			return nil, &Error{Code: CodeBlocked, Message: err.Error()}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(CodeNotFound, "%s does not exist", path)
		}
		return nil, errorf(CodeInvalidArgument, "%v", err)
	}
	info, err := os.Stat(canon)
	if err != nil {
		return nil, errorf(CodeNotFound, "%s does not exist or cannot be read", path)
	}
	if !info.Mode().IsRegular() {
		return nil, errorf(CodeNotRegular, "%s is not a regular file", path)
	}
	format, ok := FormatOf(canon)
	if !ok {
		return nil, errorf(CodeUnsupported, "%s has an unsupported extension %q; supported: PDF, DOCX, PPTX, ODT, RTF, HTML, Markdown and text/data files", filepath.Base(path), filepath.Ext(canon))
	}
	if info.Size() > s.opts.MaxBytes {
		return nil, errorf(CodeTooLarge, "%s is %d bytes; the limit is %d (DOCUMENT_MAX_BYTES)", filepath.Base(path), info.Size(), s.opts.MaxBytes)
	}
	key := docKey{path: canon, size: info.Size(), mtime: info.ModTime().UnixNano()}
	if d := s.cache.get(key); d != nil {
		return d, nil
	}
	ectx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	start := time.Now()
	var ex *Extracted
	if len(s.opts.WorkerCommand) > 0 {
		ex, err = s.workerExtract(ectx, canon, format)
	} else {
		ex, err = extractFile(ectx, canon, format, s.opts.Limits)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, errorf(CodeTimeout, "extracting %s took longer than %s (DOCUMENT_EXTRACT_TIMEOUT_MS) and was stopped", filepath.Base(path), s.opts.Timeout)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var de *Error
		if !errors.As(err, &de) {
			s.log.Warn("document extraction failed", "format", format, "err", err)
			err = errorf(CodeExtractionFailure, "extracting %s failed: %v", filepath.Base(path), err)
		}
		return nil, err
	}
	if s.afterExtract != nil {
		s.afterExtract()
	}
	after, err := os.Stat(canon)
	if err != nil || after.Size() != info.Size() || !after.ModTime().Equal(info.ModTime()) {
		return nil, errorf(CodeChanged, "%s changed while it was being read; try again once it is no longer being written", filepath.Base(path))
	}
	s.log.Debug("document extracted", "format", format, "pages", len(ex.Pages), "chars", ex.Chars, "took", time.Since(start))
	d := &document{key: key, fp: key.fingerprint(), modified: info.ModTime(), ex: ex}
	s.cache.put(d)
	return d, nil
}

// cursorData is the decoded form of a continuation cursor.
type cursorData struct {
	V int    `json:"v"`
	F string `json:"f"`
	P int    `json:"p"`
	O int    `json:"o"`
}

const cursorVersion = 1

func (d *document) cursor(page, offset int) string {
	b, _ := json.Marshal(cursorData{V: cursorVersion, F: d.fp, P: page, O: offset})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor checks that c was issued for this version of the document and
// returns its page index (0-based) and byte offset.
func (d *document) parseCursor(c string) (int, int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	var cd cursorData
	if err != nil || json.Unmarshal(raw, &cd) != nil {
		return 0, 0, errorf(CodeInvalidArgument, "cursor is not valid; use a cursor returned by document_read, document_info or document_search")
	}
	if cd.V != cursorVersion || cd.F == "" {
		return 0, 0, errorf(CodeStaleCursor, "cursor is from an unsupported version; read the document again to get a new cursor")
	}
	if cd.F != d.fp {
		return 0, 0, errorf(CodeStaleCursor, "the document changed since this cursor was issued; read it again to get a new cursor")
	}
	if cd.P < 1 || cd.P > len(d.ex.Pages) || cd.O < 0 || cd.O > len(d.ex.Pages[cd.P-1].Text) {
		return 0, 0, errorf(CodeInvalidArgument, "cursor points outside the document")
	}
	return cd.P - 1, cd.O, nil
}

// HeadingInfo is a heading with a cursor that reads from it.
type HeadingInfo struct {
	Level  int    `json:"level"`
	Text   string `json:"text"`
	Page   int    `json:"page"`
	Cursor string `json:"cursor"`
}

// InfoResult is document_info's answer: metadata and outline, no body.
type InfoResult struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind       string        `json:"kind"`
	Name       string        `json:"name"`
	Path       string        `json:"path"`
	Format     Format        `json:"format"`
	Size       int64         `json:"size"`
	Modified   string        `json:"modified"`
	Pages      int           `json:"pages"`
	Characters int           `json:"characters"`
	Warnings   []string      `json:"warnings,omitempty"`
	Headings   []HeadingInfo `json:"headings,omitempty"`
}

// Info returns a document's metadata, page and character totals, warnings
// and up to 50 headings with cursors.
func (s *Service) Info(ctx context.Context, path string) (*InfoResult, error) {
	d, err := s.open(ctx, path)
	if err != nil {
		return nil, err
	}
	r := &InfoResult{
		Name: filepath.Base(d.key.path), Path: d.key.path, Format: d.ex.Format, Size: d.key.size,
		Modified: d.modified.UTC().Format(time.RFC3339), Pages: len(d.ex.Pages), Characters: d.ex.Chars,
		Warnings: d.ex.Warnings,
	}
	for i, h := range d.ex.Headings {
		if i == maxHeadings {
			break
		}
		off := min(h.Offset, len(d.ex.Pages[h.Page-1].Text))
		r.Headings = append(r.Headings, HeadingInfo{Level: h.Level, Text: h.Text, Page: h.Page, Cursor: d.cursor(h.Page, off)})
	}
	return r, nil
}

// workerExtract runs an extraction in a worker process. A PDF that
// pdftotext reads skips the worker: pdftotext is itself a separate process
// under the same deadline, memory and output limits, and starting a worker
// only to start it would double the process cost. When pdftotext fails the
// built-in extractor runs in the worker, with a warning.
func (s *Service) workerExtract(ctx context.Context, canon string, format Format) (*Extracted, error) {
	lim := s.opts.Limits
	note := ""
	if format == FormatPDF && lim.PDFToText != "" {
		direct := lim
		direct.pdfNoFallback = true
		ex, err := extractFile(ctx, canon, format, direct)
		if !errors.Is(err, errPopplerFailed) {
			return ex, err
		}
		note, lim.PDFToText = popplerFallbackNote(err), ""
	}
	ex, err := processExtract(ctx, s.opts.WorkerCommand, workerRequest{Path: canon, Format: format, Limits: lim})
	if err == nil && note != "" {
		ex.Warnings = append([]string{note}, ex.Warnings...)
	}
	return ex, err
}

// ExtractText returns the whole extracted text of the file at path (pages
// separated by blank lines), with the same checks, limits, worker and
// cache as the tools: the wiki's ingest reads PDF, Office and HTML sources
// through it.
func (s *Service) ExtractText(ctx context.Context, path string) (string, error) {
	d, err := s.open(ctx, path)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(d.ex.Pages))
	for i, p := range d.ex.Pages {
		parts[i] = p.Text
	}
	return strings.Join(parts, "\n\n"), nil
}
