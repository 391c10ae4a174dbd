package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ToolPrefix starts the name of every tool the bridge exposes.
const ToolPrefix = "mcp__"

// MaxToolNameLen is the longest function name OpenAI-compatible APIs accept.
const MaxToolNameLen = 64

// ToolName returns the name the model sees for tool of server:
// mcp__<server>__<tool>, using only [a-zA-Z0-9_-] and at most 64 characters.
// A tool name that had to be changed (other characters, empty, too long) gets
// a short hash of the original appended, so two tools that clean up to the
// same text still get distinct names, and the result never depends on the
// order in which a server lists its tools. server must be a valid server name
// (see ServerConfig.Validate).
func ToolName(server, tool string) string {
	clean := sanitizeToolName(tool)
	name := ToolPrefix + server + "__" + clean
	if clean == tool && tool != "" && len(name) <= MaxToolNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name)+len(suffix) > MaxToolNameLen {
		name = name[:MaxToolNameLen-len(suffix)]
	}
	return name + suffix
}

// SplitToolName returns the server and (cleaned) tool parts of a name made by
// ToolName; ok is false for names that are not bridge tools.
func SplitToolName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, ToolPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "__")
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

func sanitizeToolName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
