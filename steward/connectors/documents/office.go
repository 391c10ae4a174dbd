package documents

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
)

// checkZipDirectory reads only the end-of-central-directory record and the
// central directory, refusing multipart and ZIP64 archives, too many entries
// and too many declared uncompressed bytes before anything is inflated.
func checkZipDirectory(r io.ReaderAt, size int64, lim Limits) error {
	const eocdLen = 22
	if size < eocdLen {
		return errorf(CodeMalformed, "the file is too small to be an Office document (damaged or truncated)")
	}
	head := make([]byte, 4)
	if _, err := r.ReadAt(head, 0); err == nil && bytes.Equal(head, []byte("PK\x07\x08")) {
		return errorf(CodeArchiveLimit, "multipart (spanned) ZIP archives are not supported")
	}
	tailLen := min(size, int64(eocdLen+65535))
	tail := make([]byte, tailLen)
	if _, err := r.ReadAt(tail, size-tailLen); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read ZIP directory: %w", err)
	}
	i := bytes.LastIndex(tail, []byte("PK\x05\x06"))
	if i < 0 || len(tail)-i < eocdLen {
		return errorf(CodeMalformed, "the Office document is damaged or truncated (no ZIP directory found)")
	}
	e := tail[i:]
	disk, cdDisk := binary.LittleEndian.Uint16(e[4:]), binary.LittleEndian.Uint16(e[6:])
	onDisk, total := binary.LittleEndian.Uint16(e[8:]), binary.LittleEndian.Uint16(e[10:])
	cdSize, cdOff := binary.LittleEndian.Uint32(e[12:]), binary.LittleEndian.Uint32(e[16:])
	if disk != 0 || cdDisk != 0 || onDisk != total {
		return errorf(CodeArchiveLimit, "multipart ZIP archives are not supported")
	}
	if total == 0xFFFF || cdSize == 0xFFFFFFFF || cdOff == 0xFFFFFFFF ||
		(i >= 20 && bytes.Equal(tail[i-20:i-16], []byte("PK\x06\x07"))) {
		return errorf(CodeArchiveLimit, "ZIP64 archives are not supported")
	}
	if int(total) > lim.ArchiveMaxEntries {
		return errorf(CodeArchiveLimit, "the archive has %d entries; the limit is %d", total, lim.ArchiveMaxEntries)
	}
	return nil
}

// openOffice opens the ZIP after checkZipDirectory and checks the declared
// sizes of every entry.
func openOffice(ctx context.Context, r io.ReaderAt, size int64, lim Limits) (*zip.Reader, error) {
	if err := checkZipDirectory(r, size, lim); err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(&ctxReaderAt{ctx: ctx, r: r}, size)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errorf(CodeMalformed, "the Office document is damaged or truncated: %v", err)
	}
	if len(zr.File) > lim.ArchiveMaxEntries {
		return nil, errorf(CodeArchiveLimit, "the archive has %d entries; the limit is %d", len(zr.File), lim.ArchiveMaxEntries)
	}
	var declared uint64
	for _, f := range zr.File {
		if f.UncompressedSize64 >= 0xFFFFFFFF || f.CompressedSize64 >= 0xFFFFFFFF {
			return nil, errorf(CodeArchiveLimit, "ZIP64 archives are not supported")
		}
		declared += f.UncompressedSize64
	}
	if declared > uint64(lim.ArchiveMaxBytes) {
		return nil, errorf(CodeArchiveLimit, "the archive declares %d uncompressed bytes; the limit is %d (DOCUMENT_ARCHIVE_MAX_BYTES)", declared, lim.ArchiveMaxBytes)
	}
	return zr, nil
}

func extractOffice(ctx context.Context, r io.ReaderAt, size int64, format Format, lim Limits, out *textOut) error {
	zr, err := openOffice(ctx, r, size, lim)
	if err != nil {
		return err
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[strings.TrimPrefix(f.Name, "/")] = f
	}
	switch format {
	case FormatDOCX:
		return extractDOCX(ctx, files, out)
	case FormatPPTX:
		return extractPPTX(ctx, files, out)
	default:
		return extractODT(ctx, files, out)
	}
}

// walkXML streams the XML of one ZIP member through fn. Inflation is bounded
// by the declared size (already checked) and stops when ctx is done.
func walkXML(ctx context.Context, f *zip.File, fn func(xml.Token) error) error {
	rc, err := f.Open()
	if err != nil {
		return errorf(CodeMalformed, "open %s in the document: %v", f.Name, err)
	}
	defer rc.Close()
	d := xml.NewDecoder(&ctxReader{ctx: ctx, r: io.LimitReader(rc, int64(f.UncompressedSize64)+1)})
	d.Strict = false
	for n := 0; ; n++ {
		tok, err := d.RawToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errorf(CodeMalformed, "%s in the document is damaged: %v", f.Name, err)
		}
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(tok); err != nil {
			return err
		}
	}
}

func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// relationships reads an OOXML .rels part: Id → target path resolved
// against base, plus the target of the first relationship whose type ends
// with typeSuffix.
func relationships(ctx context.Context, files map[string]*zip.File, relsPath, base, typeSuffix string) (map[string]string, string, error) {
	ids := map[string]string{}
	typed := ""
	f := files[relsPath]
	if f == nil {
		return ids, "", nil
	}
	err := walkXML(ctx, f, func(tok xml.Token) error {
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "Relationship" {
			target := attr(se, "Target")
			if attr(se, "TargetMode") == "External" {
				return nil
			}
			if strings.HasPrefix(target, "/") {
				target = strings.TrimPrefix(target, "/")
			} else {
				target = path.Join(base, target)
			}
			ids[attr(se, "Id")] = target
			if typed == "" && typeSuffix != "" && strings.HasSuffix(attr(se, "Type"), typeSuffix) {
				typed = target
			}
		}
		return nil
	})
	return ids, typed, err
}

// headingLevelFromStyle maps Word style ids such as Heading1 or Title to a
// heading level.
func headingLevelFromStyle(style string) int {
	s := strings.ToLower(strings.ReplaceAll(style, " ", ""))
	switch {
	case s == "title":
		return 1
	case strings.HasPrefix(s, "heading"):
		if n, err := strconv.Atoi(strings.TrimPrefix(s, "heading")); err == nil && n >= 1 && n <= 9 {
			return n
		}
	}
	return 0
}

func extractDOCX(ctx context.Context, files map[string]*zip.File, out *textOut) error {
	_, main, err := relationships(ctx, files, "_rels/.rels", "", "/officeDocument")
	if err != nil {
		return err
	}
	if main == "" || files[main] == nil {
		main = "word/document.xml"
	}
	if files[main] == nil {
		return errorf(CodeMalformed, "not a Word document: word/document.xml is missing")
	}
	dir := path.Dir(main)
	parts := []string{main}
	for _, extra := range []string{"footnotes.xml", "endnotes.xml", "comments.xml"} {
		if files[path.Join(dir, extra)] != nil {
			parts = append(parts, path.Join(dir, extra))
		}
	}
	for pi, part := range parts {
		if pi > 0 {
			if err := out.newline(); err != nil {
				return err
			}
		}
		type para struct{ start, level int }
		var stack []para
		inText, inRun, inCell := false, 0, 0
		err := walkXML(ctx, files[part], func(tok xml.Token) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "p":
					stack = append(stack, para{start: out.cur.Len()})
				case "pStyle":
					if len(stack) > 0 && pi == 0 {
						stack[len(stack)-1].level = headingLevelFromStyle(attr(t, "val"))
					}
				case "r":
					inRun++
				case "tc":
					inCell++
				case "t":
					inText = true
				case "tab": // also a tab-stop definition inside w:tabs, outside runs
					if inRun > 0 {
						return out.write("\t")
					}
				case "br", "cr":
					return out.write("\n")
				case "noBreakHyphen":
					return out.write("-")
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "r":
					inRun = max(0, inRun-1)
				case "t":
					inText = false
				case "p":
					if n := len(stack); n > 0 {
						p := stack[n-1]
						stack = stack[:n-1]
						if p.level > 0 && p.start <= out.cur.Len() {
							out.heading(p.level, out.cur.String()[p.start:], p.start)
						}
					}
					if inCell > 0 { // paragraphs within a table cell stay on its row
						return out.write(" ")
					}
					return out.write("\n")
				case "tc":
					inCell = max(0, inCell-1)
					return out.write("\t")
				case "tr":
					return out.write("\n")
				}
			case xml.CharData:
				if inText {
					return out.write(string(t))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func extractPPTX(ctx context.Context, files map[string]*zip.File, out *textOut) error {
	var slides []string
	if files["ppt/presentation.xml"] != nil {
		rels, _, err := relationships(ctx, files, "ppt/_rels/presentation.xml.rels", "ppt", "")
		if err != nil {
			return err
		}
		err = walkXML(ctx, files["ppt/presentation.xml"], func(tok xml.Token) error {
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "sldId" {
				if t := rels[attr(se, "id")]; t != "" && files[t] != nil {
					slides = append(slides, t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(slides) == 0 { // no usable presentation.xml: slides by number
		for name := range files {
			if strings.HasPrefix(name, "ppt/slides/slide") && strings.HasSuffix(name, ".xml") {
				slides = append(slides, name)
			}
		}
		sort.Slice(slides, func(i, j int) bool { return slideNumber(slides[i]) < slideNumber(slides[j]) })
	}
	if len(slides) == 0 {
		return errorf(CodeMalformed, "not a PowerPoint presentation: no slides found")
	}
	for i, s := range slides {
		if i > 0 {
			out.pageBreak(i + 1)
		}
		inText, isTitle, spStart := false, false, 0
		err := walkXML(ctx, files[s], func(tok xml.Token) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "sp":
					isTitle, spStart = false, out.cur.Len()
				case "ph":
					typ := attr(t, "type")
					isTitle = typ == "title" || typ == "ctrTitle"
				case "t":
					inText = true
				case "br":
					return out.write("\n")
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "t":
					inText = false
				case "p":
					return out.newline()
				case "sp":
					if isTitle && spStart <= out.cur.Len() {
						out.heading(1, out.cur.String()[spStart:], spStart)
						isTitle = false
					}
				case "tc":
					return out.write("\t")
				}
			case xml.CharData:
				if inText {
					return out.write(string(t))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func slideNumber(name string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "ppt/slides/slide"), ".xml"))
	return n
}

func extractODT(ctx context.Context, files map[string]*zip.File, out *textOut) error {
	f := files["content.xml"]
	if f == nil {
		return errorf(CodeMalformed, "not an OpenDocument text: content.xml is missing")
	}
	type para struct{ start, level int }
	var stack []para
	return walkXML(ctx, f, func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "p", "h":
				p := para{start: out.cur.Len()}
				if t.Name.Local == "h" {
					p.level, _ = strconv.Atoi(attr(t, "outline-level"))
					p.level = max(1, p.level)
				}
				stack = append(stack, p)
			case "s":
				n, err := strconv.Atoi(attr(t, "c"))
				if err != nil || n < 1 {
					n = 1
				}
				return out.write(strings.Repeat(" ", min(n, 1000)))
			case "tab":
				return out.write("\t")
			case "line-break":
				return out.write("\n")
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "p", "h":
				if n := len(stack); n > 0 {
					p := stack[n-1]
					stack = stack[:n-1]
					if p.level > 0 && p.start <= out.cur.Len() {
						out.heading(p.level, out.cur.String()[p.start:], p.start)
					}
				}
				return out.write("\n")
			case "table-cell":
				return out.write("\t")
			case "table-row":
				return out.newline()
			}
		case xml.CharData:
			if len(stack) > 0 {
				return out.write(string(t))
			}
		}
		return nil
	})
}
