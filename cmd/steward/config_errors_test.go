package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/policy"
)

// goTypeName matches what yaml.v3's own messages show: Go types
// ("gateway.Provider", "[]string"), YAML tags and decoder jargon.
var goTypeName = regexp.MustCompile(`\b(gateway|policy|mail|calendar|contacts|mcpbridge)\.[A-Z]\w*|!!\w+|\[\][a-z]|map\[|unmarshal|struct`)

// TestConfigFileErrorsNameFileLineFieldAndAllowed loads a malformed copy of
// every configuration file Steward reads through the loader start-up uses
// and checks the message a user sees: the file, the line, the field, what
// is allowed there, and no Go type names.
func TestConfigFileErrorsNameFileLineFieldAndAllowed(t *testing.T) {
	load := map[string]func(path string) error{
		"gateway.yaml":  func(p string) error { _, _, err := gateway.LoadConfig(p); return err },
		"policy.yaml":   func(p string) error { _, err := policy.LoadRules(p); return err },
		"mail.yaml":     func(p string) error { _, err := mail.LoadConfig(p); return err },
		"calendar.yaml": func(p string) error { _, err := calendar.LoadConfig(p, t.TempDir(), runtime.GOOS); return err },
		"contacts.yaml": func(p string) error { _, err := contacts.LoadConfig(p, t.TempDir(), runtime.GOOS); return err },
		"mcp.json":      func(p string) error { _, err := mcpbridge.LoadConfig(p); return err },
	}
	tests := []struct {
		name, file, content string
		want                []string
	}{
		{"gateway misspelt provider field", "gateway.yaml",
			"providers:\n  deepseek:\n    base_ur: https://api.deepseek.com/v1\nmodels: {}\n",
			[]string{"line 3", "providers.deepseek.base_ur", "unknown field (allowed: base_url, api_key_env, headers, stream)"}},
		{"gateway candidate as text", "gateway.yaml",
			"providers:\n  p: {base_url: 'http://127.0.0.1:1/v1'}\nmodels:\n  tier-5: p/model\n",
			[]string{"line 4", "models.tier-5", "must be a list, got \"p/model\""}},
		{"gateway rate not a number", "gateway.yaml",
			"providers:\n  p: {base_url: 'http://127.0.0.1:1/v1'}\nrates:\n  p/m:\n    input: cheap\n",
			[]string{"line 5", "rates.p/m.input", "must be a number, got \"cheap\""}},
		{"policy unknown section", "policy.yaml",
			"allow: [a]\ndenny: [b]\n",
			[]string{"line 2", "denny", "unknown field (allowed: allow, gate, deny, deny_prefixes)"}},
		{"policy rule list as text", "policy.yaml",
			"gate: mcp__mail__send_mail\n",
			[]string{"line 1", "gate", "must be a list"}},
		{"mail unknown smtp field", "mail.yaml",
			"accounts:\n  - name: work\n    kind: maildir\n    root: /m\n    smtp:\n      host: smtp.example.com\n      pasword_env: X\n",
			[]string{"line 7", "accounts[0].smtp.pasword_env", "unknown field (allowed: host, port, security, username, password_env"}},
		{"mail port not a number", "mail.yaml",
			"accounts:\n  - name: work\n    smtp:\n      host: h\n      port: submission\n",
			[]string{"line 5", "accounts[0].smtp.port", "must be a whole number, got \"submission\""}},
		{"mail syntax error", "mail.yaml",
			"accounts:\n  - name: work\n    root: /m: x\n",
			[]string{"line 3", "invalid YAML"}},
		{"calendar unknown source field", "calendar.yaml",
			"sources:\n  - name: me\n    kind: ics\n    file: /c.ics\n",
			[]string{"line 4", "sources[0].file", "unknown field (allowed: name, kind, path, account)"}},
		{"calendar unknown top-level field", "calendar.yaml",
			"timezone: Europe/Paris\nsource:\n  - name: me\n",
			[]string{"line 2", "source", "unknown field (allowed: timezone, embed, sources)"}},
		{"contacts sources as mapping", "contacts.yaml",
			"sources:\n  name: me\n",
			[]string{"line 2", "sources", "must be a list, got a mapping"}},
		{"contacts unknown field", "contacts.yaml",
			"embed: off\nsources:\n  - name: me\n    kind: vcard\n    paht: /c\n",
			[]string{"line 5", "sources[0].paht", "unknown field (allowed: name, kind, path)"}},
		{"mcp.json unknown server field", "mcp.json",
			"{\"mcpServers\": {\n  \"files\": {\n    \"comand\": \"x\"}}}",
			[]string{"line 3", `server "files"`, `field "comand"`, "unknown field (allowed: command, args, env, cwd, url, headers, type, disabled)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			err := load[tc.file](path)
			if err == nil {
				t.Fatalf("%s loaded without error", tc.file)
			}
			msg := err.Error()
			for _, w := range append([]string{path}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
			if m := goTypeName.FindString(msg); m != "" {
				t.Errorf("message %q shows Go's %q", msg, m)
			}
		})
	}
}
