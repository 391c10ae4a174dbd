package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/quality"
)

// ruffStandIn writes an executable named ruff that answers like ruff 0.17
// (--version, then one F401 in app/main.py as --output-format json), for the
// row that runs where no native Ruff is installed.
func ruffStandIn(t *testing.T) string {
	t.Helper()
	ruff := filepath.Join(t.TempDir(), "ruff")
	script := `#!/bin/sh
if [ "$1" = --version ]; then echo 'ruff 0.17.5'; exit 0; fi
printf '[{"cell": null, "code": "F401", "filename": "%s/app/main.py", "fix": {"applicability": "safe", "edits": [], "message": "Remove unused import"}, "location": {"column": 8, "row": 1}, "end_location": {"column": 10, "row": 1}, "message": "os imported but unused", "noqa_row": 1, "url": null}]' "$PWD"
`
	if err := os.WriteFile(ruff, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return ruff
}

// TestCodeQualityPythonRuffNativeEngine: code_quality.python_ruff through
// the native Ruff executable publishes its invocation and report artifacts
// (engine native, the exact ruff argv) and routes on the lint error; a bad
// SAIVAGE_QUALITY_RUFF fails the node with a reason naming the variable.
func TestCodeQualityPythonRuffNativeEngine(t *testing.T) {
	for _, tc := range []struct {
		name string
		ruff func(t *testing.T) string // the executable; "" leaves Runner.Ruff empty
		env  string                    // SAIVAGE_QUALITY_RUFF
	}{
		{"installed ruff", func(t *testing.T) string {
			ruff := os.Getenv("SAIVAGE_TEST_QUALITY_RUFF")
			if ruff == "" {
				t.Skip("SAIVAGE_TEST_QUALITY_RUFF is not set: no native Ruff is installed (.ci/run installs ruff from Debian or PyPI when either serves it)")
			}
			return ruff
		}, ""},
		{"stand-in ruff", ruffStandIn, ""},
		{"bad SAIVAGE_QUALITY_RUFF", func(*testing.T) string { return "" }, "/nonexistent/ruff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ruff := tc.ruff(t)
			t.Setenv(quality.EnvRuff, tc.env)
			e := runQualityNode(t, quality.Runner{Ruff: ruff}, "code_quality.python_ruff", "app/main.py", "import os\n\n\ndef hello():\n    return 'hi'\n")
			if tc.env != "" {
				if st := e.status("project"); st != "failed" {
					t.Fatalf("root is %s", st)
				}
				fin := e.events("card_finished")
				if len(fin) != 1 || !strings.Contains(fin[0].Data["reason"].(string), "SAIVAGE_QUALITY_RUFF=/nonexistent/ruff") {
					t.Errorf("card_finished = %+v", fin)
				}
				return
			}
			// One lint error: errors != 0 takes the otherwise case.
			if st := e.status("project"); st != "blocked" {
				t.Fatalf("root is %s", st)
			}
			report, v := e.record("project", "report")
			if v != 1 || !strings.Contains(report, "app/main.py:1:8 error F401") || !strings.Contains(report, "1 errors") {
				t.Errorf("report = v%d %q", v, report)
			}
			fin := e.events("action_finish")
			dir := filepath.Join(e.dir, ".saivage", "work", "cards", "project", "actions", fin[0].Data["invocation"].(string))
			rep, err := os.ReadFile(filepath.Join(dir, "report.json"))
			if err != nil || !strings.Contains(string(rep), `"rule": "F401"`) || !strings.Contains(string(rep), `"engine": "native"`) || !strings.Contains(string(rep), `"fixable": true`) {
				t.Errorf("report.json = %s, %v", rep, err)
			}
			inv, err := os.ReadFile(filepath.Join(dir, "invocation.json"))
			for _, want := range []string{`"engine": "native"`, `"exit_code": 0`, `"` + ruff + `"`, `"--isolated"`, `"--no-cache"`, `"app/main.py"`} {
				if err != nil || !strings.Contains(string(inv), want) {
					t.Errorf("invocation.json lacks %s: %s, %v", want, inv, err)
				}
			}
		})
	}
}
