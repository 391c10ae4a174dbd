package speech_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/speech"
)

func TestSettingsStore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "voice-settings.json")
	st := &speech.SettingsStore{Path: p}
	s, err := st.Load()
	if err != nil || s.Rate != speech.DefaultRate || len(s.Voices) != 0 {
		t.Fatalf("defaults %+v %v", s, err)
	}
	want := speech.VoiceSettings{Voices: map[string]string{"it": "Alice", "en": ""}, Rate: 220}
	if err := st.Save(want); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if got, err := st.Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("reloaded %+v %v", got, err)
	}
	for _, bad := range []struct {
		s    speech.VoiceSettings
		want string
	}{
		{speech.VoiceSettings{Rate: 99}, "rate: 99"},
		{speech.VoiceSettings{Rate: 301}, "rate: 301"},
		{speech.VoiceSettings{Rate: 150, Voices: map[string]string{"fr": "x"}}, `language "fr"`},
	} {
		if err := st.Save(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Save(%+v) = %v, want %q", bad.s, err, bad.want)
		}
	}
	if got, _ := st.Load(); got.Rate != 220 {
		t.Fatal("a refused save changed the file")
	}
	os.WriteFile(p, []byte("{broken"), 0o600)
	if _, err := st.Load(); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("broken file: %v", err)
	}
}

func TestVoiceToolsAndRoutes(t *testing.T) {
	dir := t.TempDir()
	store := &speech.SettingsStore{Path: filepath.Join(dir, "voice-settings.json")}
	callFile := filepath.Join(dir, "voice-call-settings.json")
	tools := speech.Tools(store, callFile)
	byName := map[string]func(string) (string, bool){}
	for _, tl := range tools {
		tl := tl
		byName[tl.Spec().Name] = func(args string) (string, bool) {
			res, err := tl.Call(context.Background(), json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return res.Content, res.IsError
		}
	}
	if out, isErr := byName[speech.ToolSetCallRate](`{"rate":250}`); isErr || !strings.Contains(out, "250") {
		t.Fatalf("set_call_rate: %q", out)
	}
	if s, _ := (&speech.SettingsStore{Path: callFile}).Load(); s.Rate != 250 {
		t.Fatalf("call file rate %d", s.Rate)
	}
	if d, _ := store.Load(); d.Rate != speech.DefaultRate {
		t.Fatal("set_call_rate changed the defaults")
	}
	if _, isErr := byName[speech.ToolSetCallRate](`{"rate":50}`); !isErr {
		t.Fatal("rate 50 accepted")
	}
	if out, isErr := byName[speech.ToolSetVoiceDefaults](`{"rate":140,"voices":{"it":"Alice"}}`); isErr {
		t.Fatalf("set_voice_defaults: %q", out)
	}
	if d, _ := store.Load(); d.Rate != 140 || d.Voices["it"] != "Alice" {
		t.Fatalf("defaults %+v", d)
	}

	mux := http.NewServeMux()
	speech.MountSettings(func(p string, h http.Handler) { mux.Handle(p, h) }, &speech.SettingsRoute{Store: store, Synth: &speech.Synthesizer{Program: "/nonexistent/espeak-ng", TempDir: dir}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(path, body string) (int, string) {
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		return res.StatusCode, b.String()
	}
	if code, body := post("/settings/speech", `{"rate":400,"voices":{}}`); code != 400 || !strings.Contains(body, "rate: 400") {
		t.Errorf("bad rate: %d %s", code, body)
	}
	if code, body := post("/settings/speech", `{"rate":200,"speed":3}`); code != 400 || !strings.Contains(body, "speed") {
		t.Errorf("unknown field: %d %s", code, body)
	}
	if code, body := post("/settings/speech", `{"rate":200,"voices":{"en":"en-us"}}`); code != 200 {
		t.Errorf("save: %d %s", code, body)
	}
	res, _ := http.Get(srv.URL + "/settings/speech")
	var view speech.SettingsView
	json.NewDecoder(res.Body).Decode(&view)
	res.Body.Close()
	if view.Settings.Rate != 200 || view.Settings.Voices["en"] != "en-us" || !strings.Contains(view.Problem, "espeak-ng") || view.MinRate != 100 {
		t.Errorf("view %+v", view)
	}
	if code, body := post("/settings/speech/preview", `{"text":"hello","rate":200}`); code != 503 || !strings.Contains(body, "install") {
		t.Errorf("preview without an engine: %d %s", code, body)
	}
}

func TestParseVoices(t *testing.T) {
	espeak := "Pty Language       Age/Gender VoiceName          File                 Other Languages\n" +
		" 5  af              --/M      Afrikaans          gmw/af\n" +
		" 2  en-gb           --/M      English_(Great_Britain) gmw/en\n" +
		" 5  en-us           --/M      English_(America)  gmw/en-US\n" +
		" 5  it              --/M      Italian            roa/it\n"
	say := "Alice               it_IT    # Ciao! Mi chiamo Alice.\nAlex                en_US    # Most people recognize me by my voice.\nAmélie              fr_CA    # Bonjour\nGood News           en_US    # Hello\n"
	// The parser is internal; Voices is exercised through a fake engine.
	dir := t.TempDir()
	for _, c := range []struct {
		kind, out string
		want      []speech.Voice
	}{
		{"espeak-ng", espeak, []speech.Voice{{"English_(Great_Britain)", "en"}, {"English_(America)", "en"}, {"Italian", "it"}}},
		{"say", say, []speech.Voice{{"Alice", "it"}, {"Alex", "en"}, {"Good News", "en"}}},
	} {
		prog := filepath.Join(dir, c.kind)
		os.WriteFile(filepath.Join(dir, c.kind+".out"), []byte(c.out), 0o600)
		os.WriteFile(prog, []byte("#!/bin/sh\ncat "+filepath.Join(dir, c.kind+".out")+"\n"), 0o755)
		got, err := (&speech.Synthesizer{Program: prog, Kind: c.kind}).Voices(context.Background())
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s voices %+v %v, want %+v", c.kind, got, err, c.want)
		}
	}
}

// With Debian's espeak-ng, a preview is a real WAV and leaves nothing behind;
// text that looks like an option is spoken, not obeyed.
func TestPreviewWithEspeak(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed (apt-get install espeak-ng)")
	}
	dir := t.TempDir()
	s := &speech.Synthesizer{TempDir: dir}
	slow, err := s.Preview(context.Background(), "--version is what I said", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Preview(context.Background(), "--version is what I said", "", 300)
	if err != nil {
		t.Fatal(err)
	}
	si, err1 := speech.ParseWAV(slow)
	fi, err2 := speech.ParseWAV(fast)
	if err1 != nil || err2 != nil || si.Duration() <= fi.Duration() || fi.Duration() <= 0 {
		t.Fatalf("durations at 100 and 300 WPM: %v %v (%v %v)", si.Duration(), fi.Duration(), err1, err2)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind %v", left)
	}
	if _, err := s.Preview(context.Background(), "hi", "-x", 150); err == nil {
		t.Fatal("a voice name starting with - was accepted")
	}
}
