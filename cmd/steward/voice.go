package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/voice"
	"github.com/agentstack/agentstack/steward/voice/exitnode"
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

// sipServer is where the network fallback checks that SIP is reachable.
const sipServer = "sip.linphone.org:5061"

// sipProbe opens an authorized TLS connection to the SIP server.
func sipProbe(ctx context.Context) error {
	d := tls.Dialer{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", sipServer)
	if err != nil {
		return err
	}
	return conn.Close()
}

// exitNodes adapts the exit-node manager to the coordinator's interface.
type exitNodes struct{ m *exitnode.Manager }

func (e exitNodes) Acquire(ctx context.Context) (voice.NetworkLease, error) {
	l, err := e.m.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
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
func startVoice(cfg *config.Config, h *host.Host, bridge *mcpbridge.Bridge, auditor host.Auditor, usageRec voice.UsageRecorder, configured bool, unavailable string, st *stack, log *slog.Logger) {
	if !configured {
		voice.MountUnavailable(h.Handle, unavailable)
		return
	}
	lang := "en"
	if cfg.String("STEWARD_SPEECH_LANGUAGE", "en") == "it" {
		lang = "it"
	}
	var network voice.Network
	if id := cfg.String("STEWARD_VOICE_EXIT_NODE_ID", ""); id != "" {
		m := exitnode.New(exitnode.Options{CLI: exitnode.Command{}, PeerID: id,
			Journal: cfg.Path("STEWARD_VOICE_NETWORK_SETTINGS_FILE", filepath.Join(cfg.Home, "voice-network.json")) + ".journal",
			Probe:   sipProbe})
		// A lease a crashed host left behind is given back before any call.
		if err := m.Repair(context.Background()); err != nil {
			log.Error("the voice network fallback could not restore the previous exit node", "err", err)
		}
		network = exitNodes{m}
	}
	c := voice.New(voice.Options{
		Network: network, Usage: usageRec,
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
