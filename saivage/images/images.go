// Package images admits raster images for the model: it checks the source
// bounds, decodes PNG, JPEG and WebP, applies the JPEG EXIF orientation,
// scales to the maximum dimension and encodes an sRGB PNG. The PNG is what
// the provider receives; nothing else of the source is kept.
package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/draw"
	"image/jpeg"
	"image/png"

	xdraw "golang.org/x/image/draw"
	"golang.org/x/image/webp"
)

// Bounds.
const (
	// MaxSourceBytes bounds an admitted source file.
	MaxSourceBytes = 32 << 20
	// MaxSourcePixels bounds the decoded source (width × height).
	MaxSourcePixels = 40_000_000
	// MaxPNGBytes bounds the selected PNG.
	MaxPNGBytes = 16 << 20
	// DefaultMaxDimension is the longest side sent to the model.
	DefaultMaxDimension = 1600
)

// ErrUnsupported reports a source that is not PNG, JPEG or WebP.
var ErrUnsupported = errors.New("not a PNG, JPEG or WebP image")

// Options tunes Normalize.
type Options struct {
	// MaxDimension is the longest side of the result (default 1600).
	MaxDimension int
}

// Image is a normalized image with its provenance.
type Image struct {
	// PNG is the sRGB PNG sent to the model.
	PNG []byte `json:"-"`
	// SHA256 is the hex digest of PNG.
	SHA256       string `json:"sha256"`
	SourceFormat string `json:"source_format"` // png, jpeg or webp
	SourceBytes  int    `json:"source_bytes"`
	SourceWidth  int    `json:"source_width"`
	SourceHeight int    `json:"source_height"`
	// Orientation is the EXIF orientation applied (1 = none).
	Orientation int `json:"orientation"`
	Width       int `json:"width"`
	Height      int `json:"height"`
}

// Normalize admits src and produces the PNG sent to the model.
func Normalize(src []byte, opts Options) (Image, error) {
	maxDim := opts.MaxDimension
	if maxDim <= 0 {
		maxDim = DefaultMaxDimension
	}
	if len(src) > MaxSourceBytes {
		return Image{}, fmt.Errorf("image is %d bytes, over the %d-byte limit", len(src), MaxSourceBytes)
	}
	format := sniff(src)
	if format == "" {
		return Image{}, ErrUnsupported
	}
	if format == "png" {
		src = dropDamagedAncillary(src)
	}
	var cfg image.Config
	var err error
	switch format {
	case "png":
		cfg, err = png.DecodeConfig(bytes.NewReader(src))
	case "jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(src))
	case "webp":
		cfg, err = webp.DecodeConfig(bytes.NewReader(src))
	}
	if err != nil {
		return Image{}, fmt.Errorf("read %s header: %w", format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Image{}, fmt.Errorf("%s image has no pixels (%dx%d)", format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxSourcePixels {
		return Image{}, fmt.Errorf("image is %dx%d, over the %d-pixel limit", cfg.Width, cfg.Height, MaxSourcePixels)
	}
	var img image.Image
	switch format {
	case "png":
		img, err = png.Decode(bytes.NewReader(src))
	case "jpeg":
		img, err = jpeg.Decode(bytes.NewReader(src))
	case "webp":
		img, err = webp.Decode(bytes.NewReader(src))
	}
	if err != nil {
		return Image{}, fmt.Errorf("decode %s: %w", format, err)
	}
	out := Image{SourceFormat: format, SourceBytes: len(src), SourceWidth: cfg.Width, SourceHeight: cfg.Height, Orientation: 1}
	if format == "jpeg" {
		out.Orientation = jpegOrientation(src)
	}
	oriented := orient(img, out.Orientation)
	b := oriented.Bounds()
	w, h := b.Dx(), b.Dy()
	if long := max(w, h); long > maxDim {
		w = max(1, (w*maxDim+long/2)/long)
		h = max(1, (h*maxDim+long/2)/long)
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	if w == b.Dx() && h == b.Dy() {
		draw.Draw(dst, dst.Bounds(), oriented, b.Min, draw.Src)
	} else {
		xdraw.CatmullRom.Scale(dst, dst.Bounds(), oriented, b, xdraw.Src, nil)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, dst); err != nil {
		return Image{}, fmt.Errorf("encode png: %w", err)
	}
	out.PNG = withSRGB(buf.Bytes())
	if len(out.PNG) > MaxPNGBytes {
		return Image{}, fmt.Errorf("normalized PNG is %d bytes, over the %d-byte limit", len(out.PNG), MaxPNGBytes)
	}
	sum := sha256.Sum256(out.PNG)
	out.SHA256, out.Width, out.Height = hex.EncodeToString(sum[:]), w, h
	return out, nil
}

func sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "jpeg"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "webp"
	}
	return ""
}

// dropDamagedAncillary removes ancillary PNG chunks (colour profiles, text,
// EXIF …) whose CRC does not match, as libpng does by default: none of them
// reaches the normalized PNG, and Go's decoder would otherwise refuse an
// image whose pixels are intact. A damaged critical chunk, or a stream that
// does not parse as chunks, is left for the decoder to refuse.
func dropDamagedAncillary(p []byte) []byte {
	var out []byte
	for i := 8; i < len(p); {
		if len(p)-i < 12 {
			return p
		}
		n := int(binary.BigEndian.Uint32(p[i:]))
		end := i + 12 + n
		if n < 0 || end > len(p) || end < i {
			return p
		}
		ancillary := p[i+4]&0x20 != 0
		if ancillary && crc32.ChecksumIEEE(p[i+4:i+8+n]) != binary.BigEndian.Uint32(p[i+8+n:]) {
			if out == nil {
				out = append(out, p[:i]...)
			}
		} else if out != nil {
			out = append(out, p[i:end]...)
		}
		i = end
	}
	if out == nil {
		return p
	}
	return out
}

// withSRGB inserts an sRGB chunk (perceptual intent) right after IHDR: the
// pixels are sRGB because every decoder here yields sRGB-interpreted
// samples and no source colour profile is carried over.
func withSRGB(p []byte) []byte {
	const ihdrEnd = 8 + 8 + 13 + 4
	chunk := make([]byte, 0, 13)
	chunk = binary.BigEndian.AppendUint32(chunk, 1)
	chunk = append(chunk, 's', 'R', 'G', 'B', 0)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := make([]byte, 0, len(p)+len(chunk))
	out = append(out, p[:ihdrEnd]...)
	out = append(out, chunk...)
	return append(out, p[ihdrEnd:]...)
}

// jpegOrientation returns the EXIF orientation (1..8) of a JPEG, 1 when
// absent or unreadable.
func jpegOrientation(b []byte) int {
	i := 2
	for i+4 <= len(b) {
		if b[i] != 0xff {
			return 1
		}
		marker := b[i+1]
		if marker == 0xda || marker == 0xd9 { // start of scan, end of image
			return 1
		}
		size := int(binary.BigEndian.Uint16(b[i+2:]))
		if size < 2 || i+2+size > len(b) {
			return 1
		}
		seg := b[i+4 : i+2+size]
		if marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			if o := tiffOrientation(seg[6:]); o >= 1 && o <= 8 {
				return o
			}
			return 1
		}
		i += 2 + size
	}
	return 1
}

func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	off := int(bo.Uint32(t[4:]))
	if off < 8 || off+2 > len(t) {
		return 0
	}
	n := int(bo.Uint16(t[off:]))
	for k := range n {
		e := off + 2 + 12*k
		if e+12 > len(t) {
			return 0
		}
		if bo.Uint16(t[e:]) == 0x0112 && bo.Uint16(t[e+2:]) == 3 { // Orientation, SHORT
			return int(bo.Uint16(t[e+8:]))
		}
	}
	return 0
}

// orient applies an EXIF orientation to img.
func orient(img image.Image, o int) image.Image {
	if o <= 1 || o > 8 {
		return img
	}
	b := img.Bounds()
	W, H := b.Dx(), b.Dy()
	w, h := W, H
	if o >= 5 {
		w, h = H, W
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = W-1-x, y
			case 3:
				sx, sy = W-1-x, H-1-y
			case 4:
				sx, sy = x, H-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, H-1-x
			case 7:
				sx, sy = W-1-y, H-1-x
			case 8:
				sx, sy = W-1-y, x
			}
			dst.Set(x, y, img.At(b.Min.X+sx, b.Min.Y+sy))
		}
	}
	return dst
}
