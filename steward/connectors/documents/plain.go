package documents

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"
)

// extractPlain handles text, data and Markdown files: BOM-aware decoding,
// invalid UTF-8 replaced, NUL bytes refused as a sign of a binary file, and
// Markdown ATX headings recorded.
func extractPlain(data []byte, format Format, out *textOut) error {
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}), bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		dec := unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewDecoder()
		d, err := dec.Bytes(data)
		if err != nil {
			return errorf(CodeMalformed, "invalid UTF-16 text: %v", err)
		}
		data = d
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		data = data[3:]
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return errorf(CodeMalformed, "the file contains NUL bytes: it looks binary, not text")
	}
	text := string(data)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if format == FormatMarkdown {
		inFence := false
		for line := range strings.Lines(text) {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				inFence = !inFence
			}
			if !inFence && strings.HasPrefix(line, "#") {
				level := len(line) - len(strings.TrimLeft(line, "#"))
				if level <= 6 && (len(line) == level || line[level] == ' ') {
					out.heading(level, strings.Trim(strings.TrimSpace(line[level:]), "#"), out.cur.Len())
				}
			}
			if err := out.write(line); err != nil {
				return err
			}
		}
		return nil
	}
	// Large plain files are written in slices so the budget and context
	// checks apply without a per-line cost.
	const slice = 64 << 10
	for len(text) > 0 {
		n := min(slice, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		if err := out.write(text[:n]); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}
