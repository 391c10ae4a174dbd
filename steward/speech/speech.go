// Package speech turns dictated audio into text with a local whisper.cpp
// command-line program: the audio never leaves the machine. It bounds what it
// accepts (size, duration, formats), converts non-WAV audio with ffmpeg when
// it is installed, and removes its temporary files whatever happens.
package speech

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout     = 2 * time.Minute
	DefaultMaxBytes    = 25 << 20
	DefaultMaxDuration = 5 * time.Minute
	DefaultLanguage    = "en"
)

// Options configure a Transcriber.
type Options struct {
	// Bin is the whisper.cpp CLI (whisper-cli, or main in older releases)
	// and Model its ggml model file (STEWARD_WHISPER_BIN, STEWARD_WHISPER_MODEL).
	Bin, Model string
	// Language is passed with -l (STEWARD_SPEECH_LANGUAGE, default en).
	Language string
	// FFmpeg converts WebM, Ogg and MP4 recordings (and WAV that is not
	// 16 kHz) to the 16 kHz mono WAV whisper.cpp reads. Empty looks it up in
	// PATH; without it only 16 kHz WAV is accepted.
	FFmpeg string
	// Timeout bounds conversion plus transcription (default 2 minutes).
	Timeout time.Duration
	// MaxBytes bounds an upload (default 25 MiB); MaxDuration the audio
	// (default 5 minutes).
	MaxBytes    int64
	MaxDuration time.Duration
	// TempDir holds the per-request working folder (default os.TempDir()).
	TempDir string
	// Threads is whisper.cpp's -t (0 leaves its default).
	Threads int
}

// Transcriber runs whisper.cpp on uploaded audio.
type Transcriber struct {
	opts Options
}

// Error is a failure the user can act on; Status is the HTTP status the
// /transcribe route answers with.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func userErr(status int, format string, args ...any) error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// New checks the program and model and returns a Transcriber.
func New(opts Options) (*Transcriber, error) {
	if opts.Bin == "" || opts.Model == "" {
		return nil, errors.New("transcription needs STEWARD_WHISPER_BIN (the whisper.cpp CLI) and STEWARD_WHISPER_MODEL (a ggml model file)")
	}
	bin, err := exec.LookPath(opts.Bin)
	if err != nil {
		return nil, fmt.Errorf("STEWARD_WHISPER_BIN %q is not an executable program: %w", opts.Bin, err)
	}
	opts.Bin = bin
	if st, err := os.Stat(opts.Model); err != nil || st.IsDir() {
		return nil, fmt.Errorf("STEWARD_WHISPER_MODEL %q is not a readable model file", opts.Model)
	}
	if opts.Language == "" {
		opts.Language = DefaultLanguage
	}
	if opts.FFmpeg == "" {
		opts.FFmpeg, _ = exec.LookPath("ffmpeg")
	} else if opts.FFmpeg, err = exec.LookPath(opts.FFmpeg); err != nil {
		return nil, fmt.Errorf("STEWARD_FFMPEG %q is not an executable program: %w", opts.FFmpeg, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxDuration <= 0 {
		opts.MaxDuration = DefaultMaxDuration
	}
	return &Transcriber{opts: opts}, nil
}

// Result is a transcription.
type Result struct {
	Text     string        `json:"text"`
	Duration time.Duration `json:"-"`
	Language string        `json:"language"`
	// Converted reports that ffmpeg converted the upload.
	Converted bool `json:"converted"`
}

// MaxBytes is the largest upload the transcriber accepts.
func (t *Transcriber) MaxBytes() int64 { return t.opts.MaxBytes }

// CanConvert reports whether ffmpeg is available for non-WAV audio.
func (t *Transcriber) CanConvert() bool { return t.opts.FFmpeg != "" }

// Transcribe returns the text spoken in audio. contentType is the upload's
// declared type; the bytes themselves decide the format.
func (t *Transcriber) Transcribe(ctx context.Context, audio []byte, contentType string) (*Result, error) {
	if int64(len(audio)) > t.opts.MaxBytes {
		return nil, userErr(413, "the recording is %d bytes; at most %d are accepted", len(audio), t.opts.MaxBytes)
	}
	if len(audio) == 0 {
		return nil, userErr(400, "the recording is empty")
	}
	if err := checkContentType(contentType); err != nil {
		return nil, err
	}
	format := Sniff(audio)
	if format == "" {
		return nil, userErr(415, "the upload is not WAV, WebM, Ogg or MP4 audio")
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp(t.opts.TempDir, "steward-speech-*")
	if err != nil {
		return nil, fmt.Errorf("create a working folder for transcription: %w", err)
	}
	defer os.RemoveAll(dir)

	res := &Result{Language: t.opts.Language}
	wav := filepath.Join(dir, "audio.wav")
	var info WAVInfo
	if format == FormatWAV {
		info, err = ParseWAV(audio)
		if err != nil {
			return nil, userErr(415, "the WAV recording cannot be read: %v", err)
		}
	}
	switch {
	case format == FormatWAV && info.Whisper():
		if err := os.WriteFile(wav, audio, 0o600); err != nil {
			return nil, fmt.Errorf("write the recording for transcription: %w", err)
		}
	case t.opts.FFmpeg == "":
		if format == FormatWAV {
			return nil, userErr(415, "the WAV recording is %d Hz, %d-bit; without ffmpeg only 16 kHz 16-bit WAV can be transcribed (install ffmpeg)", info.SampleRate, info.Bits)
		}
		return nil, userErr(415, "%s audio needs ffmpeg to be converted; install ffmpeg or send 16 kHz WAV", format)
	default:
		if err := t.convert(ctx, dir, audio, wav); err != nil {
			return nil, err
		}
		res.Converted = true
		b, err := os.ReadFile(wav)
		if err != nil {
			return nil, fmt.Errorf("read the converted recording: %w", err)
		}
		if info, err = ParseWAV(b); err != nil {
			return nil, fmt.Errorf("ffmpeg wrote an unreadable WAV: %w", err)
		}
	}
	res.Duration = info.Duration()
	if res.Duration > t.opts.MaxDuration {
		return nil, userErr(413, "the recording lasts %s; at most %s can be transcribed", res.Duration.Round(time.Second), t.opts.MaxDuration)
	}
	text, err := t.whisper(ctx, dir, wav)
	if err != nil {
		return nil, err
	}
	res.Text = text
	return res, nil
}

func checkContentType(ct string) error {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	mt = strings.TrimSpace(mt)
	if mt == "" || mt == "application/octet-stream" || strings.HasPrefix(mt, "audio/") || mt == "video/webm" || mt == "video/mp4" || mt == "video/ogg" {
		return nil
	}
	return userErr(415, "send the recording itself as the request body with an audio/* content type, not %s", mt)
}

// convert runs ffmpeg to a 16 kHz mono 16-bit WAV, cut a second past the
// duration bound so an endless upload cannot fill the disk.
func (t *Transcriber) convert(ctx context.Context, dir string, audio []byte, out string) error {
	in := filepath.Join(dir, "upload")
	if err := os.WriteFile(in, audio, 0o600); err != nil {
		return fmt.Errorf("write the recording for conversion: %w", err)
	}
	limit := fmt.Sprintf("%.0f", (t.opts.MaxDuration + time.Second).Seconds())
	cmd := exec.CommandContext(ctx, t.opts.FFmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-i", in,
		"-t", limit, "-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le", "-f", "wav", "-y", out)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return userErr(504, "converting the recording took longer than %s", t.opts.Timeout)
		}
		return userErr(415, "ffmpeg could not read the recording: %s", lastLine(stderr.String(), err))
	}
	return nil
}

// whisper runs the CLI exactly as whisper.cpp documents it: model, input
// file, language, no timestamps, no progress prints, text output to a file.
func (t *Transcriber) whisper(ctx context.Context, dir, wav string) (string, error) {
	base := filepath.Join(dir, "transcript")
	args := []string{"-m", t.opts.Model, "-f", wav, "-l", t.opts.Language, "-nt", "-np", "-otxt", "-of", base}
	if t.opts.Threads > 0 {
		args = append(args, "-t", fmt.Sprint(t.opts.Threads))
	}
	cmd := exec.CommandContext(ctx, t.opts.Bin, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", userErr(504, "transcription took longer than %s (STEWARD_WHISPER_TIMEOUT_MS)", t.opts.Timeout)
		}
		return "", userErr(502, "whisper.cpp failed: %s", lastLine(stderr.String(), err))
	}
	b, err := os.ReadFile(base + ".txt")
	if err != nil {
		return "", userErr(502, "whisper.cpp wrote no transcript (%s)", lastLine(stderr.String(), err))
	}
	return strings.Join(strings.Fields(strings.TrimSpace(string(b))), " "), nil
}

// lastLine is the last non-empty line of a program's diagnostics, bounded,
// or err when it printed nothing.
func lastLine(s string, err error) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if l == "" {
		return err.Error()
	}
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

// HTTPStatus is the status an HTTP route answers the error with.
func (e *Error) HTTPStatus() int { return e.Status }

// TranscribeText is Transcribe for callers that need only the text (the
// host's quick send).
func (t *Transcriber) TranscribeText(ctx context.Context, audio []byte, contentType string) (string, error) {
	res, err := t.Transcribe(ctx, audio, contentType)
	if err != nil {
		return "", err
	}
	return res.Text, nil
}
