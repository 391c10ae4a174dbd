package main

import (
	"log/slog"
	"time"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/speech"
)

// speechRoute builds /transcribe from the settings: a transcriber, or the
// reason there is none, which the route answers with and the log states once.
func speechRoute(cfg *config.Config, log *slog.Logger) *speech.Route {
	r := &speech.Route{Log: log}
	if !cfg.Bool("STEWARD_SPEECH_ENABLED", true) {
		r.Unavailable = "transcription is disabled (STEWARD_SPEECH_ENABLED=0)"
		return r
	}
	opts := speech.Options{
		Bin:         cfg.String("STEWARD_WHISPER_BIN", ""),
		Model:       cfg.String("STEWARD_WHISPER_MODEL", ""),
		Language:    cfg.String("STEWARD_SPEECH_LANGUAGE", speech.DefaultLanguage),
		FFmpeg:      cfg.String("STEWARD_FFMPEG", ""),
		Timeout:     cfg.Millis("STEWARD_WHISPER_TIMEOUT_MS", speech.DefaultTimeout, time.Second, 30*time.Minute),
		MaxBytes:    cfg.Int("STEWARD_SPEECH_MAX_BYTES", speech.DefaultMaxBytes, 1024, 200<<20),
		MaxDuration: time.Duration(cfg.Int("STEWARD_SPEECH_MAX_SECONDS", int64(speech.DefaultMaxDuration/time.Second), 1, 3600)) * time.Second,
	}
	if opts.Bin == "" && opts.Model == "" {
		r.Unavailable = "transcription is not configured: set STEWARD_WHISPER_BIN and STEWARD_WHISPER_MODEL (docs/voice.md)"
		return r
	}
	t, err := speech.New(opts)
	if err != nil {
		r.Unavailable = "transcription is unavailable: " + err.Error()
		log.Warn("dictation is off", "reason", err)
		return r
	}
	r.Transcriber = t
	return r
}
