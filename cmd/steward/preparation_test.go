package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/searchprep"
)

// TestServePreparationFirstRun runs `steward serve` with its real child
// connectors as a first run finds them: the local embedding server (Ollama
// behind the gateway's local-embed) is not running, calendar and contacts
// are not set up and mail.yaml is missing or written. Preparation skips
// what is not configured or not reachable, with the reason, and fails
// nothing; the mail connector's advice reaches serve's log once, as one
// readable line.
func TestServePreparationFirstRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs serve with its connectors")
	}
	tests := []struct {
		name       string
		mail       bool   // write mail.yaml over a Maildir with one message
		mailState  string // the mail task's state and detail prefix
		mailDetail string
		advice     int // times the no-accounts advice appears in the log
	}{
		{"without mail.yaml", false, searchprep.Skipped, "not configured: no mail accounts configured: create HOME/mail.yaml", 1},
		{"with a Maildir", true, searchprep.Done, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := llmtest.NewServer(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ollama := "http://" + ln.Addr().String() + "/v1" // nothing listens here
			ln.Close()
			vars := map[string]string{}
			env, _, logs := testEnv(t, vars)
			home := vars["STEWARD_HOME"]
			os.MkdirAll(home, 0o700)
			gw := "providers:\n  up: { base_url: " + up.URL + " }\n  ollama: { base_url: " + ollama + " }\n" +
				"models:\n  tier-5: [ { provider: up, model: scripted } ]\n  local-embed: [ { provider: ollama, model: bge-m3 } ]\n"
			if err := os.WriteFile(filepath.Join(home, "gateway.yaml"), []byte(gw), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.mail {
				maildir := newMaildir(t)
				writeMaildirMessage(t, maildir, "cur", 1, "Quarterly budget review")
				writeMailConfig(t, home, maildir)
			}
			// Registered before serve starts, so it runs once serve has
			// stopped and every child's stderr has been forwarded.
			t.Cleanup(func() {
				log := logs.String()
				if n := strings.Count(log, "no mail accounts configured"); n != tc.advice {
					t.Errorf("the no-accounts advice is in the log %d times, want %d:\n%s", n, tc.advice, log)
				}
				for _, line := range strings.Split(log, "\n") {
					if strings.Contains(line, `\n`) {
						t.Errorf("log line with an escaped newline: %s", line)
					}
				}
			})

			base, token := runServe(t, env, home)
			var prep searchprep.State
			waitLong(t, "preparation finished", func() bool {
				getJSON(t, base+"/system/preparation", token, &prep)
				return prep.State == searchprep.Done
			})
			want := []struct{ name, state, detail string }{
				{"mail", tc.mailState, strings.ReplaceAll(tc.mailDetail, "HOME", home)},
				{searchprep.ModelTask, searchprep.Skipped, "not reachable: MAIL_EMBED_ENDPOINT ("},
				{"calendar", searchprep.Skipped, "not configured: no calendar sources: " + filepath.Join(home, "calendar.yaml") + " does not exist"},
				{"contacts", searchprep.Skipped, "not configured: no contacts sources: " + filepath.Join(home, "contacts.yaml") + " does not exist"},
			}
			if len(prep.Tasks) != len(want) {
				t.Fatalf("tasks %+v", prep.Tasks)
			}
			for i, w := range want {
				tk := prep.Tasks[i]
				if tk.Name != w.name || tk.State != w.state || !strings.HasPrefix(tk.Detail, w.detail) || tk.Error != "" {
					t.Errorf("task %d = %+v, want %s %s %q…", i, tk, w.name, w.state, w.detail)
				}
			}
			for _, tk := range prep.Tasks[2:] {
				if strings.Contains(tk.Detail, "\n") || strings.Contains(tk.Detail, "for example") {
					t.Errorf("%s detail %q carries the configuration example", tk.Name, tk.Detail)
				}
			}
			if d := prep.Tasks[1].Detail; !strings.Contains(d, "ollama/bge-m3") || strings.Contains(d, "\n") {
				t.Errorf("model task detail %q does not name the unreachable provider on one line", d)
			}
		})
	}
}
