// Package browsertest starts the headless Chromium that both products'
// browser tests drive through chromedp: the CI's flags, a fresh profile, a
// synthetic microphone, and a record of the exceptions the page throws. It
// skips the test, saying so, when no Chromium is installed.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path returns the Chromium to run: STEWARD_CHROMIUM when it names a
// program, else the first of chromium, chromium-browser and google-chrome
// on PATH; "" when there is none.
func Path() string {
	if p := os.Getenv("STEWARD_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
		return ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Options size the page.
type Options struct {
	Width, Height int64
	// Mobile emulates a phone (mobile viewport and touch).
	Mobile bool
	// Timeout is a hang guard for the whole browser (default 5 minutes):
	// every step of a test waits for its own condition.
	Timeout time.Duration
}

// Browser is a running Chromium; Ctx runs chromedp actions in its tab.
type Browser struct {
	Ctx context.Context

	mu         sync.Mutex
	exceptions []string
}

// Start launches Chromium for t, closed when t ends.
func Start(t testing.TB, opts Options) *Browser {
	t.Helper()
	path := Path()
	if path == "" {
		t.Skip("no chromium binary found (install Debian's chromium package, or set STEWARD_CHROMIUM): browser tests skipped")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		// A synthetic microphone (a beep) granted without a prompt, for dictation.
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, opts.Timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	b := &Browser{Ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			desc := ""
			if e.ExceptionDetails.Exception != nil {
				desc = e.ExceptionDetails.Exception.Description
			}
			b.mu.Lock()
			b.exceptions = append(b.exceptions, e.ExceptionDetails.Text+": "+desc)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var emulate []chromedp.EmulateViewportOption
	if opts.Mobile {
		emulate = append(emulate, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	vctx, vcancel := context.WithTimeout(ctx, time.Minute)
	defer vcancel()
	if err := chromedp.Do(vctx, chromedp.EmulateViewport(opts.Width, opts.Height, emulate...)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// Exceptions returns what the page has thrown so far.
func (b *Browser) Exceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.exceptions...)
}
