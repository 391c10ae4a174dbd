package main

import (
	"context"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/voice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// voiceServerName is the MCP server the voice transport runs as: its tools
// are mcp__voice__call_start and so on.
const voiceServerName = "voice"

// voiceSettings reads the voice transport: the MCP server to start, or why
// calls are unavailable. An unknown transport stops start-up.
func voiceSettings(cfg *config.Config) (server *mcpbridge.ServerConfig, unavailable string, err error) {
	switch t := cfg.String("STEWARD_VOICE_TRANSPORT", ""); t {
	case "":
		return nil, "voice calls are not configured: set STEWARD_VOICE_TRANSPORT=ringback and STEWARD_RINGBACK_LAUNCHER (docs/voice.md)", nil
	case "ringback":
	case "streamcore":
		return nil, "", fmt.Errorf("STEWARD_VOICE_TRANSPORT=streamcore is reserved for a future transport; use ringback")
	default:
		return nil, "", fmt.Errorf("STEWARD_VOICE_TRANSPORT=%q: the only transport is ringback", t)
	}
	launcher := cfg.Path("STEWARD_RINGBACK_LAUNCHER", "")
	if launcher == "" {
		return nil, "", fmt.Errorf("STEWARD_VOICE_TRANSPORT=ringback needs STEWARD_RINGBACK_LAUNCHER, the program that starts Ringback's MCP server")
	}
	return &mcpbridge.ServerConfig{Name: voiceServerName, Command: launcher}, "", nil
}

// voiceAuditor records voice events in the audit ledger.
type voiceAuditor struct{ a host.Auditor }

func (v voiceAuditor) AuditVoice(ctx context.Context, typ, chatID, summary string, payload map[string]any) {
	if v.a != nil {
		v.a.Audit(ctx, host.AuditEvent{Actor: "host", Type: typ, Risk: "low", ChatID: chatID, Summary: summary, Payload: payload})
	}
}

// startVoice mounts the call routes: a coordinator over the bridge's voice
// server, or routes that say why calls are off.
func startVoice(cfg *config.Config, h *host.Host, bridge *mcpbridge.Bridge, auditor host.Auditor, configured bool, unavailable string, st *stack) {
	if !configured {
		voice.MountUnavailable(h.Handle, unavailable)
		return
	}
	lang := "en"
	if cfg.String("STEWARD_SPEECH_LANGUAGE", "en") == "it" {
		lang = "it"
	}
	c := voice.New(voice.Options{
		Transport: voice.MCPTransport{Session: func(ctx context.Context) (*mcp.ClientSession, error) {
			return bridge.Session(ctx, voiceServerName)
		}},
		Runner: h, Audit: voiceAuditor{auditor}, Language: lang,
		OpeningLine:      cfg.String("STEWARD_VOICE_OPENING_LINE", ""),
		PreflightTimeout: cfg.Millis("STEWARD_VOICE_PREFLIGHT_TIMEOUT_MS", 10*time.Second, time.Second, 10*time.Minute),
	})
	st.push(func() error { c.Close(); return nil })
	voice.Mount(h.Handle, c)
}
