package speech

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentstack/agentstack/agent"
)

// Host-native tools of the voice settings.
const (
	// ToolSetCallRate changes only the current call's rate; it is allowed.
	ToolSetCallRate = "set_call_rate"
	// ToolSetVoiceDefaults persists the default rate or voices; it asks.
	ToolSetVoiceDefaults = "set_voice_defaults"
)

// SettingsRoute serves the System page's speech settings.
type SettingsRoute struct {
	Store *SettingsStore
	Synth *Synthesizer
}

// MountSettings registers GET/POST /settings/speech and POST
// /settings/speech/preview through handle, which must require the token.
func MountSettings(handle func(pattern string, h http.Handler), r *SettingsRoute) {
	handle("GET /settings/speech", http.HandlerFunc(r.get))
	handle("POST /settings/speech", http.HandlerFunc(r.post))
	handle("POST /settings/speech/preview", http.HandlerFunc(r.preview))
}

// SettingsView is GET /settings/speech.
type SettingsView struct {
	Settings VoiceSettings `json:"settings"`
	Voices   []Voice       `json:"voices"`
	MinRate  int           `json:"minRate"`
	MaxRate  int           `json:"maxRate"`
	// Problem says why voices cannot be listed (no engine installed).
	Problem string `json:"problem,omitempty"`
}

func (r *SettingsRoute) get(w http.ResponseWriter, req *http.Request) {
	s, err := r.Store.Load()
	v := SettingsView{Settings: s, Voices: []Voice{}, MinRate: MinRate, MaxRate: MaxRate}
	if err != nil {
		v.Problem = err.Error()
	}
	if voices, err := r.Synth.Voices(req.Context()); err != nil {
		v.Problem = err.Error()
	} else if voices != nil {
		v.Voices = voices
	}
	writeJSON(w, http.StatusOK, v)
}

func (r *SettingsRoute) post(w http.ResponseWriter, req *http.Request) {
	var s VoiceSettings
	if err := decodeStrict(w, req, &s); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if s.Voices == nil {
		s.Voices = map[string]string{}
	}
	if err := r.Store.Save(s); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (r *SettingsRoute) preview(w http.ResponseWriter, req *http.Request) {
	var p struct {
		Text  string `json:"text"`
		Voice string `json:"voice"`
		Rate  int    `json:"rate"`
	}
	if err := decodeStrict(w, req, &p); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	wav, err := r.Synth.Preview(req.Context(), p.Text, p.Voice, p.Rate)
	var ue *Error
	switch {
	case errors.As(err, &ue):
		writeJSON(w, ue.Status, map[string]string{"error": ue.Msg})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		w.Header().Set("Content-Type", "audio/wav")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(wav)
	}
}

// decodeStrict reads a small JSON object, refusing unknown fields.
func decodeStrict(w http.ResponseWriter, req *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 16<<10))
	if err != nil {
		return errors.New("the request body is over 16 KiB")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid request: %v", err)
	}
	return nil
}

// Tools are the agent's voice-settings tools: set_call_rate writes only the
// active call's rate file (callFile, which Ringback reads before speaking);
// set_voice_defaults persists the defaults and is gated by policy.
func Tools(store *SettingsStore, callFile string) []agent.Tool {
	rateSchema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"rate":{"type":"integer","minimum":%d,"maximum":%d}},"required":["rate"],"additionalProperties":false}`, MinRate, MaxRate))
	return []agent.Tool{
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: ToolSetCallRate, Description: "Change the speech rate of the current phone call only (words per minute).", Parameters: rateSchema},
			Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
				var a struct{ Rate int }
				if json.Unmarshal(args, &a) != nil || a.Rate < MinRate || a.Rate > MaxRate {
					return agent.ToolResult{Content: fmt.Sprintf("rate must be %d–%d words per minute", MinRate, MaxRate), IsError: true}, nil
				}
				call := &SettingsStore{Path: callFile}
				if err := call.Save(VoiceSettings{Voices: map[string]string{}, Rate: a.Rate}); err != nil {
					return agent.ToolResult{Content: err.Error(), IsError: true}, nil
				}
				return agent.ToolResult{Content: fmt.Sprintf("This call now speaks at %d words per minute.", a.Rate)}, nil
			}},
		agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: ToolSetVoiceDefaults, Description: "Save the default speech rate and, optionally, the voice per language (en, it) for future calls.",
			Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"rate":{"type":"integer","minimum":%d,"maximum":%d},"voices":{"type":"object","properties":{"en":{"type":"string"},"it":{"type":"string"}},"additionalProperties":false}},"additionalProperties":false}`, MinRate, MaxRate))},
			Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
				var a struct {
					Rate   int               `json:"rate"`
					Voices map[string]string `json:"voices"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return agent.ToolResult{Content: "arguments must be {rate, voices}", IsError: true}, nil
				}
				s, err := store.Load()
				if err != nil {
					return agent.ToolResult{Content: err.Error(), IsError: true}, nil
				}
				if a.Rate != 0 {
					s.Rate = a.Rate
				}
				for k, v := range a.Voices {
					s.Voices[k] = v
				}
				if err := store.Save(s); err != nil {
					return agent.ToolResult{Content: err.Error(), IsError: true}, nil
				}
				return agent.ToolResult{Content: fmt.Sprintf("Saved: %d words per minute, voices %v.", s.Rate, s.Voices)}, nil
			}},
	}
}
