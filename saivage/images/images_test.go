package images_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/images"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// near reports whether two colours are within tol per channel (JPEG).
func near(a color.Color, want color.NRGBA, tol int) bool {
	r, g, b, _ := color.NRGBAModel.Convert(a).RGBA()
	d := func(x uint32, y uint8) bool { v := int(x>>8) - int(y); return v <= tol && v >= -tol }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

var (
	red   = color.NRGBA{255, 0, 0, 255}
	green = color.NRGBA{0, 255, 0, 255}
	blue  = color.NRGBA{0, 0, 255, 255}
	white = color.NRGBA{255, 255, 255, 255}
)

func TestNormalizeFormatsAndOrientation(t *testing.T) {
	for _, tc := range []struct {
		file, format string
		orientation  int
		srcW, srcH   int
		tol          int
	}{
		{"quad.png", "png", 1, 64, 48, 0},
		{"quad.jpg", "jpeg", 1, 64, 48, 40},
		{"quad.webp", "webp", 1, 64, 48, 0},
		{"rotated.jpg", "jpeg", 6, 48, 64, 40},
	} {
		t.Run(tc.file, func(t *testing.T) {
			src := read(t, tc.file)
			img, err := images.Normalize(src, images.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if img.SourceFormat != tc.format || img.Orientation != tc.orientation || img.SourceWidth != tc.srcW || img.SourceHeight != tc.srcH || img.SourceBytes != len(src) {
				t.Errorf("provenance = %+v", img)
			}
			// Every source displays as the upright 64×48 quad.
			if img.Width != 64 || img.Height != 48 {
				t.Fatalf("size %dx%d", img.Width, img.Height)
			}
			dec, err := png.Decode(bytes.NewReader(img.PNG))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []struct {
				x, y int
				c    color.NRGBA
			}{{8, 8, red}, {56, 8, green}, {8, 40, blue}, {56, 40, white}} {
				if got := dec.At(p.x, p.y); !near(got, p.c, tc.tol) {
					t.Errorf("pixel (%d,%d) = %v, want %v", p.x, p.y, got, p.c)
				}
			}
			sum := sha256.Sum256(img.PNG)
			if img.SHA256 != hex.EncodeToString(sum[:]) {
				t.Error("digest does not match the PNG")
			}
			// The sRGB chunk follows IHDR.
			if string(img.PNG[37:41]) != "sRGB" || img.PNG[41] != 0 {
				t.Errorf("no sRGB chunk after IHDR: % x", img.PNG[33:46])
			}
		})
	}
}

func TestNormalizeScalesToMaxDimension(t *testing.T) {
	big := image.NewNRGBA(image.Rect(0, 0, 4000, 1000))
	var buf bytes.Buffer
	if err := png.Encode(&buf, big); err != nil {
		t.Fatal(err)
	}
	img, err := images.Normalize(buf.Bytes(), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if img.Width != 1600 || img.Height != 400 || img.SourceWidth != 4000 {
		t.Errorf("scaled = %dx%d from %dx%d", img.Width, img.Height, img.SourceWidth, img.SourceHeight)
	}
	small, _ := images.Normalize(buf.Bytes(), images.Options{MaxDimension: 100})
	if small.Width != 100 || small.Height != 25 {
		t.Errorf("max 100: %dx%d", small.Width, small.Height)
	}
}

// pngHeader is a PNG signature and IHDR claiming w×h: DecodeConfig reads
// only this much, so the pixel bound is checked before any decoding.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(binary.BigEndian.AppendUint32(nil, 13))
	b.Write(chunk)
	b.Write(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(chunk)))
	return b.Bytes()
}

func TestNormalizeRefusals(t *testing.T) {
	if _, err := images.Normalize([]byte("GIF89a..."), images.Options{}); !errors.Is(err, images.ErrUnsupported) {
		t.Errorf("gif: %v", err)
	}
	if _, err := images.Normalize(pngHeader(8000, 6000), images.Options{}); err == nil || !strings.Contains(err.Error(), "40000000-pixel limit") {
		t.Errorf("48 Mpx: %v", err)
	}
	if _, err := images.Normalize(make([]byte, images.MaxSourceBytes+1), images.Options{}); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("oversized source: %v", err)
	}
	if _, err := images.Normalize(read(t, "quad.png")[:60], images.Options{}); err == nil {
		t.Error("truncated PNG accepted")
	}
}

// FuzzNormalize: any input is refused or yields a PNG within the bounds
// whose digest matches.
func FuzzNormalize(f *testing.F) {
	for _, name := range []string{"quad.png", "quad.jpg", "quad.webp", "rotated.jpg"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := images.Normalize(data, images.Options{MaxDimension: 64})
		if err != nil {
			return
		}
		if img.Width < 1 || img.Height < 1 || max(img.Width, img.Height) > 64 || img.Orientation < 1 || img.Orientation > 8 {
			t.Fatalf("image = %+v", img)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img.PNG))
		if err != nil || cfg.Width != img.Width || cfg.Height != img.Height {
			t.Fatalf("PNG %v: %+v", err, cfg)
		}
		sum := sha256.Sum256(img.PNG)
		if hex.EncodeToString(sum[:]) != img.SHA256 {
			t.Fatal("digest mismatch")
		}
	})
}

// TestNormalizeDropsDamagedAncillaryChunks: an ancillary chunk with a bad
// CRC (as in server-everything's tiny image, whose iCCP chunk is damaged)
// is dropped like libpng does; a damaged critical chunk is still refused.
func TestNormalizeDropsDamagedAncillaryChunks(t *testing.T) {
	src := read(t, "quad.png")
	const ihdrEnd = 8 + 8 + 13 + 4
	chunk := func(typ, data string, crc uint32) []byte {
		c := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		c = append(c, typ+data...)
		return binary.BigEndian.AppendUint32(c, crc)
	}
	withChunk := func(c []byte) []byte {
		return append(append(append([]byte{}, src[:ihdrEnd]...), c...), src[ihdrEnd:]...)
	}
	want, err := images.Normalize(src, images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := images.Normalize(withChunk(chunk("tEXt", "Comment\x00hello", 12345)), images.Options{})
	if err != nil || got.SHA256 != want.SHA256 {
		t.Fatalf("damaged tEXt: %v (digest %s, want %s)", err, got.SHA256, want.SHA256)
	}
	damaged := append([]byte{}, src...)
	damaged[len(damaged)-13] ^= 0xff // the last IDAT's CRC
	if _, err := images.Normalize(damaged, images.Options{}); err == nil {
		t.Error("a damaged critical chunk was accepted")
	}
}
