package speech

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// Route serves the transcription endpoints. With no Transcriber it answers
// every request with Unavailable, so a client learns what to configure.
type Route struct {
	Transcriber *Transcriber
	// Unavailable says why transcription is off ("set STEWARD_WHISPER_BIN …").
	Unavailable string
	Log         *slog.Logger
}

func (r *Route) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// Status is GET /transcribe: whether the microphone can be offered.
type Status struct {
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	// Formats are the containers accepted: WAV only without ffmpeg.
	Formats  []string `json:"formats,omitempty"`
	MaxBytes int64    `json:"maxBytes,omitempty"`
}

// Mount registers GET and POST /transcribe through handle, which must
// require the host token (host.Host.Handle does).
func Mount(handle func(pattern string, h http.Handler), r *Route) {
	handle("GET /transcribe", http.HandlerFunc(r.status))
	handle("POST /transcribe", http.HandlerFunc(r.transcribe))
}

func (r *Route) status(w http.ResponseWriter, _ *http.Request) {
	if r.Transcriber == nil {
		writeJSON(w, http.StatusOK, Status{Reason: r.Unavailable})
		return
	}
	st := Status{Enabled: true, Formats: []string{FormatWAV}, MaxBytes: r.Transcriber.MaxBytes()}
	if r.Transcriber.CanConvert() {
		st.Formats = append(st.Formats, FormatWebM, FormatOgg, FormatMP4)
	}
	writeJSON(w, http.StatusOK, st)
}

// transcribe is POST /transcribe: the recording is the request body, with an
// audio/* content type; the answer is {"text", "language", "durationMs"}.
func (r *Route) transcribe(w http.ResponseWriter, req *http.Request) {
	t := r.Transcriber
	if t == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": r.Unavailable})
		return
	}
	audio, err := io.ReadAll(http.MaxBytesReader(w, req.Body, t.MaxBytes()))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("the recording is over %d bytes", t.MaxBytes())})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the recording could not be read: " + err.Error()})
		return
	}
	res, err := t.Transcribe(req.Context(), audio, req.Header.Get("Content-Type"))
	if err != nil {
		var ue *Error
		if errors.As(err, &ue) {
			writeJSON(w, ue.Status, map[string]string{"error": ue.Msg})
			return
		}
		r.log().Error("transcription failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "transcription failed on the host; see its log"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"text": res.Text, "language": res.Language,
		"durationMs": res.Duration.Milliseconds(), "converted": res.Converted})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
