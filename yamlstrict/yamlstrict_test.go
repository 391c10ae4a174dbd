package yamlstrict_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/yamlstrict"
)

type smtp struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port,omitempty"`
}

type common struct {
	Name string `yaml:"name"`
}

type account struct {
	common  `yaml:",inline"`
	Root    string            `yaml:"root"`
	SMTP    *smtp             `yaml:"smtp,omitempty"`
	Roles   map[string]string `yaml:"roles,omitempty"`
	Fcc     *bool             `yaml:"fcc,omitempty"`
	Every   time.Duration     `yaml:"every,omitempty"`
	Ignored string            `yaml:"-"`
}

type config struct {
	Accounts []account `yaml:"accounts"`
	Rate     float64   `yaml:"rate"`
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		field    string
		msg      string
	}{
		{"unknown top-level field", "acounts: []\n", 1, "acounts", "unknown field (allowed: accounts, rate)"},
		{"unknown nested field lists its siblings", "accounts:\n  - name: a\n    smtp:\n      hots: x\n", 4, "accounts[0].smtp.hots", "unknown field (allowed: host, port)"},
		{"inline fields are allowed fields", "accounts:\n  - nam: a\n", 2, "accounts[0].nam", "unknown field (allowed: name, root, smtp, roles, fcc, every)"},
		{"a field tagged - is not a key", "accounts:\n  - Ignored: x\n", 2, "accounts[0].Ignored", "unknown field"},
		{"number expected", "accounts:\n  - smtp:\n      port: twenty-five\n", 3, "accounts[0].smtp.port", `must be a whole number, got "twenty-five"`},
		{"bool expected", "accounts:\n  - fcc: maybe\n", 2, "accounts[0].fcc", `must be true or false, got "maybe"`},
		{"float expected", "rate: cheap\n", 1, "rate", `must be a number, got "cheap"`},
		{"duration expected", "accounts:\n  - every: often\n", 2, "accounts[0].every", "must be a duration such as 30s or 5m"},
		{"list expected", "accounts:\n  name: a\n", 2, "accounts", "must be a list, got a mapping"},
		{"mapping expected", "accounts:\n  - smtp: mail.example.com\n", 2, "accounts[0].smtp", `must be a mapping of fields (allowed: host, port), got "mail.example.com"`},
		{"map of text expected", "accounts:\n  - roles: [a, b]\n", 2, "accounts[0].roles", "must be a mapping of names to values, got a list"},
		{"text expected", "accounts:\n  - root: {a: 1}\n", 2, "accounts[0].root", "must be text, got a mapping"},
		{"duplicate key", "rate: 1\nrate: 2\n", 2, "rate", "appears twice (first on line 1)"},
		{"syntax error", "rate: 1\naccounts: a: b\n", 2, "", "invalid YAML: mapping values are not allowed"},
		{"tab indentation", "accounts:\n\t- name: a\n", 2, "", "invalid YAML: "},
		{"second document", "rate: 1\n---\nrate: 2\n", 2, "", "a second YAML document"},
		{"top level is not a mapping", "- a\n", 1, "", "must be a mapping of fields (allowed: accounts, rate), got a list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			err := yamlstrict.Decode([]byte(tc.in), &c)
			var ye *yamlstrict.Error
			if !errors.As(err, &ye) {
				t.Fatalf("Decode = %v, want *yamlstrict.Error", err)
			}
			if ye.Line != tc.line || ye.Field != tc.field || !strings.Contains(ye.Msg, tc.msg) {
				t.Errorf("got line %d field %q msg %q; want line %d field %q msg containing %q", ye.Line, ye.Field, ye.Msg, tc.line, tc.field, tc.msg)
			}
			for _, goName := range []string{"yamlstrict_test.", "!!", "[]", "map[", "int64", "float64", "time.Duration", "unmarshal"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("message %q shows Go's %q", err, goName)
				}
			}
		})
	}
}

func TestDecodeValid(t *testing.T) {
	in := "accounts:\n  - name: work\n    root: /m\n    smtp: {host: h, port: 587}\n    roles: {sent: Sent}\n    fcc: false\n    every: 90s\nrate: 0.5\n"
	var c config
	if err := yamlstrict.Decode([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	a := c.Accounts[0]
	if a.Name != "work" || a.Root != "/m" || a.SMTP.Host != "h" || a.SMTP.Port != 587 || a.Roles["sent"] != "Sent" ||
		a.Fcc == nil || *a.Fcc || a.Every != 90*time.Second || c.Rate != 0.5 {
		t.Errorf("decoded %+v", c)
	}
	var empty config
	if err := yamlstrict.Decode([]byte("# nothing yet\n"), &empty); err != nil || empty.Accounts != nil {
		t.Errorf("comment-only file: %v %+v", err, empty)
	}
	if err := yamlstrict.Decode([]byte("accounts:\n"), &empty); err != nil {
		t.Errorf("empty value: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("accounts:\n  - name: a\n    smtp: {host: h, port: 25}\n")
	f.Add("rate: [1\n")
	f.Add("a: &x {b: *x}\n")
	f.Fuzz(func(t *testing.T, in string) {
		var c config
		err := yamlstrict.Decode([]byte(in), &c)
		var ye *yamlstrict.Error
		if err != nil && !errors.As(err, &ye) {
			t.Fatalf("error %v is not a *yamlstrict.Error", err)
		}
	})
}
