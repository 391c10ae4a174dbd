// Command icongen draws the app's PNG icons (the same mark as icon.svg, on a
// full-bleed background so that they also serve as maskable icons):
//
//	go run ./steward/web/internal/icongen steward/web/static/icons
package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: icongen DIR")
		os.Exit(2)
	}
	for _, size := range []int{192, 512} {
		path := filepath.Join(os.Args[1], fmt.Sprintf("icon-%d.png", size))
		if err := write(path, draw(size)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func write(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}

// draw renders in the SVG's 64-unit coordinates with 4×4 supersampling.
func draw(size int) image.Image {
	bg := color.RGBA{0x1f, 0x4e, 0x79, 0xff}
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	scale := 64 / float64(size)
	const ss = 4
	for py := range size {
		for px := range size {
			hits := 0
			for sy := range ss {
				for sx := range ss {
					x := (float64(px) + (float64(sx)+0.5)/ss) * scale
					y := (float64(py) + (float64(sy)+0.5)/ss) * scale
					if mark(x, y) {
						hits++
					}
				}
			}
			a := float64(hits) / ss / ss
			mix := func(c uint8) uint8 { return uint8(math.Round(float64(c)*(1-a) + 255*a)) }
			img.Set(px, py, color.RGBA{mix(bg.R), mix(bg.G), mix(bg.B), 0xff})
		}
	}
	return img
}

// mark reports whether (x, y) is on the white ring or check mark.
func mark(x, y float64) bool {
	const half = 2.5
	if d := math.Hypot(x-32, y-32); math.Abs(d-18) <= half {
		return true
	}
	return segDist(x, y, 23, 32.5, 29, 38.5) <= half || segDist(x, y, 29, 38.5, 41, 25.5) <= half
}

func segDist(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := math.Max(0, math.Min(1, ((px-ax)*dx+(py-ay)*dy)/(dx*dx+dy*dy)))
	return math.Hypot(px-(ax+t*dx), py-(ay+t*dy))
}
