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

// nativeRuff returns the native Ruff executable (.ci/run installs it when
// Debian or PyPI serves it).
func nativeRuff(t *testing.T) string {
	t.Helper()
	ruff := os.Getenv("SAIVAGE_TEST_QUALITY_RUFF")
	if ruff == "" {
		t.Skip("SAIVAGE_TEST_QUALITY_RUFF is not set: no native Ruff is installed (.ci/run installs ruff from Debian or PyPI when either serves it)")
	}
	return ruff
}

// ruffRepo has an unused import (F401, fixable) and an undefined name (F821).
func ruffRepo(t *testing.T) string {
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/main.py": "import os\n\n\ndef greet(name):\n    return 'hello ' + nam\n",
		"app/ok.py":   "def add(a, b):\n    return a + b\n",
		"lib/util.py": "import sys\n",
		".venv/x.py":  "this is not python\n",
	})
	return root
}

func findingKeys(rep quality.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Path+":"+strconv.Itoa(f.Line)+":"+strconv.Itoa(f.Column)+" "+f.Rule+" fixable="+strconv.FormatBool(f.Fixable)+" "+f.Severity)
	}
	return out
}

var ruffWant = []string{
	"app/main.py:1:8 F401 fixable=true error",
	"app/main.py:5:23 F821 fixable=false error",
	"lib/util.py:1:8 F401 fixable=true error",
}

func TestNativeRuffFindsTheLintErrors(t *testing.T) {
	ruff := nativeRuff(t)
	root := ruffRepo(t)
	rep, inv, err := quality.Runner{Ruff: ruff}.Run(context.Background(), quality.PythonRuff, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := findingKeys(rep); !slices.Equal(got, ruffWant) {
		t.Errorf("findings = %v, want %v", got, ruffWant)
	}
	if rep.Tool != "ruff" || rep.Engine != quality.EngineNative || rep.Config != "bundled" || rep.Files != 3 || rep.Errors() != 3 ||
		!strings.HasPrefix(rep.Version, "0.") || !strings.Contains(rep.Findings[1].Message, "nam") {
		t.Errorf("report = %+v", rep)
	}
	wantArgv := []string{ruff, "check", "--output-format", "json", "--isolated", "--no-cache", "--no-fix", "--exit-zero", "--", "app/main.py", "app/ok.py", "lib/util.py"}
	if !slices.Equal(inv.Argv, wantArgv) || inv.Engine != quality.EngineNative || inv.ExitCode != 0 || inv.Dir != root {
		t.Errorf("invocation = %+v", inv)
	}
	// Nothing written: no cache, no fix.
	if _, err := os.Stat(filepath.Join(root, ".ruff_cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".ruff_cache: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "app/main.py")); !strings.HasPrefix(string(b), "import os\n") {
		t.Errorf("main.py changed: %q", b)
	}
}

// TestRuffEnginesAgree: the native executable and the WebAssembly build
// report the same findings on the same files.
func TestRuffEnginesAgree(t *testing.T) {
	ruff, mods := nativeRuff(t), modules(t)
	root := ruffRepo(t)
	write(t, root, map[string]string{"app/broken.py": "x = (\n", "app/more.py": "import json, re\nprint(re, undefined)\n"})
	native, _, err := quality.Runner{Ruff: ruff}.Run(context.Background(), quality.PythonRuff, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	wasm, _, err := quality.Runner{NodeModules: mods, RuffWasm: true}.Run(context.Background(), quality.PythonRuff, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if native.Engine != quality.EngineNative || wasm.Engine != quality.EngineWasm {
		t.Fatalf("engines %q and %q", native.Engine, wasm.Engine)
	}
	n, w := findingKeys(native), findingKeys(wasm)
	if !slices.Equal(n, w) || len(n) < 6 {
		t.Errorf("native %v\nwasm   %v", n, w)
	}
	for i := range native.Findings {
		if i < len(wasm.Findings) && native.Findings[i].Message != wasm.Findings[i].Message {
			t.Errorf("message %d: native %q, wasm %q", i, native.Findings[i].Message, wasm.Findings[i].Message)
		}
	}
}

// standIn writes an executable named ruff that prints what dataJSON says
// (with $PWD expanded) and records its arguments in args.txt beside it. It
// checks the parts of the native path a machine without Ruff can run: the
// argument contract, the output mapping and the refusals.
func standIn(t *testing.T, version, output string, exit int) (ruff, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	ruff, argsFile = filepath.Join(dir, "ruff"), filepath.Join(dir, "args.txt")
	script := "#!/bin/sh\nPATH=/usr/bin:/bin\nif [ \"$1\" = --version ]; then echo '" + version + "'; exit 0; fi\n" +
		"printf '%s\\n' \"$@\" > '" + argsFile + "'\n" +
		"cat <<EOF\n" + output + "\nEOF\n" +
		"echo 'stand-in failure' >&2\nexit " + strconv.Itoa(exit) + "\n"
	if err := os.WriteFile(ruff, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return ruff, argsFile
}

// ruff 0.17's --output-format json shape (syntax errors have no code).
const standInOutput = `[
  {"cell": null, "code": "F401", "end_location": {"column": 10, "row": 1}, "filename": "$PWD/app/main.py",
   "fix": {"applicability": "safe", "edits": [{"content": "", "end_location": {"column": 1, "row": 2}, "location": {"column": 1, "row": 1}}], "message": "Remove unused import"},
   "location": {"column": 8, "row": 1}, "message": "os imported but unused", "noqa_row": 1, "url": "https://docs.astral.sh/ruff/rules/unused-import"},
  {"cell": null, "code": null, "end_location": {"column": 1, "row": 2}, "filename": "$PWD/app/broken.py", "fix": null,
   "location": {"column": 1, "row": 2}, "message": "SyntaxError: unexpected EOF while parsing", "noqa_row": null, "url": null}
]`

func TestNativeRuffOutputMapping(t *testing.T) {
	// The project is reached through a symbolic link, as a checkout under a
	// linked home directory is.
	real := t.TempDir()
	write(t, real, map[string]string{"project/app/main.py": "import os\n", "project/app/broken.py": "x = (\n"})
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(home, "project")
	for _, tc := range []struct {
		name, version, output string
		exit                  int
		want                  []string
		err                   string
	}{
		{"mapped", "ruff 0.17.5", standInOutput, 0, []string{"app/broken.py:2:1 invalid-syntax fixable=false error", "app/main.py:1:8 F401 fixable=true error"}, ""},
		{"physical paths under a symlinked root", "ruff 0.17.5", strings.ReplaceAll(standInOutput, "$PWD", "$(pwd -P)"), 0, []string{"app/broken.py:2:1 invalid-syntax fixable=false error", "app/main.py:1:8 F401 fixable=true error"}, ""},
		{"empty", "ruff 0.17.5", "[]", 0, nil, ""},
		{"a file it was not given", "ruff 0.17.5", strings.ReplaceAll(standInOutput, "app/main.py", "other.py"), 0, nil, "which it was not given"},
		{"ruff failed", "ruff 0.17.5", "", 2, nil, "stand-in failure"},
		{"not json", "ruff 0.17.5", "app/main.py:1:8: F401", 0, nil, "decode ruff's JSON output"},
		{"not ruff", "black 24.1", "[]", 0, nil, `not "ruff VERSION"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ruff, argsFile := standIn(t, tc.version, tc.output, tc.exit)
			rep, inv, err := quality.Runner{Ruff: ruff}.Run(context.Background(), quality.PythonRuff, root, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := findingKeys(rep); !slices.Equal(got, tc.want) {
				t.Errorf("findings = %v, want %v", got, tc.want)
			}
			if rep.Engine != quality.EngineNative || rep.Version != "0.17.5" || rep.Files != 2 || len(rep.Findings) != len(tc.want) {
				t.Errorf("report = %+v", rep)
			}
			if len(tc.want) > 0 && rep.Findings[0].Message != "unexpected EOF while parsing" {
				t.Errorf("syntax error message %q", rep.Findings[0].Message)
			}
			args, _ := os.ReadFile(argsFile)
			if want := "check\n--output-format\njson\n--isolated\n--no-cache\n--no-fix\n--exit-zero\n--\napp/broken.py\napp/main.py\n"; string(args) != want {
				t.Errorf("arguments = %q", args)
			}
			if inv.Argv[0] != ruff || inv.Engine != quality.EngineNative || inv.ExitCode != 0 {
				t.Errorf("invocation = %+v", inv)
			}
		})
	}
}

// TestRuffEngineSelection: Runner.Ruff, then SAIVAGE_QUALITY_RUFF, then ruff
// on PATH, then the WebAssembly build; a bad configured executable is refused
// naming where it came from, never replaced by another engine.
func TestRuffEngineSelection(t *testing.T) {
	good, _ := standIn(t, "ruff 0.17.5", "[]", 0)
	plain := filepath.Join(t.TempDir(), "ruff")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write(t, root, map[string]string{"a.py": "x = 1\n"})
	for _, tc := range []struct {
		name, field, env, path string
		wasm                   bool
		engine, err            string
	}{
		{"field", good, "", "", false, quality.EngineNative, ""},
		{"variable", "", good, "", false, quality.EngineNative, ""},
		{"PATH", "", "", filepath.Dir(good), false, quality.EngineNative, ""},
		{"forced wasm without modules", "", good, filepath.Dir(good), true, "", "SAIVAGE_QUALITY_NODE_MODULES"},
		{"nothing", "", "", "", false, "", "no Ruff is installed"},
		{"relative variable", "", "ruff", filepath.Dir(good), false, "", "SAIVAGE_QUALITY_RUFF=ruff: not an absolute path"},
		{"missing variable", "", "/nonexistent/ruff", filepath.Dir(good), false, "", "SAIVAGE_QUALITY_RUFF=/nonexistent/ruff: stat"},
		{"not executable", "", plain, filepath.Dir(good), false, "", "SAIVAGE_QUALITY_RUFF=" + plain + ": not an executable file"},
		{"directory", "", filepath.Dir(plain), filepath.Dir(good), false, "", "SAIVAGE_QUALITY_RUFF=" + filepath.Dir(plain) + ": not an executable file"},
		{"bad field", plain, "", "", false, "", "the configured Ruff executable=" + plain + ": not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(quality.EnvRuff, tc.env)
			t.Setenv("PATH", tc.path) // only the stand-in's directory, or nothing
			r := quality.Runner{Ruff: tc.field, RuffWasm: tc.wasm}
			availErr := r.Available(quality.PythonRuff)
			rep, inv, err := r.Run(context.Background(), quality.PythonRuff, root, nil)
			if tc.err != "" {
				if availErr == nil || err == nil || !strings.Contains(availErr.Error(), tc.err) || err.Error() != availErr.Error() || inv.Argv != nil {
					t.Fatalf("Available: %v; Run: %v, argv %v; want %q", availErr, err, inv.Argv, tc.err)
				}
				return
			}
			if availErr != nil || err != nil {
				t.Fatalf("Available: %v; Run: %v", availErr, err)
			}
			if rep.Engine != tc.engine || inv.Argv[0] != good {
				t.Errorf("engine %q, argv %v", rep.Engine, inv.Argv)
			}
		})
	}
}

// TestWasmRuffFindsTheLintErrors pins the WebAssembly build to the findings
// the native test expects on the same repository.
func TestWasmRuffFindsTheLintErrors(t *testing.T) {
	rep, inv, err := quality.Runner{NodeModules: modules(t), RuffWasm: true}.Run(context.Background(), quality.PythonRuff, ruffRepo(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := findingKeys(rep); !slices.Equal(got, ruffWant) || rep.Engine != quality.EngineWasm || inv.Engine != quality.EngineWasm {
		t.Errorf("findings = %v, want %v (engine %q)", got, ruffWant, rep.Engine)
	}
}
