package quality_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/quality"
)

// modules returns the analyzers' node_modules (installed by .ci/run).
func modules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SAIVAGE_TEST_QUALITY_MODULES")
	if dir == "" {
		t.Skip("SAIVAGE_TEST_QUALITY_MODULES is not set (.ci/run installs the analyzers)")
	}
	return dir
}

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// smallRepo has one lint error per language and one clean file each.
func smallRepo(t *testing.T) string {
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/main.py":       "import os\n\n\ndef greet(name):\n    return 'hello ' + name\n",
		"app/ok.py":         "def add(a, b):\n    return a + b\n",
		"web/index.js":      "function greet(name) {\n  return 'hello ' + nam;\n}\nexport { greet };\n",
		"web/ok.mjs":        "export const one = 1;\n",
		"web/types.ts":      "export const x: any = 1;\n",
		"node_modules/x.js": "this is not javascript\n",
		".hidden/y.py":      "this is not python\n",
	})
	return root
}

func TestAnalyzersFindTheLintErrors(t *testing.T) {
	// The Node.js child for all three (a native Ruff has its own tests).
	r := quality.Runner{NodeModules: modules(t), RuffWasm: true}
	root := smallRepo(t)
	for _, tc := range []struct {
		analyzer, tool, engine string
		files                  []string
		want                   []string // path:line rule
	}{
		{quality.PythonRuff, "ruff", quality.EngineWasm, []string{"app/main.py", "app/ok.py"}, []string{"app/main.py:1 F401"}},
		{quality.JavaScriptESLint, "eslint", quality.EngineNode, []string{"web/index.js", "web/ok.mjs"}, []string{"web/index.js:1 no-unused-vars", "web/index.js:2 no-undef"}},
		{quality.TypeScriptESLint, "eslint", quality.EngineNode, []string{"web/types.ts"}, []string{"web/types.ts:1 @typescript-eslint/no-explicit-any"}},
	} {
		t.Run(tc.analyzer, func(t *testing.T) {
			rep, inv, err := r.Run(context.Background(), tc.analyzer, root, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(inv.Files, tc.files) || inv.ExitCode != 0 || inv.Argv[0] != "node" || inv.Engine != tc.engine {
				t.Errorf("invocation = %+v", inv)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.Path+":"+strconv.Itoa(f.Line)+" "+f.Rule)
			}
			if rep.Tool != tc.tool || rep.Version == "" || rep.Engine != tc.engine || rep.Config != "bundled" || !slices.Equal(got, tc.want) || rep.Errors() != len(tc.want) {
				t.Errorf("report = %+v (findings %v, want %v)", rep, got, tc.want)
			}
		})
	}
}

func TestProjectESLintConfigIsUsed(t *testing.T) {
	r := quality.Runner{NodeModules: modules(t)}
	root := t.TempDir()
	write(t, root, map[string]string{
		"eslint.config.cjs": "module.exports = [{ files: ['**/*.js'], rules: { semi: 'error' } }];\n",
		"a.js":              "const a = 1\nexport { a };\n",
	})
	rep, _, err := r.Run(context.Background(), quality.JavaScriptESLint, root, []string{"a.js"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Config != "project" || len(rep.Findings) != 1 || rep.Findings[0].Rule != "semi" {
		t.Fatalf("report = %+v", rep)
	}
}

func TestUnavailableAndBadPaths(t *testing.T) {
	if err := (quality.Runner{RuffWasm: true}).Available(quality.PythonRuff); !errors.Is(err, quality.ErrUnavailable) || !strings.Contains(err.Error(), quality.EnvRuff) {
		t.Errorf("no modules: %v", err)
	}
	if err := (quality.Runner{NodeModules: t.TempDir(), RuffWasm: true}).Available(quality.PythonRuff); !errors.Is(err, quality.ErrUnavailable) || !strings.Contains(err.Error(), "@astral-sh/ruff-wasm-nodejs") {
		t.Errorf("empty modules: %v", err)
	}
	if _, err := quality.Files(t.TempDir(), quality.PythonRuff, []string{"../etc"}); err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Errorf("escape: %v", err)
	}
}
