package tools_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/tools"
)

func TestQualityToolRunsNativeRuff(t *testing.T) {
	ruff := os.Getenv("SAIVAGE_TEST_QUALITY_RUFF")
	if ruff == "" {
		t.Skip("SAIVAGE_TEST_QUALITY_RUFF is not set: no native Ruff is installed (.ci/run installs ruff from Debian or PyPI when either serves it)")
	}
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	f.env.Quality = quality.Runner{Ruff: ruff}
	f.writeFile("src/app.py", "import sys\n")
	out := f.ok("code_quality_python_ruff", map[string]any{"paths": []string{"src"}})
	for _, want := range []string{`"rule": "F401"`, `"path": "src/app.py"`, `"line": 1`, `"column": 8`, `"engine": "native"`, `"fixable": true`} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %s: %s", want, out)
		}
	}
}

func TestQualityToolRefusesABadRuffVariable(t *testing.T) {
	t.Setenv(quality.EnvRuff, "relative/ruff")
	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	f.env.Quality = quality.Runner{}
	f.writeFile("src/app.py", "import sys\n")
	f.fails("code_quality_python_ruff", map[string]any{"paths": []string{"src"}}, "code_quality_python_ruff is unavailable: SAIVAGE_QUALITY_RUFF=relative/ruff: not an absolute path")
}
