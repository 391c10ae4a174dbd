package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/host"
)

// stateNotConfigured is a source the user has not set up yet.
const stateNotConfigured = "not configured"

// sourceState is whether one personal-data source is set up, and how to set
// it up when it is not.
type sourceState struct {
	Name   string
	State  string // ok, not configured, or warning
	Detail string
	Fix    string // the command or file that configures it
}

// sourceStates checks mail, calendar and contacts configuration without
// starting them.
func sourceStates(cfg *config.Config) []sourceState {
	out := []sourceState{mailState(cfg)}
	for _, s := range []struct{ name, env, file, cmd string }{
		{"calendar", "CALENDAR_CONFIG", "calendar.yaml", "steward calendar sync"},
		{"contacts", "CONTACTS_CONFIG", "contacts.yaml", "steward contacts index"},
	} {
		path := cfg.Path(s.env, filepath.Join(cfg.Home, s.file))
		st := sourceState{Name: s.name, State: host.StateOK, Detail: path}
		if _, err := os.ReadFile(path); errors.Is(err, fs.ErrNotExist) {
			if runtime.GOOS != "darwin" { // macOS reads Apple Calendar and Contacts without a file
				st.State, st.Detail = stateNotConfigured, "no "+path
				st.Fix = fmt.Sprintf("create %s (docs/calendar-contacts.md), then run: %s", path, s.cmd)
			}
		} else if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is said once
			}
			st.State, st.Detail = host.StateWarning, "cannot read "+path+": "+err.Error()
		}
		out = append(out, st)
	}
	return out
}

func mailState(cfg *config.Config) sourceState {
	st := sourceState{Name: "mail", State: host.StateOK}
	path := cfg.Path("MAIL_CONFIG", filepath.Join(cfg.Home, "mail.yaml"))
	fix := fmt.Sprintf("create %s with your accounts (docs/mail.md), then run: steward mail backfill", path)
	c, err := mail.LoadConfig(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if runtime.GOOS != "darwin" { // macOS discovers Apple Mail
			st.State, st.Detail, st.Fix = stateNotConfigured, "no "+path, fix
		}
	case err != nil:
		st.State, st.Detail = host.StateWarning, err.Error()
	case len(c.Accounts) == 0:
		st.State, st.Detail, st.Fix = stateNotConfigured, "no accounts in "+path, fix
	default:
		st.Detail = fmt.Sprintf("%d accounts", len(c.Accounts))
	}
	return st
}

// printNextSteps tells, once at start-up, where to go and what is left to
// set up.
func printNextSteps(w io.Writer, hostURL, home string, sources []sourceState) {
	fmt.Fprintf(w, "\nSteward is running. Open %s in a browser on this computer.\n", hostURL)
	fmt.Fprintf(w, "  Your data lives in %s\n", home)
	var todo []sourceState
	for _, s := range sources {
		if s.State != host.StateOK {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		fmt.Fprintln(w, "  Mail, calendar and contacts are configured.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "  Not set up yet:")
	for _, s := range todo {
		if s.Fix != "" {
			fmt.Fprintf(w, "    %-9s %s\n", s.Name, s.Fix)
		} else {
			fmt.Fprintf(w, "    %-9s %s: %s\n", s.Name, s.State, s.Detail)
		}
	}
	fmt.Fprintln(w)
}

// applySourceStates makes the System page say "not configured" or
// "warning" for a connector whose source is missing or unreadable, rather
// than ok for a running process that has nothing to read.
func applySourceStates(info *host.SystemInfo, sources []sourceState) {
	for _, s := range sources {
		if s.State == host.StateOK {
			continue
		}
		for i := range info.Services {
			// A process that is failing keeps its own, worse, state.
			if info.Services[i].Name == "mcp:"+s.Name && info.Services[i].State == host.StateOK {
				info.Services[i].State = s.State
				info.Services[i].Detail = s.Detail
				if s.Fix != "" {
					info.Services[i].Detail += " — " + s.Fix
				}
			}
		}
	}
}
