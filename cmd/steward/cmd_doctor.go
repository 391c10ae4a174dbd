package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/host"
)

func init() {
	register(&command{Name: "doctor", Summary: "check the installation and say how to fix what is wrong", Run: runDoctor})
}

// Check outcomes.
const (
	checkOK    = "ok"
	checkWarn  = "warn"
	checkError = "error"
)

// doctorCheck is one finding of steward doctor.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "doctor", "[--json] [--offline]", `
Checks, without changing anything: STEWARD_HOME and its secret files are private, every SQLite
store opens and is writable (with its schema version), the model providers of gateway.yaml have
their keys and answer, Steward's connectors and mcp.json servers start, the mail, calendar and
contacts sources are readable, the HTTPS certificate pair loads and is not about to expire, and
there is disk space. Each problem comes with the fix. Exits 1 when a check fails.`)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	offline := fs.Bool("offline", false, "skip the checks that reach providers or start connectors")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	var checks []doctorCheck
	add := func(c ...doctorCheck) { checks = append(checks, c...) }
	add(checkHome(cfg.Home)...)
	add(doctorStores(ctx, cfg)...)
	sc, err := readServeConfig(cfg)
	if err != nil {
		add(doctorCheck{Name: "settings", Status: checkError, Detail: err.Error(), Fix: "correct the named settings in " + filepath.Join(cfg.Home, config.EnvFileName) + " or the environment"})
	} else {
		add(checkTLS(sc))
		add(checkProviders(ctx, sc, !*offline)...)
		if !*offline {
			add(checkConnectors(ctx, cfg, sc)...)
		}
	}
	for _, s := range sourceStates(cfg) {
		st := map[string]string{host.StateOK: checkOK, stateNotConfigured: checkOK}[s.State]
		if st == "" {
			st = checkWarn
		}
		d := s.Detail
		if s.State == stateNotConfigured {
			d = "not configured (" + s.Detail + ")"
		}
		add(doctorCheck{Name: "source " + s.Name, Status: st, Detail: d, Fix: s.Fix})
	}
	add(checkDisk(cfg.Home))

	failed := 0
	for _, c := range checks {
		if c.Status == checkError {
			failed++
		}
	}
	if *asJSON {
		writeJSON(env.Stdout, map[string]any{"ok": failed == 0, "home": cfg.Home, "version": version, "checks": checks})
	} else {
		for _, c := range checks {
			fmt.Fprintf(env.Stdout, "%-5s %-28s %s\n", c.Status, c.Name, c.Detail)
			if c.Fix != "" && c.Status != checkOK {
				fmt.Fprintf(env.Stdout, "      fix: %s\n", c.Fix)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed", failed)
	}
	return nil
}

// privateFiles must be readable by their owner only.
var privateFiles = []string{host.TokenFileName, "vapid.json", config.EnvFileName, "push-subscriptions.json", "wiki-api-token"}

func checkHome(home string) []doctorCheck {
	info, err := os.Stat(home)
	if err != nil {
		return []doctorCheck{{Name: "home", Status: checkError, Detail: err.Error(), Fix: "run steward serve once (it creates STEWARD_HOME), or set STEWARD_HOME to the right folder"}}
	}
	out := []doctorCheck{{Name: "home", Status: checkOK, Detail: home + " is private (0700)"}}
	if p := info.Mode().Perm(); p&0o077 != 0 {
		out[0] = doctorCheck{Name: "home", Status: checkError, Detail: fmt.Sprintf("%s is mode %#o: other users can look inside", home, p), Fix: "chmod 700 " + home}
	}
	if unix.Access(home, unix.W_OK) != nil {
		out[0] = doctorCheck{Name: "home", Status: checkError, Detail: home + " is not writable by this user", Fix: "chown -R $USER " + home}
	}
	for _, f := range privateFiles {
		p := filepath.Join(home, f)
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			out = append(out, doctorCheck{Name: "file " + f, Status: checkError, Detail: fmt.Sprintf("%s is mode %#o: it holds a secret", p, m), Fix: "chmod 600 " + p})
		}
	}
	return out
}

// doctorStores checks the stores as the System page does and adds each
// one's schema version (PRAGMA user_version).
func doctorStores(ctx context.Context, cfg *config.Config) []doctorCheck {
	specs := (&systemDeps{cfg: cfg}).storeSpecs()
	var out []doctorCheck
	for i, st := range checkStores(ctx, specs) {
		c := doctorCheck{Name: "store " + st.Name, Status: doctorStatus(st.State), Detail: st.Detail}
		_, statErr := os.Stat(specs[i].path)
		switch {
		case st.State == host.StateUnknown:
			c.Status = checkOK // an index not built yet
		case errors.Is(statErr, fs.ErrNotExist):
			c.Status, c.Detail, c.Fix = checkWarn, "not created yet: "+specs[i].path, "run steward serve once"
		case st.State != host.StateOK:
			c.Fix = fmt.Sprintf("check the owner and mode of %s and its folder (chmod 600 FILE, chmod 700 FOLDER); a damaged store comes back with steward restore, an index by moving it away", specs[i].path)
		default:
			if v, err := schemaVersion(ctx, specs[i].path); err == nil {
				c.Detail += fmt.Sprintf(", schema version %d", v)
			}
		}
		out = append(out, c)
	}
	return out
}

func schemaVersion(ctx context.Context, path string) (int, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true, MaxOpenConns: 1})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var v int
	return v, db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
}

// doctorStatus maps a System page state to a check outcome.
func doctorStatus(state string) string {
	switch state {
	case host.StateOK:
		return checkOK
	case host.StateError:
		return checkError
	}
	return checkWarn
}

func checkTLS(sc *serveConfig) doctorCheck {
	if sc.tlsCert == "" {
		return doctorCheck{Name: "https", Status: checkOK, Detail: "not configured (loopback only)", Fix: "set STEWARD_TLS_CERT and STEWARD_TLS_KEY to reach Steward from a phone"}
	}
	certs, err := sc.certReloader(nil)
	if err != nil {
		return doctorCheck{Name: "https", Status: checkError, Detail: err.Error(), Fix: "point STEWARD_TLS_CERT and STEWARD_TLS_KEY at a matching PEM pair (e.g. from tailscale cert)"}
	}
	leaf := certs.Leaf()
	left := time.Until(leaf.NotAfter)
	c := doctorCheck{Name: "https", Status: checkOK, Detail: fmt.Sprintf("%s, valid until %s", httpsURL(certs, sc.tlsPort), leaf.NotAfter.Format("2006-01-02"))}
	switch {
	case left < 0:
		c.Status, c.Fix = checkError, "renew the certificate (tailscale cert NAME); Steward picks it up without a restart"
	case left < 14*24*time.Hour:
		c.Status, c.Fix = checkWarn, "renew the certificate soon (tailscale cert NAME)"
	}
	return c
}

// checkProviders checks that every provider gateway.yaml uses has its key
// and, when reach is set, answers at all (any HTTP status counts).
func checkProviders(ctx context.Context, sc *serveConfig, reach bool) []doctorCheck {
	gcfg, _, err := gateway.LoadConfig(sc.gatewayConfig)
	if err != nil {
		return []doctorCheck{{Name: "gateway config", Status: checkError, Detail: err.Error(), Fix: "fix " + sc.gatewayConfig + " (steward setup writes a working one)"}}
	}
	if sc.gatewayBaseURL != "" {
		return []doctorCheck{{Name: "gateway", Status: checkOK, Detail: "external gateway " + sc.gatewayBaseURL}}
	}
	names := make([]string, 0, len(gcfg.Providers))
	for n := range gcfg.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []doctorCheck
	client := &http.Client{Timeout: 5 * time.Second}
	for _, n := range names {
		p := gcfg.Providers[n]
		c := doctorCheck{Name: "provider " + n, Status: checkOK, Detail: p.BaseURL}
		if p.APIKeyEnv != "" {
			if v, ok := sc.lookup(p.APIKeyEnv); !ok || strings.TrimSpace(v) == "" {
				c.Status, c.Detail = checkWarn, p.APIKeyEnv+" is not set: models on "+n+" cannot answer"
				c.Fix = fmt.Sprintf("put %s=… in %s, or run steward setup", p.APIKeyEnv, filepath.Join(sc.home, config.EnvFileName))
			}
		}
		if reach && c.Status == checkOK {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimRight(p.BaseURL, "/")+"/models", nil)
			resp, err := client.Do(req)
			cancel()
			if err != nil {
				c.Status, c.Detail = checkWarn, "unreachable: "+err.Error()
				c.Fix = "start the provider (for Ollama: ollama serve) or correct base_url in " + sc.gatewayConfig
			} else {
				resp.Body.Close()
				c.Detail += fmt.Sprintf(" answers (%d)", resp.StatusCode)
			}
		}
		out = append(out, c)
	}
	return out
}

// checkConnectors starts every connector and mcp.json server as serve
// would and reports each one's first start.
func checkConnectors(ctx context.Context, cfg *config.Config, sc *serveConfig) []doctorCheck {
	servers, err := connectorServers(cfg, fmt.Sprintf("http://127.0.0.1:%d/v1", sc.gatewayPort), sc.gatewayKey)
	if err != nil {
		return []doctorCheck{{Name: "connectors", Status: checkError, Detail: err.Error(), Fix: "fix " + filepath.Join(cfg.Home, "mcp.json")}}
	}
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	bridge := mcpbridge.New(mcpbridge.Options{Servers: servers})
	bridge.Start(bctx)
	defer bridge.Close()
	bridge.WaitStarted(bctx)
	var out []doctorCheck
	for _, s := range bridge.Status() {
		c := doctorCheck{Name: "connector " + s.Name, Status: checkOK, Detail: fmt.Sprintf("starts, %d tools", s.Tools)}
		if s.State != mcpbridge.StateReady {
			c.Status, c.Detail = checkError, fmt.Sprintf("%s: %s", s.State, s.LastError)
			c.Fix = "run the server by hand to see its error (steward mcp " + s.Name + " for Steward's own), or remove it from mcp.json"
		}
		out = append(out, c)
	}
	return out
}

func checkDisk(home string) doctorCheck {
	d := diskStatus(home)
	c := doctorCheck{Name: "disk", Status: doctorStatus(d.State), Detail: d.Detail}
	if c.Status != checkOK {
		c.Fix = "free disk space in " + home + ": SQLite needs room for its write-ahead logs, and backups for their copies"
	}
	return c
}
