package speech

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Speech-rate bounds in words per minute, and the default.
const (
	MinRate     = 100
	MaxRate     = 300
	DefaultRate = 175
)

// VoiceSettings are the spoken defaults of calls: a voice per language
// ("" = automatic) and a rate. Ringback reads the file before each call.
type VoiceSettings struct {
	Voices map[string]string `json:"voices"`
	Rate   int               `json:"rate"`
}

// Validate checks the settings against the languages Steward speaks and the
// rate bounds, naming the field at fault.
func (s VoiceSettings) Validate() error {
	for lang := range s.Voices {
		if lang != "en" && lang != "it" {
			return fmt.Errorf("voices: language %q is not supported (en, it)", lang)
		}
	}
	if s.Rate < MinRate || s.Rate > MaxRate {
		return fmt.Errorf("rate: %d words per minute is outside %d–%d", s.Rate, MinRate, MaxRate)
	}
	return nil
}

// SettingsStore keeps voice-settings.json (0600), written by temp file and
// rename so a reader never sees half a file.
type SettingsStore struct {
	Path string
	mu   sync.Mutex
}

// Load returns the stored settings, or the defaults when there are none.
func (st *SettingsStore) Load() (VoiceSettings, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := VoiceSettings{Voices: map[string]string{}, Rate: DefaultRate}
	b, err := os.ReadFile(st.Path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read voice settings %s: %w", st.Path, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return VoiceSettings{Voices: map[string]string{}, Rate: DefaultRate}, fmt.Errorf("voice settings %s are not valid JSON: %w", st.Path, err)
	}
	if s.Voices == nil {
		s.Voices = map[string]string{}
	}
	return s, nil
}

// Save validates and writes s.
func (st *SettingsStore) Save(s VoiceSettings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.MkdirAll(filepath.Dir(st.Path), 0o700); err != nil {
		return fmt.Errorf("save voice settings: %w", err)
	}
	tmp := st.Path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save voice settings: %w", err)
	}
	if err := os.Rename(tmp, st.Path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save voice settings: %w", err)
	}
	return nil
}

// Synthesizer renders speech with the platform's engine: macOS `say`,
// elsewhere `espeak-ng`.
type Synthesizer struct {
	// Program overrides the engine's path (tests); Kind is "say" or
	// "espeak-ng" (default by platform).
	Program, Kind string
	// TempDir holds each preview's private folder (default os.TempDir()).
	TempDir string
}

// Voice is an installed voice.
type Voice struct {
	Name     string `json:"name"`
	Language string `json:"language"`
}

func (s *Synthesizer) kind() string {
	if s.Kind != "" {
		return s.Kind
	}
	if runtime.GOOS == "darwin" {
		return "say"
	}
	return "espeak-ng"
}

func (s *Synthesizer) program() (string, error) {
	p := s.Program
	if p == "" {
		p = s.kind()
	}
	path, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("no speech engine: install %s (Debian: apt-get install espeak-ng)", s.kind())
	}
	return path, nil
}

// Voices lists the installed voices for English and Italian.
func (s *Synthesizer) Voices(ctx context.Context) ([]Voice, error) {
	prog, err := s.program()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []byte
	if s.kind() == "say" {
		out, err = exec.CommandContext(ctx, prog, "-v", "?").Output()
	} else {
		out, err = exec.CommandContext(ctx, prog, "--voices").Output()
	}
	if err != nil {
		return nil, fmt.Errorf("list voices with %s: %w", prog, err)
	}
	return parseVoices(s.kind(), string(out)), nil
}

// parseVoices reads `say -v ?` ("Alice  it_IT  # Ciao…") or `espeak-ng
// --voices` (a table: Pty Language Age/Gender VoiceName File Other).
func parseVoices(kind, out string) []Voice {
	var vs []Voice
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		var v Voice
		switch {
		case kind == "say" && len(f) >= 2:
			// The name may contain spaces: the locale is the first field like xx_YY.
			for i := 1; i < len(f); i++ {
				if len(f[i]) >= 5 && f[i][2] == '_' {
					v = Voice{Name: strings.Join(f[:i], " "), Language: f[i][:2]}
					break
				}
			}
		case kind != "say" && len(f) >= 4 && f[0] != "Pty":
			v = Voice{Name: f[3], Language: strings.SplitN(f[1], "-", 2)[0]}
		}
		if v.Language == "en" || v.Language == "it" {
			vs = append(vs, v)
		}
	}
	return vs
}

// MaxPreviewChars bounds a preview's text.
const MaxPreviewChars = 500

// Preview renders text with voice at rate into a temporary WAV and returns
// its bytes; the folder is removed before it returns.
func (s *Synthesizer) Preview(ctx context.Context, text, voice string, rate int) ([]byte, error) {
	text = strings.TrimSpace(text)
	if text == "" || utf8.RuneCountInString(text) > MaxPreviewChars {
		return nil, &Error{Status: 400, Msg: fmt.Sprintf("the preview text must be 1–%d characters", MaxPreviewChars)}
	}
	if rate < MinRate || rate > MaxRate {
		return nil, &Error{Status: 400, Msg: fmt.Sprintf("rate must be %d–%d words per minute", MinRate, MaxRate)}
	}
	if strings.HasPrefix(voice, "-") {
		return nil, &Error{Status: 400, Msg: "voice names do not start with '-'"}
	}
	prog, err := s.program()
	if err != nil {
		return nil, &Error{Status: 503, Msg: err.Error()}
	}
	dir, err := os.MkdirTemp(s.TempDir, "steward-voice-preview-*")
	if err != nil {
		return nil, fmt.Errorf("create a folder for the preview: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "preview.wav")
	var args []string
	if s.kind() == "say" {
		args = []string{"-r", fmt.Sprint(rate), "-o", out, "--data-format=LEI16@22050"}
		if voice != "" {
			args = append(args, "-v", voice)
		}
	} else {
		args = []string{"-s", fmt.Sprint(rate), "-w", out}
		if voice != "" {
			args = append(args, "-v", voice)
		}
	}
	// The text goes after "--" so that it can never be read as an option.
	args = append(args, "--", text)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, &Error{Status: 502, Msg: fmt.Sprintf("%s could not render the preview: %s", filepath.Base(prog), lastLine(stderr.String(), err))}
	}
	b, err := os.ReadFile(out)
	if err != nil || Sniff(b) != FormatWAV {
		return nil, &Error{Status: 502, Msg: filepath.Base(prog) + " wrote no WAV file"}
	}
	return b, nil
}
