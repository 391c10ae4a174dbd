package pairing_test

import (
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/pairing"
)

// fromTerminal turns Terminal's half blocks back into modules (true: dark):
// the drawn half of a cell is light, a blank one dark.
func fromTerminal(t *testing.T, qr string) [][]bool {
	t.Helper()
	var rows [][]bool
	for _, line := range strings.Split(strings.TrimRight(qr, "\n"), "\n") {
		top, bottom := []bool{}, []bool{}
		for _, r := range line {
			switch r {
			case ' ':
				top, bottom = append(top, true), append(bottom, true)
			case '█':
				top, bottom = append(top, false), append(bottom, false)
			case '▀':
				top, bottom = append(top, false), append(bottom, true)
			case '▄':
				top, bottom = append(top, true), append(bottom, false)
			default:
				t.Fatalf("unexpected rune %q", r)
			}
		}
		rows = append(rows, top, bottom)
	}
	return rows
}

// TestTerminalCodeScans renders the terminal QR code as an image and has
// zbar, a third-party reader, decode it back to the pairing link.
func TestTerminalCodeScans(t *testing.T) {
	zbar, err := exec.LookPath("zbarimg")
	if err != nil {
		t.Fatal("zbarimg is needed (.ci/run installs zbar-tools): apt-get install -y zbar-tools")
	}
	link := pairing.Link("https://mac.tailnet.ts.net:4318", "tok_0123456789abcdefghijKLMNOP-_xyz")
	if link != "https://mac.tailnet.ts.net:4318/#pair=tok_0123456789abcdefghijKLMNOP-_xyz" {
		t.Fatalf("link = %s", link)
	}
	qr, err := pairing.Terminal(link)
	if err != nil {
		t.Fatal(err)
	}
	mods := fromTerminal(t, qr)
	const scale = 6
	img := image.NewGray(image.Rect(0, 0, len(mods[0])*scale, len(mods)*scale))
	for y, row := range mods {
		for x, dark := range row {
			c := color.Gray{Y: 255}
			if dark {
				c.Y = 0
			}
			for dy := range scale {
				for dx := range scale {
					img.SetGray(x*scale+dx, y*scale+dy, c)
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "qr.png")
	f, _ := os.Create(path)
	png.Encode(f, img)
	f.Close()
	out, err := exec.Command(zbar, "--raw", "-q", path).Output()
	if err != nil || strings.TrimSpace(string(out)) != link {
		t.Fatalf("zbarimg read %q (%v), want %q", out, err, link)
	}

	svg, err := pairing.SVG(link, 4)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
		ViewBox string `xml:"viewBox,attr"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil || doc.XMLName.Local != "svg" || doc.ViewBox == "" {
		t.Errorf("SVG does not parse: %v %+v", err, doc)
	}
}
