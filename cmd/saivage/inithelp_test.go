package main

import (
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/templates"
)

// TestInitHelpListsTemplates: saivage init --help lists every registered
// template with its description, the spec's three among them.
func TestInitHelpListsTemplates(t *testing.T) {
	code, out, errs := runCLI(t, map[string]string{"SAIVAGE_ROOT": t.TempDir()}, "init", "--help")
	if code != 0 {
		t.Fatalf("init --help = %d %q", code, errs)
	}
	_, list, ok := strings.Cut(out+errs, "Templates:\n")
	if !ok {
		t.Fatalf("no template list: %q", out+errs)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			listed[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for _, name := range []string{"classic", "classic-typed", "paad-typed"} {
		if listed[name] == "" {
			t.Errorf("template %s is not listed: %q", name, list)
		}
	}
	for _, tpl := range templates.All() {
		if listed[tpl.Name] != tpl.Description {
			t.Errorf("%s listed as %q, want %q", tpl.Name, listed[tpl.Name], tpl.Description)
		}
	}
}
