package documents

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"fmt"
	"html"
	"strings"

	"golang.org/x/text/encoding/charmap"
)

// The generators below build small but genuine documents for the tests and
// for `steward bench documents`, so neither depends on private files.

// pdfOptions shapes a generated PDF.
type pdfOptions struct {
	ImageOnly bool // pages draw an image and no text
	// Encrypted encrypts the file with the standard security handler
	// (revision 3, 128-bit RC4) under UserPassword; an empty user password
	// lets any reader open it, as many "secured" PDFs do.
	Encrypted    bool
	UserPassword string
	Compress     bool // content streams are FlateDecode-compressed
}

// generatePDF returns a PDF with one page per element of pages; each line of
// a page's text becomes one text line set in Helvetica.
func generatePDF(pages []string, opts pdfOptions) []byte {
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) int {
		offsets = append(offsets, b.Len())
		n := len(offsets)
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n, body)
		return n
	}
	var sec *pdfSecurity
	if opts.Encrypted {
		sec = newPDFSecurity(opts.UserPassword, "owner-"+opts.UserPassword)
	}
	stream := func(dict string, data []byte) int {
		if opts.Compress {
			var z bytes.Buffer
			w := zlib.NewWriter(&z)
			w.Write(data)
			w.Close()
			data = z.Bytes()
			dict += " /Filter /FlateDecode"
		}
		if sec != nil {
			data = sec.encrypt(len(offsets)+1, data)
		}
		return obj(fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data))
	}
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	offsets = append(offsets, 0) // 2: page tree, written last
	pagesAt := len(offsets) - 1
	font := obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	var image int
	if opts.ImageOnly {
		image = stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0})
	}
	var kids []string
	for _, text := range pages {
		var c bytes.Buffer
		if opts.ImageOnly {
			c.WriteString("q 200 0 0 200 100 400 cm /Im1 Do Q\n")
		} else {
			c.WriteString("BT /F1 12 Tf 14 TL 72 760 Td\n")
			for i, line := range strings.Split(text, "\n") {
				if i > 0 {
					c.WriteString("T*\n")
				}
				fmt.Fprintf(&c, "(%s) Tj\n", pdfEscape(winAnsi(line)))
			}
			c.WriteString("ET\n")
		}
		content := stream("", c.Bytes())
		res := fmt.Sprintf("/Font << /F1 %d 0 R >>", font)
		if opts.ImageOnly {
			res += fmt.Sprintf(" /XObject << /Im1 %d 0 R >>", image)
		}
		p := obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << %s >> /Contents %d 0 R >>", res, content))
		kids = append(kids, fmt.Sprintf("%d 0 R", p))
	}
	offsets[pagesAt] = b.Len()
	fmt.Fprintf(&b, "2 0 obj\n<< /Type /Pages /Kids [%s] /Count %d >>\nendobj\n", strings.Join(kids, " "), len(kids))
	encrypt := ""
	if sec != nil {
		e := obj(fmt.Sprintf("<< /Filter /Standard /V 2 /R 3 /Length 128 /O <%x> /U <%x> /P %d >>", sec.o, sec.u, int32(-4)))
		encrypt = fmt.Sprintf(" /Encrypt %d 0 R /ID [<%x> <%x>]", e, pdfFileID, pdfFileID)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, encrypt, xref)
	return b.Bytes()
}

// winAnsi encodes s for a WinAnsiEncoding font; other characters become "?".
func winAnsi(s string) string {
	var b strings.Builder
	for _, r := range s {
		if c, ok := charmap.Windows1252.EncodeRune(r); ok {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

func pdfEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	return r.Replace(s)
}

// zipFiles writes name → content pairs, in order, to a ZIP.
func zipFiles(files ...[2]string) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, f := range files {
		fw, _ := w.Create(f[0])
		fw.Write([]byte(f[1]))
	}
	w.Close()
	return b.Bytes()
}

const xmlHeader = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"

// generateDOCX returns a Word document whose paragraphs are paras; a
// paragraph starting with "# " gets the Heading1 style.
func generateDOCX(paras []string) []byte {
	var body strings.Builder
	for _, p := range paras {
		style := ""
		if t, ok := strings.CutPrefix(p, "# "); ok {
			p, style = t, `<w:pPr><w:pStyle w:val="Heading1"/></w:pPr>`
		}
		fmt.Fprintf(&body, `<w:p>%s<w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>`, style, html.EscapeString(p))
	}
	return zipFiles(
		[2]string{"[Content_Types].xml", xmlHeader + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		[2]string{"_rels/.rels", xmlHeader + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		[2]string{"word/document.xml", xmlHeader + `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body.String() + `</w:body></w:document>`},
	)
}

// generatePPTX returns a presentation with one slide per element: the first
// line is the slide title, the rest body paragraphs.
func generatePPTX(slides []string) []byte {
	files := [][2]string{
		{"[Content_Types].xml", xmlHeader + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>`},
		{"_rels/.rels", xmlHeader + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/></Relationships>`},
	}
	var ids, rels strings.Builder
	for i, s := range slides {
		fmt.Fprintf(&ids, `<p:sldId id="%d" r:id="rId%d"/>`, 256+i, i+1)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide%d.xml"/>`, i+1, i+1)
		title, body, _ := strings.Cut(s, "\n")
		var paras strings.Builder
		for _, l := range strings.Split(body, "\n") {
			fmt.Fprintf(&paras, `<a:p><a:r><a:t>%s</a:t></a:r></a:p>`, html.EscapeString(l))
		}
		files = append(files, [2]string{fmt.Sprintf("ppt/slides/slide%d.xml", i+1), xmlHeader +
			`<p:sld xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"><p:cSld><p:spTree>` +
			`<p:sp><p:nvSpPr><p:cNvPr id="2" name="Title"/><p:cNvSpPr/><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>` + html.EscapeString(title) + `</a:t></a:r></a:p></p:txBody></p:sp>` +
			`<p:sp><p:nvSpPr><p:cNvPr id="3" name="Body"/><p:cNvSpPr/><p:nvPr><p:ph idx="1"/></p:nvPr></p:nvSpPr><p:txBody>` + paras.String() + `</p:txBody></p:sp>` +
			`</p:spTree></p:cSld></p:sld>`})
	}
	files = append(files,
		[2]string{"ppt/presentation.xml", xmlHeader + `<p:presentation xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><p:sldIdLst>` + ids.String() + `</p:sldIdLst></p:presentation>`},
		[2]string{"ppt/_rels/presentation.xml.rels", xmlHeader + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + rels.String() + `</Relationships>`},
	)
	return zipFiles(files...)
}

// generateODT returns an OpenDocument text; a paragraph starting with "# "
// becomes a level-1 heading.
func generateODT(paras []string) []byte {
	var body strings.Builder
	for _, p := range paras {
		if t, ok := strings.CutPrefix(p, "# "); ok {
			fmt.Fprintf(&body, `<text:h text:outline-level="1">%s</text:h>`, html.EscapeString(t))
			continue
		}
		fmt.Fprintf(&body, `<text:p>%s</text:p>`, html.EscapeString(p))
	}
	return zipFiles(
		[2]string{"mimetype", "application/vnd.oasis.opendocument.text"},
		[2]string{"content.xml", xmlHeader + `<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>` + body.String() + `</office:text></office:body></office:document-content>`},
	)
}

// PDF standard security handler, revision 3 (PDF 32000-1:2008 §7.6.3):
// 128-bit RC4 keys derived from the padded passwords, the permissions and
// the file identifier.
var (
	pdfPasswordPad = []byte("\x28\xbf\x4e\x5e\x4e\x75\x8a\x41\x64\x00\x4e\x56\xff\xfa\x01\x08\x2e\x2e\x00\xb6\xd0\x68\x3e\x80\x2f\x0c\xa9\xfe\x64\x53\x69\x7a")
	pdfFileID      = []byte("0123456789abcdef")
)

const pdfPermissions = uint32(0xFFFFFFFC)

type pdfSecurity struct {
	key, o, u []byte
}

func padPassword(pw string) []byte { return append([]byte(pw), pdfPasswordPad...)[:32] }

// md5Rounds is MD5 of data followed by 50 re-hashings, as revision 3 keys are made.
func md5Rounds(data []byte) []byte {
	sum := md5.Sum(data)
	for range 50 {
		sum = md5.Sum(sum[:])
	}
	return sum[:]
}

// rc4Rounds encrypts data with key, then 19 more times with key XOR i.
func rc4Rounds(key, data []byte) []byte {
	out := append([]byte{}, data...)
	k := make([]byte, len(key))
	for i := range 20 {
		for j := range key {
			k[j] = key[j] ^ byte(i)
		}
		c, _ := rc4.NewCipher(k)
		c.XORKeyStream(out, out)
	}
	return out
}

// newPDFSecurity computes O (algorithm 3), the file key (algorithm 2) and U
// (algorithm 5).
func newPDFSecurity(user, owner string) *pdfSecurity {
	o := rc4Rounds(md5Rounds(padPassword(owner)), padPassword(user))
	var seed bytes.Buffer
	seed.Write(padPassword(user))
	seed.Write(o)
	binary.Write(&seed, binary.LittleEndian, pdfPermissions)
	seed.Write(pdfFileID)
	key := md5Rounds(seed.Bytes())
	h := md5.Sum(append(append([]byte{}, pdfPasswordPad...), pdfFileID...))
	u := append(rc4Rounds(key, h[:]), make([]byte, 16)...)
	return &pdfSecurity{key: key, o: o, u: u}
}

// encrypt encrypts a string or stream of object num (generation 0)
// (algorithm 1).
func (s *pdfSecurity) encrypt(num int, data []byte) []byte {
	k := append(append([]byte{}, s.key...), byte(num), byte(num>>8), byte(num>>16), 0, 0)
	sum := md5.Sum(k)
	c, _ := rc4.NewCipher(sum[:min(len(s.key)+5, 16)])
	out := make([]byte, len(data))
	c.XORKeyStream(out, data)
	return out
}
