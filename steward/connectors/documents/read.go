package documents

import (
	"context"
	"path/filepath"
	"unicode/utf8"
)

// Read limits from the spec.
const (
	DefaultReadChars = 6000
	MaxReadChars     = 12000
	DefaultReadPages = 1
	MaxReadPages     = 3
)

// ReadRequest is document_read's input. Page and Cursor are mutually
// exclusive; zero MaxChars/MaxPages take the defaults, larger values are
// capped.
type ReadRequest struct {
	Path     string
	Page     int // 1-based; 0 = not given
	Cursor   string
	MaxChars int
	MaxPages int
}

// Segment is the text read from one page.
type Segment struct {
	Page      int    `json:"page"`
	Offset    int    `json:"offset"`
	EndOffset int    `json:"endOffset"`
	Text      string `json:"text"`
}

// Selection says where a read started and ended.
type Selection struct {
	StartPage   int `json:"startPage"`
	StartOffset int `json:"startOffset"`
	EndPage     int `json:"endPage"`
	EndOffset   int `json:"endOffset"`
}

// ReadStats counts what a read returned against the document's totals.
type ReadStats struct {
	Characters      int `json:"characters"`
	Pages           int `json:"pages"`
	TotalPages      int `json:"totalPages"`
	TotalCharacters int `json:"totalCharacters"`
}

// Navigation tells whether more text follows and how to get it.
type Navigation struct {
	HasMore    bool   `json:"hasMore"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// ReadResult is document_read's answer.
type ReadResult struct {
	Name       string     `json:"name"`
	Path       string     `json:"path"`
	Format     Format     `json:"format"`
	Selection  Selection  `json:"selection"`
	Segments   []Segment  `json:"segments"`
	Stats      ReadStats  `json:"stats"`
	Navigation Navigation `json:"navigation"`
	Warnings   []string   `json:"warnings,omitempty"`
}

// Read returns a bounded slice of the document starting at a page or a
// cursor, with a cursor to continue.
func (s *Service) Read(ctx context.Context, req ReadRequest) (*ReadResult, error) {
	if req.Page != 0 && req.Cursor != "" {
		return nil, errorf(CodeInvalidArgument, "page and cursor are mutually exclusive; give one of them")
	}
	if req.Page < 0 || req.MaxChars < 0 || req.MaxPages < 0 {
		return nil, errorf(CodeInvalidArgument, "page, max_chars and max_pages must be positive")
	}
	d, err := s.open(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	pageIdx, offset := 0, 0
	switch {
	case req.Cursor != "":
		if pageIdx, offset, err = d.parseCursor(req.Cursor); err != nil {
			return nil, err
		}
	case req.Page != 0:
		if req.Page > len(d.ex.Pages) {
			return nil, errorf(CodeInvalidArgument, "page %d is out of range; the document has %d page(s)", req.Page, len(d.ex.Pages))
		}
		pageIdx = req.Page - 1
	}
	maxChars := clampDefault(req.MaxChars, DefaultReadChars, MaxReadChars)
	maxPages := clampDefault(req.MaxPages, DefaultReadPages, MaxReadPages)
	r := d.read(pageIdx, offset, maxChars, maxPages)
	r.Name, r.Path, r.Format, r.Warnings = filepath.Base(d.key.path), d.key.path, d.ex.Format, d.ex.Warnings
	return r, nil
}

func clampDefault(v, def, hi int) int {
	if v == 0 {
		return def
	}
	return min(v, hi)
}

// read walks pages from (pageIdx, offset) taking at most maxChars
// characters over at most maxPages pages. The cut is exact, so the budget
// is always used in full while text remains.
func (d *document) read(pageIdx, offset, maxChars, maxPages int) *ReadResult {
	pages := d.ex.Pages
	r := &ReadResult{Selection: Selection{StartPage: pageIdx + 1, StartOffset: offset}}
	remaining := maxChars
	for used := 0; used < maxPages && pageIdx < len(pages) && remaining > 0; used++ {
		text := pages[pageIdx].Text[offset:]
		cut, n := runePrefix(text, remaining)
		r.Segments = append(r.Segments, Segment{Page: pageIdx + 1, Offset: offset, EndOffset: offset + cut, Text: text[:cut]})
		r.Stats.Characters += n
		remaining -= n
		r.Selection.EndPage, r.Selection.EndOffset = pageIdx+1, offset+cut
		if cut < len(text) {
			offset += cut
			break
		}
		pageIdx, offset = pageIdx+1, 0
	}
	r.Stats.Pages = len(r.Segments)
	r.Stats.TotalPages = len(pages)
	r.Stats.TotalCharacters = d.ex.Chars
	if pageIdx < len(pages) {
		r.Navigation = Navigation{HasMore: true, NextCursor: d.cursor(pageIdx+1, offset)}
	}
	return r
}

// runePrefix returns the byte length and rune count of the longest prefix of
// s with at most n runes.
func runePrefix(s string, n int) (int, int) {
	i, count := 0, 0
	for i < len(s) && count < n {
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		count++
	}
	return i, count
}
