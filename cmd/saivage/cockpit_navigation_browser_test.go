package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	rtt "github.com/agentstack/agentstack/saivage/runtime/runtimetest"
)

// TestCockpitFollowsAnalystNavigationAndShowsImages: an image the Analyst
// viewed is listed under its tool result and opens in the preview dialog
// (the recorded PNG, Fit and 1:1, closed cleanly); navigate_workspace moves
// the cockpit to the card and navigate_back returns it, whatever view is
// open; a reload does not replay earlier navigation.
func TestCockpitFollowsAnalystNavigationAndShowsImages(t *testing.T) {
	p := startServedProject(t, "cockpit-token-nav-0123456789")
	png, err := os.ReadFile(filepath.Join("..", "..", "saivage", "images", "testdata", "quad.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "shot.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	p.script.Add("analyst",
		rtt.Call("view_image", map[string]any{"path": "shot.png"}),
		rtt.Text("That is the screenshot."),
		rtt.Call("navigate_workspace", map[string]any{"view": "card", "card_id": "project"}),
		rtt.Text("The project card is open."),
		rtt.Call("navigate_back", map[string]any{}),
		rtt.Text("Back where you were."),
		rtt.Text("Nothing to open."),
	)
	b := newBrowser(t, 1280, 900, false)
	b.signIn(p.url, p.token)
	b.wait("the live socket", `document.documentElement.dataset.conn === 'live'`)
	// The cockpit moves on a tool result; the turn ends with its text after
	// it, and a second turn is refused (409) until then.
	idle := func() {
		poll(t, "the Analyst's turn to end", func() bool {
			var info struct{ Busy bool }
			return p.get("/api/chat", &info) == 200 && !info.Busy
		})
	}

	// The image occurrence: metadata first, pixels only in the dialog.
	b.setValue("#analyst-input", "Show me shot.png")
	b.click(".analyst form button[type=submit]")
	b.wait("the image occurrence", `!!document.querySelector('.analyst .image-occurrence')`)
	if got := eval[string](b, `document.querySelector('.analyst .image-occurrence').textContent`); got != "Image 1 · 64×48" {
		t.Errorf("occurrence label = %q", got)
	}
	eval[bool](b, `document.querySelector('.analyst .image-occurrence').closest('details').open = true`)
	b.click(".analyst .image-occurrence")
	b.wait("the preview", `document.querySelector('dialog.image-preview')?.dataset.loaded === 'true'`)
	if w := eval[float64](b, `document.querySelector('dialog.image-preview img').naturalWidth`); w != 64 {
		t.Errorf("previewed image is %v px wide, want the recorded 64", w)
	}
	if !eval[bool](b, `document.querySelector('dialog.image-preview .image-frame').classList.contains('fit')`) {
		t.Error("the preview does not open fitted")
	}
	b.click("dialog.image-preview .image-scale")
	if eval[bool](b, `document.querySelector('dialog.image-preview .image-frame').classList.contains('fit')`) {
		t.Error("1:1 did not switch the scale")
	}
	b.click("dialog.image-preview .image-close")
	idle()
	// Focus goes back to the occurrence when it is still shown; a transcript
	// refreshed meanwhile (a later hint) may have collapsed it, so only the
	// dialog's removal is asserted.
	b.wait("the preview to close", `!document.querySelector('dialog.image-preview')`)

	// navigate_workspace opens the card; navigate_back returns home, from
	// the card view (no Analyst panel there).
	b.setValue("#analyst-input", "Open the project card")
	b.click(".analyst form button[type=submit]")
	b.wait("the card view", `location.hash === '#/card/project' && !!document.querySelector('[data-nav]')`)
	idle()
	if code := p.do("POST", "/api/chat", `{"message":"Go back"}`, nil); code != 202 && code != 200 {
		t.Fatalf("chat post = %d", code)
	}
	b.wait("the previous view", `(location.hash === '' || location.hash === '#/') && !!document.querySelector('.analyst')`)

	// A reload reads the past navigation as a baseline and stays put.
	b.do(chromedp.Reload())
	b.wait("the home view", `!!document.querySelector('.analyst .transcript .msg')`)
	idle()
	b.setValue("#analyst-input", "Anything else?")
	b.click(".analyst form button[type=submit]")
	b.wait("the last answer", `document.querySelector('.analyst .transcript').textContent.includes('Nothing to open.')`)
	if h := eval[string](b, `location.hash + '|' + (document.documentElement.dataset.navigated || '')`); h != "|" && h != "#/|" {
		t.Errorf("after a reload the cockpit navigated: %s", h)
	}
	b.noExceptions()
}
