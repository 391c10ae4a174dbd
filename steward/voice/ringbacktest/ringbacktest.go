// Package ringbacktest is a scripted voice server speaking the tool contract
// Steward's voice channel expects from Ringback (call_start, call_status,
// call_end, converse) over MCP stdio. Tests run it as a real child process
// through the MCP bridge: it dials nobody; a JSON script says what the user
// "says" and how each call ends, and every tool call is logged to a file.
package ringbacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call scripts one call_start.
type Call struct {
	// Heard are the user's transcriptions: the first answers call_start,
	// the next ones each converse.
	Heard []string `json:"heard"`
	// Outcome is how the call ends when Heard runs out: "" or "completed"
	// waits for call_end; a failure (media_interrupted, no_answer, …) is
	// reported with the [CALL FAILED] marker.
	Outcome string `json:"outcome"`
	// Connected says whether the phone had answered before the failure.
	Connected bool `json:"connected"`
}

// Script drives the server.
type Script struct {
	// Omit leaves these tools out of the list (preflight tests).
	Omit []string `json:"omit"`
	// StatusFailures makes the first n call_status calls fail.
	StatusFailures int `json:"statusFailures"`
	// Calls are consumed by successive call_start calls; one more dial
	// than scripted fails with a test error.
	Calls []Call `json:"calls"`
	// Log is a file each tool call is appended to as one JSON line.
	Log string `json:"log"`
}

// LogLine is one logged tool call.
type LogLine struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

type server struct {
	script Script
	mu     sync.Mutex
	calls  int // call_start count
	cur    *Call
	heard  int
	phase  string
	ended  string // outcome of the current/last call once ended
	conn   bool
	start  time.Time
	status int
}

// Main serves the script at path over stdio until stdin closes.
func Main(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var sc Script
	if err := json.Unmarshal(b, &sc); err != nil {
		return fmt.Errorf("read script %s: %w", path, err)
	}
	s := &server{script: sc, phase: "idle"}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ringback-test", Version: "1"}, nil)
	omit := map[string]bool{}
	for _, o := range sc.Omit {
		omit[o] = true
	}
	add := func(name, desc string, h func(args map[string]any) (string, bool)) {
		if omit[name] {
			return
		}
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
			s.log(name, args)
			text, isErr := h(args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isErr}, nil, nil
		})
	}
	add("call_start", "Dial the user and speak openingLine; returns the user's first reply.", s.callStart)
	add("converse", "Speak text and return the user's reply.", s.converse)
	add("call_end", "Speak text (optional) and hang up.", s.callEnd)
	add("call_status", "The call's phase and, once ended, its outcome.", s.callStatus)
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

func (s *server) log(tool string, args map[string]any) {
	if s.script.Log == "" {
		return
	}
	b, _ := json.Marshal(LogLine{Tool: tool, Args: args})
	f, err := os.OpenFile(s.script.Log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

func (s *server) callStart(args map[string]any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls >= len(s.script.Calls) {
		return "test script: an unscripted dial", true
	}
	c := s.script.Calls[s.calls]
	s.calls++
	s.cur, s.heard, s.ended, s.conn, s.start, s.phase = &c, 0, "", false, time.Now(), "ringing"
	return s.next()
}

func (s *server) converse(args map[string]any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.ended != "" {
		return "NO ACTIVE CALL", true
	}
	return s.next()
}

// next returns the next scripted utterance, or ends the call as scripted.
func (s *server) next() (string, bool) {
	c := s.cur
	if s.heard < len(c.Heard) {
		s.conn, s.phase = true, "listening"
		h := c.Heard[s.heard]
		s.heard++
		return h, false
	}
	if c.Outcome == "" || c.Outcome == "completed" {
		s.phase = "listening"
		return "", false // silence: a successful empty reply
	}
	s.ended, s.conn, s.phase = c.Outcome, c.Connected || s.conn, "ended"
	b, _ := json.Marshal(map[string]any{"code": c.Outcome, "connected": s.conn, "durationMs": time.Since(s.start).Milliseconds()})
	return "[CALL FAILED] " + string(b), true
}

func (s *server) callEnd(args map[string]any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.ended != "" {
		return "NO ACTIVE CALL", true
	}
	s.ended, s.phase = "completed", "ended"
	return "call ended", false
}

func (s *server) callStatus(args map[string]any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status < s.script.StatusFailures {
		s.status++
		return "status unavailable: the SIP stack is starting", true
	}
	st := map[string]any{"phase": s.phase}
	if s.ended != "" {
		st = map[string]any{"phase": "ended", "outcome": s.ended, "connected": s.conn}
	}
	b, _ := json.Marshal(st)
	return string(b), false
}

// ReadLog returns the logged tool calls.
func ReadLog(path string) ([]LogLine, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LogLine
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var l LogLine
		if err := dec.Decode(&l); err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, nil
}
