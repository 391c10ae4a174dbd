package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/operator"
)

func startCommand() *command {
	var pf projectFlags
	var host, analystMode string
	var port int
	var supervise, unit bool
	return &command{
		name: "start", summary: "serve the project: operator API, Analyst and runtime",
		usage: "[--port N] [--host H] [--analyst-mode internal|external|both] [--supervise] [--root DIR] [--config FILE]",
		help: `Takes the project lock, admits the state, settles sessions and cards an
earlier server left interrupted (running cards become stopped), and serves
the operator API until interrupted. Execution stays stopped until a Run
(saivage run, POST /api/runtime/run or the Analyst's start_project).

Listener: --host/--port, else SAIVAGE_HOST/SAIVAGE_PORT, else server: in the
YAML, else 127.0.0.1:4400. Every /api route needs the bearer token from
SAIVAGE_AUTH_TOKEN, else .saivage/auth-token (generated once, mode 0600).
The cockpit (the operator's browser view) is served at the same address.

A confirmed POST /api/runtime/restart-server (saivage restart) stops the
server and exits with status 75, so a supervisor starts it again:
--supervise runs the server as a child process and starts it again
whenever it exits 75 (any other status ends the supervisor with it), or
use systemd with RestartForceExitStatus=75.

Analyst mode (--analyst-mode, else SAIVAGE_ANALYST_MODE, else internal),
frozen for the server's lifetime:
  internal  the Analyst model answers POST /api/chat (saivage chat).
  external  the Analyst's tools are served to an external MCP client
            (streamable HTTP on a loopback port, printed at start, path
            derived from the project; bearer token from
            SAIVAGE_ANALYST_MCP_TOKEN, else .saivage/analyst-mcp-token,
            generated once); POST /api/chat is refused.
  both      both at once. SAIVAGE_ANALYST_MCP_PORT fixes the MCP port.
Settled external calls leave body-free receipts (GET /api/external-tool-calls).`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.StringVar(&host, "host", "", "listen address (default $SAIVAGE_HOST, YAML, 127.0.0.1)")
			fs.IntVar(&port, "port", 0, "listen port (default $SAIVAGE_PORT, YAML, 4400)")
			fs.StringVar(&analystMode, "analyst-mode", "", "internal, external or both (default $SAIVAGE_ANALYST_MODE, else internal)")
			fs.BoolVar(&supervise, "supervise", false, "run the server as a child and start it again when it exits 75 (a confirmed restart)")
			fs.BoolVar(&unit, "systemd-unit", false, "print a systemd user unit that runs this project's server (restarted on exit 75) and exit")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"start takes no arguments"}
			}
			if unit {
				return printSystemdUnit(e, &pf)
			}
			if supervise {
				return superviseStart(ctx, e, os.Args[1:])
			}
			logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			app, err := operator.Start(ctx, operator.StartOptions{
				Flags:     config.Flags{Root: pf.root, Config: pf.config, Host: host, Port: port},
				LookupEnv: e.lookupEnv, Logger: logger, AnalystMode: analystMode, Version: Version,
			})
			if err != nil {
				return err
			}
			p := app.Runtime.Project()
			if pf.json {
				out := map[string]any{"url": app.URL, "root": p.Root, "token": app.TokenSource, "runtime": app.Runtime.Status().Status,
					"analyst_mode": app.AnalystMode}
				if app.AnalystMCPURL != "" {
					out["analyst_mcp"] = map[string]any{"url": app.AnalystMCPURL, "token": app.AnalystMCPTokenSource}
				}
				_ = writeJSON(e.stdout, out)
			} else {
				fmt.Fprintf(e.stdout, "saivage serving %s at %s\nbearer token: %s\nruntime: %s (saivage run starts the Run)\nanalyst: %s\n",
					p.Root, app.URL, app.TokenSource, app.Runtime.Status().Status, app.AnalystMode)
				if app.AnalystMCPURL != "" {
					fmt.Fprintf(e.stdout, "external analyst MCP: %s (bearer token: %s)\n", app.AnalystMCPURL, app.AnalystMCPTokenSource)
				}
			}
			var serveErr error
			restart, failed := false, false
			select {
			case <-ctx.Done():
			case serveErr = <-app.Done():
			case <-app.RestartRequested():
				restart = true
			case <-app.Runtime.Failed():
				failed = true
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			closeErr := app.Close(cctx)
			if failed {
				// An owner failed in a way no attempt accounts for: after the
				// bounded cleanup the process exits 1 whatever it reports.
				fmt.Fprintf(e.stderr, "saivage: %v; the server closed (exit 1)\n", app.Runtime.Failure())
				if closeErr != nil {
					fmt.Fprintf(e.stderr, "saivage: cleanup: %v\n", closeErr)
				}
				return exitCode(1)
			}
			if closeErr != nil {
				return errors.Join(serveErr, closeErr)
			}
			if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
				return serveErr
			}
			if restart {
				fmt.Fprintf(e.stdout, "saivage stopped for a confirmed restart (exit %d: start it again)\n", operator.RestartExitCode)
				return exitCode(operator.RestartExitCode)
			}
			fmt.Fprintln(e.stdout, "saivage stopped")
			return nil
		},
	}
}

// liveServer locates the running server through the lock's published
// endpoint. It never rediscovers flags, YAML or defaults.
type liveServer struct {
	url, token string
}

// errNoServer says that no server holds the project.
var errNoServer = errors.New("no Saivage server is running for this project (start one with saivage start)")

func (pf *projectFlags) live(e *env) (*liveServer, lock.Observation, error) {
	in, err := config.ResolveInputs(config.Flags{Root: pf.root, Config: pf.config}, e.lookupEnv)
	if err != nil {
		return nil, lock.Observation{}, err
	}
	stateDir := filepath.Join(in.Root, config.StateDir)
	obs := lock.Inspect(stateDir)
	switch obs.Status {
	case lock.Missing:
		return nil, obs, errNoServer
	case lock.Dead:
		return nil, obs, fmt.Errorf("%w; the lock is stale (%s): inspect the project and remove .saivage/locks/server by hand", errNoServer, obs.Reason)
	case lock.Live:
	default:
		return nil, obs, fmt.Errorf("the project lock is %s (%s); runtime control is unavailable", obs.Status, obs.Reason)
	}
	if obs.Endpoint == "" {
		return nil, obs, errors.New("a lifecycle owner holds the project but publishes no control endpoint; runtime control is unavailable")
	}
	token, ok := e.lookupEnv(operator.EnvAuthToken)
	token = strings.TrimSpace(token)
	if !ok {
		if token, err = operator.ReadTokenFile(filepath.Join(stateDir, operator.TokenFile)); err != nil {
			return nil, obs, fmt.Errorf("read the operator token: %w", err)
		}
	}
	if token == "" {
		return nil, obs, fmt.Errorf("%s is empty", operator.EnvAuthToken)
	}
	return &liveServer{url: strings.TrimRight(obs.Endpoint, "/"), token: token}, obs, nil
}

// call performs one API request and decodes a JSON answer into out.
func (s *liveServer) call(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 10 * time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Message string }
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return fmt.Errorf("%s (%s, HTTP %d)", e.Message, e.Error, resp.StatusCode)
		}
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: invalid answer: %w", method, path, err)
		}
	}
	return nil
}

type runtimeView struct {
	Status      string   `json:"status"`
	RunID       string   `json:"run_id"`
	Activations []string `json:"activations"`
	Error       string   `json:"error"`
	LastRun     *struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	} `json:"last_run"`
}

func (v runtimeView) line() string {
	s := v.Status
	if len(v.Activations) > 0 {
		s += " (active: " + strings.Join(v.Activations, " → ") + ")"
	}
	if v.Error != "" {
		s += ": " + v.Error
	}
	if v.LastRun != nil && v.Status == "stopped" {
		s += "; last run " + v.LastRun.Outcome
		if v.LastRun.Reason != "" {
			s += " (" + v.LastRun.Reason + ")"
		}
	}
	return s
}

// controlCommand delegates run, pause, resume and stop to the live server.
func controlCommand(name, route, summary, help string) *command {
	var pf projectFlags
	return &command{
		name: name, summary: summary, usage: "[--root DIR] [--json]", help: help,
		flags: pf.register,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{name + " takes no arguments"}
			}
			srv, _, err := pf.live(e)
			if err != nil {
				if name == "stop" && errors.Is(err, errNoServer) {
					if pf.json {
						return writeJSON(e.stdout, map[string]any{"ok": true, "runtime": "stopped", "note": "no server is running"})
					}
					fmt.Fprintln(e.stdout, "already stopped: no server is running")
					return nil
				}
				return err
			}
			var out struct {
				Runtime runtimeView `json:"runtime"`
			}
			if err := srv.call(ctx, http.MethodPost, route, nil, &out); err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, map[string]any{"ok": true, "runtime": out.Runtime})
			}
			fmt.Fprintf(e.stdout, "runtime: %s\n", out.Runtime.line())
			return nil
		},
	}
}

func runCommand() *command {
	return controlCommand("run", "/api/runtime/run", "start a Run on the live server",
		"Asks the running server to start a Run: cards left running are recovered and the root card is activated.")
}

func pauseCommand() *command {
	return controlCommand("pause", "/api/runtime/pause", "pause the Run (running tools finish)",
		"Blocks new autonomous model calls; running tools and commands finish. saivage resume continues the same Run.")
}

func resumeCommand() *command {
	return controlCommand("resume", "/api/runtime/resume", "resume a paused Run", "Reopens the paused Run.")
}

func stopCommand() *command {
	return controlCommand("stop", "/api/runtime/stop-project", "stop the Run (no card outcome is written)",
		"Halts every activation and contains card processes. Cards stay running on disk; the next Run recovers them. The server keeps serving.")
}
