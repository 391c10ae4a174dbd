package host_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/speech"
)

// A stand-in for the whisper.cpp CLI: it checks the argv the real program
// takes and writes the transcript file -of names.
const fakeWhisperCLI = `#!/bin/sh
[ "$1" = -m ] && [ "$3" = -f ] && [ "$7" = -nt ] && [ "${10}" = -of ] || { echo "bad argv: $*" >&2; exit 2; }
echo " Remind me to call Anna tomorrow." > "${11}.txt"
`

func newTranscriber(t *testing.T) *speech.Transcriber {
	t.Helper()
	dir := t.TempDir()
	bin, model := filepath.Join(dir, "whisper-cli"), filepath.Join(dir, "model.bin")
	os.WriteFile(bin, []byte(fakeWhisperCLI), 0o755)
	os.WriteFile(model, []byte("m"), 0o600)
	t.Setenv("PATH", t.TempDir()) // no ffmpeg: WAV only
	tr, err := speech.New(speech.Options{Bin: bin, Model: model, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

type quickAnswer struct {
	status   int
	replayed string
	ChatID   string `json:"chatId"`
	OK       bool   `json:"ok"`
	Text     string `json:"text"`
	Error    string `json:"error"`
}

func (e *env) quickSend(t *testing.T, ctype, query string, body []byte, header ...string) quickAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/quick-send"+query, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a quickAnswer
	json.NewDecoder(resp.Body).Decode(&a)
	a.status, a.replayed = resp.StatusCode, resp.Header.Get("Idempotent-Replayed")
	return a
}

func userText(req llmtest.Request) string {
	msgs := req.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i].(map[string]any); m["role"] == "user" {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

func TestQuickSendAudioIsTranscribedThenRun(t *testing.T) {
	e := newEnv(t, envOptions{transcriber: newTranscriber(t)})
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "I will remind you."})
	wav := speech.WAV(make([]int16, 16000), 16000, 1)
	a := e.quickSend(t, "audio/wav", "?requestId=shortcut-1", wav)
	if a.status != 200 || !a.OK || a.Text != "I will remind you." || a.ChatID == "" {
		t.Fatalf("quick send of audio = %+v", a)
	}
	if got := userText(e.provider.Requests()[0]); !strings.Contains(got, "Remind me to call Anna tomorrow.") {
		t.Fatalf("the model was sent %q, not the transcript", got)
	}
	// The same request id within ten minutes: the first answer, no second turn.
	again := e.quickSend(t, "audio/wav", "?requestId=shortcut-1", wav)
	if again.ChatID != a.ChatID || again.replayed != "true" || len(e.provider.Requests()) != 1 {
		t.Fatalf("repeat = %+v; %d model requests", again, len(e.provider.Requests()))
	}
}

func TestQuickSendRequestIDIdempotency(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "First."}, llmtest.Reply{Content: "Second."})
	// A refused request is not remembered: its retry runs.
	if a := e.quickSend(t, "application/json", "", []byte(`{"text":"  ","requestId":"r-1"}`)); a.status != 400 {
		t.Fatalf("empty text = %+v", a)
	}
	first := e.quickSend(t, "application/json", "", []byte(`{"text":"hello","requestId":"r-1"}`))
	if first.status != 200 || first.Text != "First." {
		t.Fatalf("first = %+v", first)
	}
	dup := e.quickSend(t, "application/json", "", []byte(`{"text":"hello again","requestId":"r-1"}`))
	if dup.ChatID != first.ChatID || dup.Text != "First." || dup.replayed != "true" {
		t.Fatalf("duplicate = %+v", dup)
	}
	other := e.quickSend(t, "application/json", "", []byte(`{"text":"hello","requestId":"r-2"}`))
	if other.ChatID == first.ChatID || other.Text != "Second." || other.replayed != "" {
		t.Fatalf("another id = %+v", other)
	}
	noID := e.quickSend(t, "application/json", "", []byte(`{"text":"no id"}`))
	if noID.ChatID == "" || noID.replayed != "" {
		t.Fatalf("without id = %+v", noID)
	}
}

func TestQuickSendRefusals(t *testing.T) {
	e := newEnv(t, envOptions{transcriber: newTranscriber(t)})
	bare := newEnv(t, envOptions{})
	wav := speech.WAV(make([]int16, 1600), 16000, 1)
	for _, c := range []struct {
		name       string
		e          *env
		ctype, q   string
		body       []byte
		status     int
		msgContain string
	}{
		{"audio without whisper", bare, "audio/wav", "", wav, 503, "STEWARD_WHISPER_BIN"},
		{"oversized audio", e, "audio/wav", "", make([]byte, 2<<20), 413, "over 1048576 bytes"},
		{"not audio", e, "audio/ogg", "", []byte("this is text, not Ogg"), 415, "not WAV, WebM, Ogg or MP4"},
		{"Ogg without ffmpeg", e, "audio/ogg", "", append([]byte("OggS"), make([]byte, 64)...), 415, "needs ffmpeg"},
		{"long request id", e, "application/json", "", []byte(`{"text":"x","requestId":"` + strings.Repeat("a", 129) + `"}`), 400, "requestId is over 128"},
		{"not JSON", e, "text/plain", "", []byte("hello"), 400, "audio/* content type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := c.e.quickSend(t, c.ctype, c.q, c.body)
			if a.status != c.status || !strings.Contains(a.Error, c.msgContain) {
				t.Fatalf("answer %d %q, want %d containing %q", a.status, a.Error, c.status, c.msgContain)
			}
		})
	}
	if n := len(e.provider.Requests()) + len(bare.provider.Requests()); n != 0 {
		t.Fatalf("%d model requests for refused quick sends", n)
	}
}
