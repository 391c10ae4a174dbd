package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserQuestionSurvivesReload: an ask_user question is a transcript
// card like an approval: a reload while it waits shows it again, still
// answerable; the answer reaches the model; after another reload the card
// shows the answer and no longer offers the choices.
func TestBrowserQuestionSurvivesReload(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	b.do(chromedp.Navigate(h.url()))
	b.wait(`document.documentElement.dataset.ready === '1'`)
	b.send("ask me which train")
	b.wait(`document.querySelector('.question-card')?.textContent.includes('Which train?')`)

	b.do(chromedp.Reload())
	b.wait(`document.documentElement.dataset.ready === '1' && !!document.querySelector('.question-card')`)
	if n := eval[int](b, `document.querySelectorAll('.question-card').length`); n != 1 {
		t.Errorf("%d question cards after the reload, want 1", n)
	}
	if eval[bool](b, `[...document.querySelectorAll('.question-card button')].some((x) => x.disabled)`) {
		t.Error("the waiting question is not answerable after the reload")
	}
	b.click(".question-card", "The 17:05")
	b.lastAssistant("Done: The user answered: The 17:05")

	b.do(chromedp.Reload())
	b.wait(`document.documentElement.dataset.ready === '1' && !!document.querySelector('.question-card .outcome')`)
	if got := eval[string](b, `document.querySelector('.question-card .outcome').textContent`); got != "Answered: The 17:05" {
		t.Errorf("answered card says %q", got)
	}
	if eval[bool](b, `[...document.querySelectorAll('.question-card button')].some((x) => !x.disabled)`) {
		t.Error("the answered question still offers its choices")
	}
	b.noExceptions()
}
