// Package quality runs Saivage's code-quality analyzers (ESLint for
// JavaScript and TypeScript, Ruff for Python) on project files. ESLint runs in
// one packaged Node.js child that imports its library and prints one complete
// JSON report on standard output. Ruff runs as the native executable when one
// is configured or on PATH (ruff check --output-format json), else as its
// WebAssembly build in the same Node.js child. No engine writes files. The
// analyzers come from what the operator installs (see docs/saivage.md).
package quality

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

//go:embed child.cjs
var childScript []byte

// Analyzer identities, as the quality tools and actions name them.
const (
	JavaScriptESLint = "javascript_eslint"
	TypeScriptESLint = "typescript_eslint"
	PythonRuff       = "python_ruff"
)

// Limits.
const (
	// MaxFiles bounds the files of one run.
	MaxFiles = 2000
	// MaxReport bounds the child's JSON report.
	MaxReport = 8 << 20
	// DefaultTimeout bounds one run.
	DefaultTimeout = 5 * time.Minute
)

var extensions = map[string][]string{
	JavaScriptESLint: {".js", ".mjs", ".cjs", ".jsx"},
	TypeScriptESLint: {".ts", ".tsx", ".mts", ".cts"},
	PythonRuff:       {".py", ".pyi"},
}

// Known reports whether analyzer is one of the three analyzers.
func Known(analyzer string) bool { _, ok := extensions[analyzer]; return ok }

// Engines, as reports and invocations name them.
const (
	// EngineNode is ESLint's library in the Node.js child.
	EngineNode = "node"
	// EngineNative is the native Ruff executable.
	EngineNative = "native"
	// EngineWasm is Ruff's WebAssembly build in the Node.js child.
	EngineWasm = "wasm"
)

// EnvRuff names the native Ruff executable (an absolute path) when Runner.Ruff
// is empty. A value that is not an executable file is refused, never replaced
// by another engine.
const EnvRuff = "SAIVAGE_QUALITY_RUFF"

// ErrUnavailable wraps failures to find Node.js or the analyzer modules.
var ErrUnavailable = errors.New("code-quality analyzer unavailable")

// Runner runs analyzers. ESLint needs NodeModules; Ruff needs a native
// executable (Ruff, EnvRuff or "ruff" on PATH) or NodeModules.
type Runner struct {
	// NodeModules is the node_modules directory holding eslint,
	// @eslint/js, typescript-eslint, typescript and
	// @astral-sh/ruff-wasm-nodejs.
	NodeModules string
	// Ruff is the native Ruff executable (an absolute path). Empty: the
	// EnvRuff variable, then "ruff" on PATH, then the WebAssembly build.
	Ruff string
	// RuffWasm runs Ruff's WebAssembly build even when a native Ruff exists.
	RuffWasm bool
	// Node is the node executable (default: "node" on PATH).
	Node string
	// Timeout bounds one run (default DefaultTimeout).
	Timeout time.Duration
}

// Finding is one reported problem.
type Finding struct {
	Path     string `json:"path"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	// Fixable says the analyzer offers a fix (ESLint's fix, Ruff's fix of
	// any applicability).
	Fixable bool `json:"fixable,omitempty"`
}

// Report is one analyzer run's complete result.
type Report struct {
	Analyzer string `json:"analyzer"`
	Tool     string `json:"tool"`
	Version  string `json:"version"`
	Config   string `json:"config"` // project or bundled
	// Engine is how the analyzer ran (EngineNode, EngineNative, EngineWasm).
	Engine   string    `json:"engine,omitempty"`
	Files    int       `json:"files"`
	Findings []Finding `json:"findings"`
}

// Errors counts error-severity findings.
func (r Report) Errors() int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == "error" {
			n++
		}
	}
	return n
}

// Invocation is the exact command a run executed, for the invocation
// artifact.
type Invocation struct {
	Analyzer string   `json:"analyzer"`
	Engine   string   `json:"engine,omitempty"`
	Argv     []string `json:"argv"`
	Dir      string   `json:"dir"`
	Files    []string `json:"files"`
	ExitCode int      `json:"exit_code"`
	Millis   int64    `json:"duration_ms"`
}

// Available reports why the runner cannot run analyzer, or nil.
func (r Runner) Available(analyzer string) error {
	_, err := r.engine(analyzer)
	return err
}

// engine resolves how analyzer runs: the native Ruff executable to run, or
// "" for the Node.js child; an error says why it cannot run.
func (r Runner) engine(analyzer string) (native string, err error) {
	if !Known(analyzer) {
		return "", fmt.Errorf("unknown analyzer %q", analyzer)
	}
	if analyzer == PythonRuff {
		native, err := r.nativeRuff()
		if err != nil || native != "" {
			return native, err
		}
	}
	if r.NodeModules == "" {
		if analyzer == PythonRuff {
			return "", fmt.Errorf("%w: no Ruff is installed (install ruff on PATH, set %s to its executable, or set SAIVAGE_QUALITY_NODE_MODULES to a node_modules directory with @astral-sh/ruff-wasm-nodejs)", ErrUnavailable, EnvRuff)
		}
		return "", fmt.Errorf("%w: no analyzer modules are configured (set SAIVAGE_QUALITY_NODE_MODULES to a node_modules directory with eslint, @eslint/js, typescript-eslint, typescript and @astral-sh/ruff-wasm-nodejs)", ErrUnavailable)
	}
	mod := map[string]string{JavaScriptESLint: "eslint", TypeScriptESLint: "typescript-eslint", PythonRuff: "@astral-sh/ruff-wasm-nodejs"}[analyzer]
	if _, err := os.Stat(filepath.Join(r.NodeModules, mod, "package.json")); err != nil {
		return "", fmt.Errorf("%w: %s is not installed in %s", ErrUnavailable, mod, r.NodeModules)
	}
	if _, err := exec.LookPath(r.node()); err != nil {
		return "", fmt.Errorf("%w: %s not found: %v", ErrUnavailable, r.node(), err)
	}
	return "", nil
}

// nativeRuff returns the native Ruff executable to run, "" for the
// WebAssembly build, or why the configured one is refused.
func (r Runner) nativeRuff() (string, error) {
	if r.RuffWasm {
		return "", nil
	}
	path, source := r.Ruff, "the configured Ruff executable"
	if path == "" {
		if v, ok := os.LookupEnv(EnvRuff); ok && v != "" {
			path, source = v, EnvRuff
		}
	}
	if path == "" {
		found, err := exec.LookPath("ruff")
		if err != nil {
			return "", nil // no native Ruff: the WebAssembly build
		}
		return found, nil
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%s=%s: not an absolute path", source, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", source, path, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s=%s: not an executable file", source, path)
	}
	return path, nil
}

func (r Runner) node() string {
	if r.Node != "" {
		return r.Node
	}
	return "node"
}

// Files admits paths (files or directories, relative to root or absolute
// inside it) and returns the analyzer's files below them, relative and
// sorted. Hidden directories and node_modules are skipped.
func Files(root, analyzer string, paths []string) ([]string, error) {
	exts := extensions[analyzer]
	if len(paths) == 0 {
		paths = []string{"."}
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		abs := p
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(root, p)
		}
		abs = filepath.Clean(abs)
		if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("%s is outside the project", p)
		}
		err := filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != abs && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !slices.Contains(exts, filepath.Ext(path)) {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if !seen[rel] {
				seen[rel] = true
				out = append(out, filepath.ToSlash(rel))
			}
			if len(out) > MaxFiles {
				return fmt.Errorf("more than %d files; name fewer paths", MaxFiles)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("collect %s files under %s: %w", analyzer, p, err)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Run analyses paths below root. Problems in the analysed code are findings,
// not errors; an error means the analyzer could not run.
func (r Runner) Run(ctx context.Context, analyzer, root string, paths []string) (Report, Invocation, error) {
	inv := Invocation{Analyzer: analyzer, Dir: root, ExitCode: -1}
	native, err := r.engine(analyzer)
	if err != nil {
		return Report{}, inv, err
	}
	files, err := Files(root, analyzer, paths)
	if err != nil {
		return Report{}, inv, err
	}
	inv.Files = files
	if len(files) == 0 {
		return Report{Analyzer: analyzer, Config: "none", Findings: []Finding{}}, inv, nil
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rep Report
	if native != "" {
		rep, err = r.runNativeRuff(cctx, ctx, native, root, files, &inv)
	} else {
		rep, err = r.runChild(cctx, ctx, analyzer, root, files, &inv)
	}
	if err != nil {
		return Report{}, inv, err
	}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	// One order for every engine: file, line, column, rule.
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Rule < b.Rule
	})
	return rep, inv, nil
}

// runChild runs the analyzer in the packaged Node.js child.
func (r Runner) runChild(cctx, ctx context.Context, analyzer, root string, files []string, inv *Invocation) (Report, error) {
	inv.Engine = EngineNode
	if analyzer == PythonRuff {
		inv.Engine = EngineWasm
	}
	tmp, err := os.MkdirTemp("", "saivage-quality-")
	if err != nil {
		return Report{}, fmt.Errorf("quality child: %w", err)
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "child.cjs")
	if err := os.WriteFile(script, childScript, 0o600); err != nil {
		return Report{}, fmt.Errorf("quality child: %w", err)
	}
	inv.Argv = append([]string{r.node(), "child.cjs", analyzer, root}, files...)
	stdout, err := run(cctx, ctx, inv, root, append(os.Environ(), "NODE_PATH="+r.NodeModules), r.node(), append([]string{script, analyzer, root}, files...))
	if err != nil {
		return Report{}, err
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("%s: decode report: %w", analyzer, err)
	}
	if rep.Analyzer != analyzer || rep.Files != len(files) {
		return Report{}, fmt.Errorf("%s: the report describes %s over %d files, not %d", analyzer, rep.Analyzer, rep.Files, len(files))
	}
	rep.Engine = inv.Engine
	return rep, nil
}

// ruffCheckArgs are the native Ruff arguments before the files. --isolated
// ignores project configuration, as the WebAssembly build's default
// settings do, so both engines report the same findings; --no-cache and
// --no-fix keep the run from writing anything; --exit-zero makes a non-zero
// exit mean that Ruff itself failed.
var ruffCheckArgs = []string{"check", "--output-format", "json", "--isolated", "--no-cache", "--no-fix", "--exit-zero", "--"}

// nativeDiagnostic is the part of one `ruff check --output-format json`
// entry that findings carry.
type nativeDiagnostic struct {
	Code     *string `json:"code"`
	Filename string  `json:"filename"`
	Location struct {
		Row    int `json:"row"`
		Column int `json:"column"`
	} `json:"location"`
	Message string          `json:"message"`
	Fix     json.RawMessage `json:"fix"`
}

// runNativeRuff runs the native Ruff executable on files.
func (r Runner) runNativeRuff(cctx, ctx context.Context, ruff, root string, files []string, inv *Invocation) (Report, error) {
	inv.Engine = EngineNative
	version, err := ruffVersion(cctx, ruff)
	if err != nil {
		if ctx.Err() != nil {
			return Report{}, ctx.Err()
		}
		return Report{}, err
	}
	args := append(slices.Clone(ruffCheckArgs), files...)
	inv.Argv = append([]string{ruff}, args...)
	stdout, err := run(cctx, ctx, inv, root, os.Environ(), ruff, args)
	if err != nil {
		return Report{}, err
	}
	var diags []nativeDiagnostic
	if err := json.Unmarshal(stdout, &diags); err != nil {
		return Report{}, fmt.Errorf("%s: decode ruff's JSON output: %w", PythonRuff, err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", PythonRuff, err)
	}
	// Ruff names files under its working directory as the kernel reports
	// it, with symbolic links resolved.
	roots := []string{absRoot}
	if real, err := filepath.EvalSymlinks(absRoot); err == nil && real != absRoot {
		roots = append(roots, real)
	}
	admitted := map[string]bool{}
	for _, f := range files {
		admitted[f] = true
	}
	relative := func(name string) (string, bool) {
		for _, r := range roots {
			if rel, err := filepath.Rel(r, name); err == nil && admitted[filepath.ToSlash(rel)] {
				return filepath.ToSlash(rel), true
			}
		}
		return "", false
	}
	rep := Report{Analyzer: PythonRuff, Tool: "ruff", Version: version, Config: "bundled", Engine: EngineNative, Files: len(files), Findings: make([]Finding, 0, len(diags))}
	for _, d := range diags {
		rel, ok := relative(d.Filename)
		if !ok {
			return Report{}, fmt.Errorf("%s: ruff reported %q, which it was not given", PythonRuff, d.Filename)
		}
		f := Finding{Path: rel, Line: d.Location.Row, Column: d.Location.Column, Severity: "error", Message: d.Message,
			Fixable: len(d.Fix) > 0 && string(d.Fix) != "null"}
		if d.Code != nil {
			f.Rule = *d.Code
		} else {
			// A syntax error has no rule code; the WebAssembly build names it so.
			f.Rule = "invalid-syntax"
			f.Message = strings.TrimPrefix(f.Message, "SyntaxError: ")
		}
		rep.Findings = append(rep.Findings, f)
	}
	return rep, nil
}

// ruffVersion asks the executable for its version ("ruff 0.17.5").
func ruffVersion(ctx context.Context, ruff string) (string, error) {
	cmd := exec.CommandContext(ctx, ruff, "--version")
	var out, stderr limitedBuffer
	out.max, stderr.max = 4<<10, 4<<10
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %s --version: %v: %s", PythonRuff, ruff, err, strings.TrimSpace(stderr.String()))
	}
	name, version, ok := strings.Cut(strings.TrimSpace(out.String()), " ")
	if !ok || name != "ruff" || version == "" {
		return "", fmt.Errorf("%s: %s --version printed %q, not \"ruff VERSION\"", PythonRuff, ruff, out.String())
	}
	return version, nil
}

// run executes one analyzer process in dir with the capture bounds and
// records its exit code and duration in inv. It returns the complete
// standard output.
func run(cctx, ctx context.Context, inv *Invocation, dir string, env []string, name string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = MaxReport, 16<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	inv.Millis = time.Since(started).Milliseconds()
	inv.ExitCode = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", inv.Analyzer, err, strings.TrimSpace(stderr.String()))
	}
	if stdout.over {
		return nil, fmt.Errorf("%s: report exceeds %d bytes", inv.Analyzer, MaxReport)
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps at most max bytes and remembers overflow.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
