// Package pairing makes the link and QR code a phone pairs with: the host's
// address with the token in the URL fragment. A fragment never leaves the
// device (browsers do not send it in requests, so no server, proxy or log
// sees it); the web app moves it to local storage and erases it from the
// address bar at once.
package pairing

import (
	"fmt"
	"net/url"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// FragmentKey is the fragment parameter that carries the token.
const FragmentKey = "pair"

// Link is base (https://host:port) with the token in the fragment.
func Link(base, token string) string {
	return strings.TrimRight(base, "/") + "/#" + FragmentKey + "=" + url.QueryEscape(token)
}

// Terminal renders text as a QR code for a terminal, two modules per
// character row (Unicode half blocks). Light modules are drawn with the
// terminal's text colour and dark ones left blank, which scans on the usual
// light-on-dark terminal.
func Terminal(text string) (string, error) {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return "", fmt.Errorf("encode QR code: %w", err)
	}
	return q.ToSmallString(false), nil
}

// SVG renders text as a QR code in SVG, scale pixels per module.
func SVG(text string, scale int) (string, error) {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return "", fmt.Errorf("encode QR code: %w", err)
	}
	bits := q.Bitmap() // includes the quiet zone
	n := len(bits)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges" role="img" aria-label="pairing QR code">`, n, n, n*scale, n*scale)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y, row := range bits {
		for x, dark := range row {
			if dark {
				fmt.Fprintf(&b, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return b.String(), nil
}
