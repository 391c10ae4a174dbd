// Package quality runs Saivage's code-quality analyzers (ESLint for
// JavaScript and TypeScript, Ruff for Python) on project files. One packaged
// Node.js child imports the analyzer's library and prints one complete JSON
// report on standard output; it writes no files. The analyzers come from a
// node_modules directory the operator installs (see docs/saivage.md).
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

// ErrUnavailable wraps failures to find Node.js or the analyzer modules.
var ErrUnavailable = errors.New("code-quality analyzer unavailable")

// Runner runs analyzers. The zero value is unusable: NodeModules is required.
type Runner struct {
	// NodeModules is the node_modules directory holding eslint,
	// @eslint/js, typescript-eslint, typescript and
	// @astral-sh/ruff-wasm-nodejs.
	NodeModules string
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
}

// Report is one analyzer run's complete result.
type Report struct {
	Analyzer string    `json:"analyzer"`
	Tool     string    `json:"tool"`
	Version  string    `json:"version"`
	Config   string    `json:"config"` // project or bundled
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
	Argv     []string `json:"argv"`
	Dir      string   `json:"dir"`
	Files    []string `json:"files"`
	ExitCode int      `json:"exit_code"`
	Millis   int64    `json:"duration_ms"`
}

// Available reports why the runner cannot run analyzer, or nil.
func (r Runner) Available(analyzer string) error {
	if !Known(analyzer) {
		return fmt.Errorf("unknown analyzer %q", analyzer)
	}
	if r.NodeModules == "" {
		return fmt.Errorf("%w: no analyzer modules are configured (set SAIVAGE_QUALITY_NODE_MODULES to a node_modules directory with eslint, @eslint/js, typescript-eslint, typescript and @astral-sh/ruff-wasm-nodejs)", ErrUnavailable)
	}
	mod := map[string]string{JavaScriptESLint: "eslint", TypeScriptESLint: "typescript-eslint", PythonRuff: "@astral-sh/ruff-wasm-nodejs"}[analyzer]
	if _, err := os.Stat(filepath.Join(r.NodeModules, mod, "package.json")); err != nil {
		return fmt.Errorf("%w: %s is not installed in %s", ErrUnavailable, mod, r.NodeModules)
	}
	if _, err := exec.LookPath(r.node()); err != nil {
		return fmt.Errorf("%w: %s not found: %v", ErrUnavailable, r.node(), err)
	}
	return nil
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
	if err := r.Available(analyzer); err != nil {
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
	tmp, err := os.MkdirTemp("", "saivage-quality-")
	if err != nil {
		return Report{}, inv, fmt.Errorf("quality child: %w", err)
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "child.cjs")
	if err := os.WriteFile(script, childScript, 0o600); err != nil {
		return Report{}, inv, fmt.Errorf("quality child: %w", err)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inv.Argv = append([]string{r.node(), "child.cjs", analyzer, root}, files...)
	cmd := exec.CommandContext(cctx, r.node(), append([]string{script, analyzer, root}, files...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "NODE_PATH="+r.NodeModules)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = MaxReport, 16<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err = cmd.Run()
	inv.Millis = time.Since(started).Milliseconds()
	inv.ExitCode = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		return Report{}, inv, ctx.Err()
	}
	if err != nil {
		return Report{}, inv, fmt.Errorf("%s: %v: %s", analyzer, err, strings.TrimSpace(stderr.String()))
	}
	if stdout.over {
		return Report{}, inv, fmt.Errorf("%s: report exceeds %d bytes", analyzer, MaxReport)
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Report{}, inv, fmt.Errorf("%s: decode report: %w", analyzer, err)
	}
	if rep.Analyzer != analyzer || rep.Files != len(files) {
		return Report{}, inv, fmt.Errorf("%s: the report describes %s over %d files, not %d", analyzer, rep.Analyzer, rep.Files, len(files))
	}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, inv, nil
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
