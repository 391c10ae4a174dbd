package web_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/speech"
)

// fakeWhisper is a stand-in for the whisper.cpp CLI honouring its interface:
// it refuses any other argv and writes the transcript file -of names.
const fakeWhisper = `#!/bin/sh
[ "$1" = -m ] && [ "$3" = -f ] && [ "$5" = -l ] && [ "$7" = -nt ] && [ "$8" = -np ] && [ "$9" = -otxt ] && [ "${10}" = -of ] || { echo "bad argv: $*" >&2; exit 2; }
size=$(wc -c < "$4")
printf ' Dictated %s bytes of audio in %s.\n' "$size" "$6" > "${11}.txt"
`

// TestBrowserDictation records from Chromium's fake microphone through the
// composer's button, converts the WebM recording with Debian's ffmpeg and
// puts the stand-in whisper's transcript in the composer, leaving no
// temporary files.
func TestBrowserDictation(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg): dictation's browser test skipped")
	}
	dir := t.TempDir()
	bin, model, tmp := filepath.Join(dir, "whisper-cli"), filepath.Join(dir, "ggml-base.bin"), t.TempDir()
	os.WriteFile(bin, []byte(fakeWhisper), 0o755)
	os.WriteFile(model, []byte("model"), 0o600)
	tr, err := speech.New(speech.Options{Bin: bin, Model: model, FFmpeg: ff, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	speech.Mount(h.host.Handle, &speech.Route{Transcriber: tr})

	b.do(chromedp.Navigate(h.url()))
	b.wait(`!!document.getElementById('composer-input') && !document.getElementById('dictation').hidden`)
	b.setValue("#composer-input", "Note:")
	b.do(chromedp.Click("#dictation"))
	b.wait(`document.getElementById('dictation').dataset.state === 'recording'`)
	// The timer runs from the click; the recorder starts capturing a little
	// later (much later on a loaded machine), so stop at 0:02 and expect at
	// least one second of audio.
	b.wait(`document.querySelector('#dictation .dictation-time').textContent === '0:02'`)
	if got := eval[string](b, `document.getElementById('dictation').getAttribute('aria-pressed')`); got != "true" {
		t.Errorf("recording button aria-pressed=%q", got)
	}
	b.shot("dictation-recording")
	b.do(chromedp.Click("#dictation"))
	b.wait(`document.getElementById('composer-input').value !== 'Note:'`)
	got := eval[string](b, `document.getElementById('composer-input').value`)
	m := regexp.MustCompile(`^Note: Dictated (\d+) bytes of audio in en\.$`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("composer holds %q", got)
	}
	// 16 kHz 16-bit mono: a second of audio is 32,000 bytes.
	if n, _ := strconv.Atoi(m[1]); n < 32000 {
		t.Errorf("whisper received %d bytes: the recording did not reach it whole", n)
	}
	b.wait(`document.getElementById('dictation').dataset.state === 'idle'`)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	b.noExceptions()
}

// TestBrowserSpeechSettings sets the call voice and rate on the System page
// and plays a preview Debian's espeak-ng rendered on the host.
func TestBrowserSpeechSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed (apt-get install espeak-ng): speech settings' browser test skipped")
	}
	b := newBrowser(t, 1280, 900, false)
	h := newHarness(t)
	b.do(chromedp.Navigate(h.url() + "#/system"))
	b.wait(`document.querySelector('.speech-settings')?.dataset.loaded === '1'`)
	if n := eval[int](b, `document.querySelectorAll('#speech-voice-it option').length`); n < 2 {
		t.Fatalf("%d Italian voice options; espeak-ng has an Italian voice", n)
	}
	b.setValue("#speech-rate", "240")
	b.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('speech-voice-it'); s.value = s.options[1].value; })()`))
	voice := eval[string](b, `document.getElementById('speech-voice-it').value`)
	b.do(chromedp.Click(".speech-preview[data-lang='it']"))
	b.wait(`Number(document.getElementById('speech-player').dataset.bytes || 0) > 1000`)
	b.do(chromedp.Click(".speech-form button[type='submit']"))
	b.wait(`document.querySelector('.speech-settings').dataset.saved === '1'`)
	got, err := (&speech.SettingsStore{Path: filepath.Join(h.home, "voice-settings.json")}).Load()
	if err != nil || got.Rate != 240 || got.Voices["it"] != voice || got.Voices["en"] != "" {
		t.Fatalf("saved %+v %v (chose %q)", got, err, voice)
	}
	// Reloaded, the page shows what was saved.
	b.do(chromedp.Reload())
	b.wait(`document.querySelector('.speech-settings')?.dataset.loaded === '1'`)
	if v := eval[string](b, `document.getElementById('speech-rate-value').textContent`); v != "240 words per minute" {
		t.Errorf("after reload the rate reads %q", v)
	}
	if left, _ := filepath.Glob(filepath.Join(h.home, "steward-voice-preview-*")); len(left) != 0 {
		t.Errorf("preview files left: %v", left)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.speech-settings').scrollIntoView()`))
	b.shot("speech-settings-desktop")
	b.noExceptions()
}
