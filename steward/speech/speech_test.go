package speech_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/speech"
)

// The test binary doubles as whisper.cpp and ffmpeg: with SPEECH_FAKE set it
// checks the exact argv the real program takes and answers in its format.
func TestMain(m *testing.M) {
	switch os.Getenv("SPEECH_FAKE") {
	case "whisper":
		os.Exit(fakeWhisper(os.Args[1:]))
	case "ffmpeg":
		os.Exit(fakeFFmpeg(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeWhisper honours whisper-cli's interface: -m model -f wav -l lang -nt
// -np -otxt -of base writes base.txt. The text says what it heard so a test
// can tell the audio reached it.
func fakeWhisper(args []string) int {
	want := []string{"-m", "", "-f", "", "-l", "", "-nt", "-np", "-otxt", "-of", ""}
	if len(args) != len(want) {
		fmt.Fprintf(os.Stderr, "error: unexpected argv %q\n", args)
		return 2
	}
	for i, w := range want {
		if w != "" && args[i] != w {
			fmt.Fprintf(os.Stderr, "error: argv[%d] = %q, want %q\n", i, args[i], w)
			return 2
		}
	}
	model, wav, lang, base := args[1], args[3], args[5], args[10]
	if _, err := os.Stat(model); err != nil {
		fmt.Fprintf(os.Stderr, "error: failed to open model %s\n", model)
		return 3
	}
	b, err := os.ReadFile(wav)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: failed to read WAV file '%s'\n", wav)
		return 4
	}
	info, err := speech.ParseWAV(b)
	if err != nil || !info.Whisper() {
		fmt.Fprintf(os.Stderr, "error: WAV file '%s' must be 16 kHz\n", wav)
		return 5
	}
	switch os.Getenv("SPEECH_FAKE_MODE") {
	case "hang":
		time.Sleep(time.Hour)
	case "crash":
		fmt.Fprintln(os.Stderr, "whisper_init_from_file: failed to load model")
		return 6
	}
	text := fmt.Sprintf(" Heard %d ms of %d Hz audio in %s.\n And a second line.\n", info.Duration().Milliseconds(), info.SampleRate, lang)
	if err := os.WriteFile(base+".txt", []byte(text), 0o644); err != nil {
		return 7
	}
	fmt.Println("[00:00:00.000 --> 00:00:01.000]  printed to stdout, not the transcript")
	return 0
}

// fakeFFmpeg checks the conversion argv and writes a 16 kHz mono WAV whose
// length is the input's size in milliseconds (so tests control duration).
func fakeFFmpeg(args []string) int {
	if len(args) != 18 || args[4] != "-i" || args[6] != "-t" || args[8] != "-ar" || args[9] != "16000" || args[11] != "1" || args[13] != "pcm_s16le" || args[15] != "wav" {
		fmt.Fprintf(os.Stderr, "unexpected argv %q\n", args)
		return 2
	}
	in, err := os.ReadFile(args[5])
	if err != nil || len(in) < 10 {
		fmt.Fprintf(os.Stderr, "%s: Invalid data found when processing input\n", args[5])
		return 1
	}
	if os.Getenv("SPEECH_FAKE_MODE") == "hang" {
		time.Sleep(time.Hour)
	}
	ms := len(in)
	return writeErr(os.WriteFile(args[17], speech.WAV(make([]int16, 16*ms), 16000, 1), 0o644))
}

func writeErr(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

type fixture struct {
	t   *testing.T
	tmp string
	tr  *speech.Transcriber
}

func newFixture(t *testing.T, opts speech.Options, mode string) *fixture {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPEECH_FAKE_MODE", mode)
	model := filepath.Join(t.TempDir(), "ggml-base.bin")
	os.WriteFile(model, []byte("model"), 0o600)
	tmp := t.TempDir()
	wrap := func(name string) string {
		// A tiny launcher sets SPEECH_FAKE for the role, as two distinct programs.
		p := filepath.Join(t.TempDir(), name)
		script := fmt.Sprintf("#!/bin/sh\nSPEECH_FAKE=%s exec %q \"$@\"\n", name, self)
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	opts.Bin, opts.Model, opts.TempDir = wrap("whisper"), model, tmp
	if opts.FFmpeg == "" {
		opts.FFmpeg = wrap("ffmpeg")
	} else if opts.FFmpeg == "none" {
		opts.FFmpeg = ""
		t.Setenv("PATH", t.TempDir())
	}
	tr, err := speech.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, tmp: tmp, tr: tr}
}

// clean asserts the working folder is gone, whatever the outcome.
func (f *fixture) clean() {
	f.t.Helper()
	left, _ := os.ReadDir(f.tmp)
	if len(left) != 0 {
		f.t.Fatalf("temporary files left behind: %v", left)
	}
}

func tone(d time.Duration, rate uint32) []byte {
	n := int(d.Seconds() * float64(rate))
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
	}
	return speech.WAV(s, rate, 1)
}

func TestTranscribeWAVPassesItToWhisperAsIs(t *testing.T) {
	f := newFixture(t, speech.Options{Language: "it", FFmpeg: "none"}, "")
	res, err := f.tr.Transcribe(context.Background(), tone(1500*time.Millisecond, 16000), "audio/wav")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Heard 1500 ms of 16000 Hz audio in it. And a second line." || res.Converted || res.Duration != 1500*time.Millisecond {
		t.Fatalf("result %+v", res)
	}
	f.clean()
}

func TestTranscribeConvertsWithFFmpeg(t *testing.T) {
	f := newFixture(t, speech.Options{}, "")
	webm := append([]byte{0x1A, 0x45, 0xDF, 0xA3}, bytes.Repeat([]byte{1}, 2496)...)
	res, err := f.tr.Transcribe(context.Background(), webm, "audio/webm;codecs=opus")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converted || res.Text != "Heard 2500 ms of 16000 Hz audio in en. And a second line." {
		t.Fatalf("result %+v", res)
	}
	// A 44.1 kHz WAV is converted too.
	if res, err = f.tr.Transcribe(context.Background(), tone(time.Second, 44100), "audio/x-wav"); err != nil || !res.Converted {
		t.Fatalf("44.1 kHz WAV: %+v, %v", res, err)
	}
	f.clean()
}

func TestTranscribeRefusals(t *testing.T) {
	webm := append([]byte{0x1A, 0x45, 0xDF, 0xA3}, make([]byte, 100)...)
	cases := []struct {
		name, mode, ffmpeg, ctype string
		audio                     []byte
		opts                      speech.Options
		status                    int
		msg                       string
	}{
		{name: "empty", ctype: "audio/wav", status: 400, msg: "empty"},
		{name: "too large", ctype: "audio/wav", audio: tone(2*time.Second, 16000), opts: speech.Options{MaxBytes: 1000}, status: 413, msg: "at most 1000"},
		{name: "too long", ctype: "audio/wav", audio: tone(3*time.Second, 16000), opts: speech.Options{MaxDuration: 2 * time.Second}, status: 413, msg: "lasts 3s"},
		{name: "wrong content type", ctype: "text/plain", audio: tone(time.Second, 16000), status: 415, msg: "not text/plain"},
		{name: "not audio", ctype: "audio/wav", audio: []byte("<html>hello</html>"), status: 415, msg: "not WAV, WebM, Ogg or MP4"},
		{name: "webm without ffmpeg", ffmpeg: "none", ctype: "audio/webm", audio: webm, status: 415, msg: "needs ffmpeg"},
		{name: "44.1 kHz without ffmpeg", ffmpeg: "none", ctype: "audio/wav", audio: tone(time.Second, 44100), status: 415, msg: "44100 Hz"},
		{name: "broken wav", ctype: "audio/wav", audio: []byte("RIFF\x00\x00\x00\x00WAVEjunk"), status: 415, msg: "cannot be read"},
		{name: "whisper crashes", mode: "crash", ctype: "audio/wav", audio: tone(time.Second, 16000), status: 502, msg: "failed to load model"},
		{name: "whisper hangs", mode: "hang", ctype: "audio/wav", audio: tone(time.Second, 16000), opts: speech.Options{Timeout: 2 * time.Second}, status: 504, msg: "longer than 2s"},
		{name: "ffmpeg hangs", mode: "hang", ctype: "audio/webm", audio: webm, opts: speech.Options{Timeout: 2 * time.Second}, status: 504, msg: "converting"},
		{name: "ffmpeg refuses", ctype: "audio/ogg", audio: []byte("OggS"), status: 415, msg: "ffmpeg could not read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.FFmpeg = c.ffmpeg
			f := newFixture(t, opts, c.mode)
			if c.name == "ffmpeg refuses" {
				// Sniff accepts "OggS"; the fake ffmpeg then refuses the 4-byte body.
				c.audio = []byte("OggS")
			}
			_, err := f.tr.Transcribe(context.Background(), c.audio, c.ctype)
			var ue *speech.Error
			if !errors.As(err, &ue) || ue.Status != c.status || !strings.Contains(ue.Msg, c.msg) {
				t.Fatalf("error %v (%T), want status %d containing %q", err, err, c.status, c.msg)
			}
			f.clean()
		})
	}
}

func TestNewNamesTheSetting(t *testing.T) {
	for _, c := range []struct {
		opts speech.Options
		want string
	}{
		{speech.Options{}, "STEWARD_WHISPER_BIN"},
		{speech.Options{Bin: "/nonexistent/whisper-cli", Model: "/etc/hostname"}, "STEWARD_WHISPER_BIN \"/nonexistent/whisper-cli\""},
		{speech.Options{Bin: "/bin/sh", Model: "/nonexistent/model.bin"}, "STEWARD_WHISPER_MODEL"},
		{speech.Options{Bin: "/bin/sh", Model: "/etc/hostname", FFmpeg: "/nonexistent/ffmpeg"}, "STEWARD_FFMPEG"},
	} {
		if _, err := speech.New(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.opts, err, c.want)
		}
	}
}

func TestRoute(t *testing.T) {
	f := newFixture(t, speech.Options{MaxBytes: 64 << 10}, "")
	mux := http.NewServeMux()
	speech.Mount(func(p string, h http.Handler) { mux.Handle(p, h) }, &speech.Route{Transcriber: f.tr})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(ctype string, body []byte) (int, map[string]any) {
		res, err := http.Post(srv.URL+"/transcribe", ctype, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	code, out := post("audio/wav", tone(time.Second, 16000))
	if code != 200 || out["text"] != "Heard 1000 ms of 16000 Hz audio in en. And a second line." || out["durationMs"] != float64(1000) {
		t.Fatalf("%d %v", code, out)
	}
	code, out = post("audio/wav", tone(3*time.Second, 16000)) // 96 KB > 64 KiB
	if code != 413 || !strings.Contains(fmt.Sprint(out["error"]), "over 65536 bytes") {
		t.Fatalf("oversized upload: %d %v", code, out)
	}
	code, out = post("multipart/form-data; boundary=x", []byte("--x--"))
	if code != 415 || !strings.Contains(fmt.Sprint(out["error"]), "request body") {
		t.Fatalf("multipart upload: %d %v", code, out)
	}
	res, _ := http.Get(srv.URL + "/transcribe")
	var st speech.Status
	json.NewDecoder(res.Body).Decode(&st)
	res.Body.Close()
	if !st.Enabled || len(st.Formats) != 4 || st.MaxBytes != 64<<10 {
		t.Fatalf("status %+v", st)
	}
	f.clean()

	off := http.NewServeMux()
	speech.Mount(func(p string, h http.Handler) { off.Handle(p, h) }, &speech.Route{Unavailable: "transcription is not configured: set STEWARD_WHISPER_BIN"})
	srv2 := httptest.NewServer(off)
	defer srv2.Close()
	res, _ = http.Post(srv2.URL+"/transcribe", "audio/wav", bytes.NewReader(tone(time.Second, 16000)))
	var e map[string]string
	json.NewDecoder(res.Body).Decode(&e)
	res.Body.Close()
	if res.StatusCode != 503 || !strings.Contains(e["error"], "STEWARD_WHISPER_BIN") {
		t.Fatalf("unconfigured: %d %v", res.StatusCode, e)
	}
}

// With Debian's ffmpeg installed, a real Ogg/Opus recording (made by ffmpeg
// itself) is converted to what whisper reads.
func TestRealFFmpegConversion(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg)")
	}
	src := filepath.Join(t.TempDir(), "tone.wav")
	os.WriteFile(src, tone(2*time.Second, 48000), 0o600)
	for _, c := range []struct{ ext, codec string }{{"ogg", "libopus"}, {"webm", "libopus"}, {"m4a", "aac"}} {
		out := filepath.Join(t.TempDir(), "rec."+c.ext)
		if b, err := exec.Command(ff, "-nostdin", "-loglevel", "error", "-i", src, "-c:a", c.codec, out).CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v %s", c.ext, err, b)
		}
		rec, _ := os.ReadFile(out)
		f := newFixture(t, speech.Options{FFmpeg: ff}, "")
		res, err := f.tr.Transcribe(context.Background(), rec, "audio/"+c.ext)
		if err != nil {
			t.Fatalf("%s: %v", c.ext, err)
		}
		ms := res.Duration.Milliseconds()
		if !res.Converted || ms < 1900 || ms > 2100 || !strings.Contains(res.Text, "16000 Hz") {
			t.Fatalf("%s: %+v", c.ext, res)
		}
		f.clean()
	}
}

func FuzzParseWAV(f *testing.F) {
	f.Add(speech.WAV([]int16{1, 2, 3}, 16000, 1))
	f.Add([]byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"))
	f.Add([]byte("RIFF\xff\xff\xff\xffWAVEdata\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := speech.ParseWAV(b)
		if err != nil {
			return
		}
		if int(info.DataBytes) > len(b) {
			t.Fatalf("data %d bytes in a %d-byte file", info.DataBytes, len(b))
		}
		if info.Duration() < 0 {
			t.Fatal("negative duration")
		}
	})
}
