package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/images"
)

// quadColors are the quadrants of the test images: top-left, top-right,
// bottom-left, bottom-right.
var quadColors = [4]color.NRGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {255, 255, 255, 255}}

// quadPNG encodes a w×h image of the four quadColors quadrants.
func quadPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			q := 0
			if x >= w/2 {
				q++
			}
			if y >= h/2 {
				q += 2
			}
			img.SetNRGBA(x, y, quadColors[q])
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// viewImageTurn puts data at name in the project, has the Analyst call
// view_image on it once and returns the provider's two requests.
func viewImageTurn(t *testing.T, name string, data []byte) (*env, []llmtest.Request) {
	t.Helper()
	e := newEnv(t, envOptions{})
	if err := os.WriteFile(filepath.Join(e.dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.script.Add("analyst", call("view_image", map[string]any{"path": name}), text("Seen."))
	if _, _, err := e.rt.Analyst().Submit(ctx, "Look at "+name); err != nil {
		t.Fatal(err)
	}
	if res, err := e.rt.Analyst().Wait(ctx); err != nil || res.Error != "" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	return e, reqs
}

// checkQuad decodes what the provider received and checks it is an sRGB PNG
// of size w×h showing the four quadrants (sampled at their centres).
func checkQuad(t *testing.T, got []byte, w, h int) {
	t.Helper()
	if !bytes.HasPrefix(got, []byte("\x89PNG\r\n\x1a\n")) || !bytes.Contains(got[:bytes.Index(got, []byte("IDAT"))], []byte("sRGB")) {
		t.Fatal("the provider did not receive an sRGB PNG")
	}
	img, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("received %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	near := func(a, b uint8) bool { return max(a, b)-min(a, b) < 3 }
	for i, p := range []image.Point{{w / 4, h / 4}, {3 * w / 4, h / 4}, {w / 4, 3 * h / 4}, {3 * w / 4, 3 * h / 4}} {
		c := color.NRGBAModel.Convert(img.At(p.X, p.Y)).(color.NRGBA)
		if want := quadColors[i]; !near(c.R, want.R) || !near(c.G, want.G) || !near(c.B, want.B) || c.A != 255 {
			t.Errorf("pixel %v = %v, want %v", p, c, want)
		}
	}
}

// TestViewImageFormats: a PNG over 1600 px and a (lossless, real) WebP reach
// the provider as the normalized sRGB PNG, the PNG scaled to 1600 px on its
// longest side, the WebP at its own size.
func TestViewImageFormats(t *testing.T) {
	webpSrc, err := os.ReadFile(filepath.Join("..", "images", "testdata", "quad.webp")) // cwebp -lossless, see its README
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		src    []byte
		format string
		w, h   int
	}{
		{"wide.png", quadPNG(t, 2400, 1200), "png", 1600, 800},
		{"quad.webp", webpSrc, "webp", 64, 48},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := images.Normalize(c.src, images.Options{})
			if err != nil {
				t.Fatal(err)
			}
			e, reqs := viewImageTurn(t, c.name, c.src)
			if got := toolImages(t, reqs[0]); len(got) != 0 {
				t.Errorf("first request carries %d images", len(got))
			}
			got := toolImages(t, reqs[1])
			if len(got) != 1 {
				t.Fatalf("%d images sent", len(got))
			}
			checkQuad(t, got[0], c.w, c.h)
			if !bytes.Equal(got[0], want.PNG) {
				t.Error("the provider's image differs from the normalized PNG")
			}
			if !bytes.Contains(reqs[1].Raw, []byte(fmt.Sprintf(`\"source_format\": \"%s\"`, c.format))) {
				t.Errorf("tool text does not name source format %s", c.format)
			}
			published, _ := filepath.Glob(filepath.Join(e.dir, ".saivage", "images", "*.png"))
			if len(published) != 1 {
				t.Fatalf("published %v", published)
			}
			if b, err := os.ReadFile(published[0]); err != nil || !bytes.Equal(b, want.PNG) {
				t.Errorf("published image differs: %v", err)
			}
		})
	}
}

// pngHeaderOnly is a PNG whose IHDR claims w×h pixels and that carries no
// pixel data: the bound is checked from the header, before any decoding.
func pngHeaderOnly(w, h uint32) []byte {
	chunk := func(typ string, data []byte) []byte {
		var b []byte
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, typ...)
		b = append(b, data...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8-bit RGB
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, chunk("IHDR", ihdr)...)
	out = append(out, chunk("IDAT", nil)...)
	return append(out, chunk("IEND", nil)...)
}

// TestViewImageOverBounds: an image over 40 Mpx or over 32 MiB is refused
// with a tool error naming the limit; nothing is sent or published as an
// image.
func TestViewImageOverBounds(t *testing.T) {
	big := make([]byte, images.MaxSourceBytes+1)
	copy(big, pngHeaderOnly(64, 48))
	cases := []struct {
		name, want string
		src        []byte
	}{
		{"huge.png", "huge.png: image is 8000x5001, over the 40000000-pixel limit", pngHeaderOnly(8000, 5001)},
		{"heavy.png", "heavy.png: image is 33554433 bytes, over the 33554432-byte limit", big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, reqs := viewImageTurn(t, c.name, c.src)
			if got := toolImages(t, reqs[1]); len(got) != 0 {
				t.Errorf("%d images sent", len(got))
			}
			if bytes.Contains(reqs[1].Raw, []byte("image_url")) {
				t.Error("the request carries an image part")
			}
			var result string
			for _, r := range e.rows("", "analyst") {
				if r.Kind == "tool_result" && r.Name == "view_image" {
					result = string(r.Content)
				}
			}
			if !strings.Contains(result, c.want) || !strings.Contains(string(reqs[1].Raw), c.want) {
				t.Errorf("tool result %s, want the error %q in it and in the request", result, c.want)
			}
			if published, _ := filepath.Glob(filepath.Join(e.dir, ".saivage", "images", "*")); len(published) != 0 {
				t.Errorf("published %v", published)
			}
		})
	}
}
