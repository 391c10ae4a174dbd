package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/steward/pathguard"
)

// Runner defaults and caps.
const (
	DefaultTimeout   = 15 * time.Second
	MaxTimeout       = 60 * time.Second
	DefaultMaxOutput = 64 << 10
	DefaultMemory    = 1 << 30
	maxGlobMatches   = 1000
	maxVerifyEntries = 20_000
)

// Options configures a Runner.
type Options struct {
	// Guard is the shared sensitive-path policy (required).
	Guard *pathguard.Guard
	// Home is the user's home directory: "~" and the default working
	// directory.
	Home string
	// WriteRoots are the directories run_write may change (default: Home
	// and the system temporary directory); a root itself is never a target.
	WriteRoots []string
	// Timeout bounds one command (default 15 s, at most 60 s).
	Timeout time.Duration
	// MaxOutput bounds captured stdout and stderr, each (default 64 KiB).
	MaxOutput int
	// MemoryLimit is each process's address-space limit where the platform
	// supports it (Linux), default 1 GiB.
	MemoryLimit uint64
	// SearchPath are the directories binaries are resolved from; the user's
	// PATH is not used, so a planted "cat" earlier in it is never run.
	SearchPath []string
}

// Runner executes parsed pipelines without a shell.
type Runner struct {
	opts Options
}

// NewRunner returns a Runner with defaults filled in.
func NewRunner(opts Options) *Runner {
	if opts.Guard == nil {
		opts.Guard = pathguard.New(pathguard.Options{Home: opts.Home})
	}
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.WriteRoots == nil {
		opts.WriteRoots = []string{opts.Home, os.TempDir()}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	opts.Timeout = min(opts.Timeout, MaxTimeout)
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MemoryLimit == 0 {
		opts.MemoryLimit = DefaultMemory
	}
	if opts.SearchPath == nil {
		opts.SearchPath = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"}
		if runtime.GOOS == "darwin" {
			opts.SearchPath = append([]string{"/opt/homebrew/bin"}, opts.SearchPath...)
		}
	}
	return &Runner{opts: opts}
}

// StageResult is how one command of the pipeline ended.
type StageResult struct {
	Argv     []string `json:"argv"`
	ExitCode int      `json:"exitCode"`
}

// Result is what a command produced. A non-zero exit is a result, not an
// error.
type Result struct {
	Command    string        `json:"command"`
	Directory  string        `json:"directory"`
	ExitCode   int           `json:"exitCode"`
	Stdout     string        `json:"stdout"`
	Stderr     string        `json:"stderr,omitempty"`
	Truncated  bool          `json:"truncated,omitempty"`
	TimedOut   bool          `json:"timedOut,omitempty"`
	DurationMS int64         `json:"durationMs"`
	Stages     []StageResult `json:"stages"`
}

// RunReadOnly runs a pipeline of read-only programs in dir (default: home).
func (r *Runner) RunReadOnly(ctx context.Context, line, dir string) (*Result, error) {
	return r.run(ctx, line, dir, false)
}

// RunWrite runs a pipeline that may include file-mutating programs, whose
// path operands must lie inside the write roots. The host gates this call
// behind the user's approval; the checks here hold regardless.
func (r *Runner) RunWrite(ctx context.Context, line, dir string) (*Result, error) {
	return r.run(ctx, line, dir, true)
}

// Prepare parses and validates line for the given mode and returns the
// argv of each stage as it would run, without running anything.
func (r *Runner) Prepare(line, dir string, write bool) ([][]string, string, error) {
	dir, err := r.workDir(dir)
	if err != nil {
		return nil, "", err
	}
	p, err := Parse(line)
	if err != nil {
		return nil, "", err
	}
	var argvs [][]string
	hasWrite := false
	for _, st := range p.Stages {
		argv, w, err := r.prepareStage(st, dir, write)
		if err != nil {
			return nil, "", err
		}
		hasWrite = hasWrite || w
		argvs = append(argvs, argv)
	}
	if write && !hasWrite {
		return nil, "", refuse("run_write is for file-changing commands (%s); use run_readonly for this one", strings.Join(WritePrograms(), ", "))
	}
	return argvs, dir, nil
}

func (r *Runner) workDir(dir string) (string, error) {
	if dir == "" {
		dir = r.opts.Home
	}
	if !filepath.IsAbs(dir) {
		return "", refuse("the working directory %q must be an absolute path", dir)
	}
	canon, err := r.opts.Guard.Check(dir)
	if err != nil {
		return "", refuse("%v", err)
	}
	info, err := os.Stat(canon)
	if err != nil || !info.IsDir() {
		return "", refuse("the working directory %s does not exist or is not a directory", dir)
	}
	return canon, nil
}

func (r *Runner) prepareStage(st Stage, dir string, write bool) ([]string, bool, error) {
	name := st.Words[0].Text
	if strings.ContainsRune(name, '/') {
		return nil, false, refuse("give the program name (%s), not a path", filepath.Base(name))
	}
	prog, ok := programs[name]
	if !ok {
		return nil, false, refuse("%q is not an allowed program; allowed: %s", name, strings.Join(ReadOnlyPrograms(), ", "))
	}
	if prog.write && !write {
		return nil, false, refuse("%s changes files; use run_write, which asks for approval", name)
	}
	argv := []string{name}
	for _, w := range st.Words[1:] {
		expanded, err := r.expand(w, dir)
		if err != nil {
			return nil, false, err
		}
		argv = append(argv, expanded...)
	}
	if len(argv) > MaxArgs+1 {
		return nil, false, refuse("the command expands to more than %d arguments", MaxArgs)
	}
	operands, err := checkOptions(name, prog, argv[1:])
	if err != nil {
		return nil, false, err
	}
	for _, a := range argv[1:] {
		if err := r.checkPathArg(a, dir); err != nil {
			return nil, false, err
		}
	}
	if name == "diff" { // diff of two directories reads every file directly inside them
		for _, o := range operands {
			if !filepath.IsAbs(o) {
				o = filepath.Join(dir, o)
			}
			if isDir(o) {
				return nil, false, refuse("diff on directories reads every file in them; name the files to compare")
			}
		}
	}
	if prog.write {
		if err := r.checkWriteTargets(name, prog, argv[1:], operands, dir); err != nil {
			return nil, false, err
		}
	}
	bin, err := r.lookPath(name)
	if err != nil {
		return nil, false, err
	}
	argv[0] = bin
	return argv, prog.write, nil
}

// expand resolves a leading ~ and unquoted globs. Globs follow shell rules
// for hidden files (a leading "." must be explicit); a glob that matches
// nothing is an error rather than a literal, and a glob matching a
// protected path refuses the command.
func (r *Runner) expand(w Word, dir string) ([]string, error) {
	text, pattern := w.Text, w.Pattern
	if w.Tilde {
		text = r.opts.Home + strings.TrimPrefix(text, "~")
		if pattern != "" {
			pattern = escapeGlob(r.opts.Home) + strings.TrimPrefix(pattern, "~")
		}
	}
	if pattern == "" {
		return []string{text}, nil
	}
	abs := pattern
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(escapeGlob(dir), pattern)
	}
	matches, err := filepath.Glob(abs)
	if err != nil {
		return nil, refuse("bad glob pattern %q: %v", w.Text, err)
	}
	var out []string
	for _, m := range matches {
		if hiddenByGlob(abs, m) {
			continue
		}
		if err := r.opts.Guard.Match(m); err != nil {
			return nil, refuse("the glob %q reaches a protected path: %v", w.Text, err)
		}
		if !filepath.IsAbs(pattern) && !w.Tilde {
			if rel, err := filepath.Rel(dir, m); err == nil {
				m = rel
			}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, refuse("no files match %q", w.Text)
	}
	if len(out) > maxGlobMatches {
		return nil, refuse("the glob %q matches more than %d files", w.Text, maxGlobMatches)
	}
	slices.Sort(out)
	return out, nil
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hiddenByGlob reports whether match has a dot-file component matched by a
// wildcard pattern component (shells do not let * match a leading dot).
func hiddenByGlob(pattern, match string) bool {
	pp := strings.Split(pattern, string(filepath.Separator))
	mp := strings.Split(match, string(filepath.Separator))
	if len(pp) != len(mp) {
		return false
	}
	for i := range pp {
		if strings.HasPrefix(mp[i], ".") && !strings.HasPrefix(pp[i], ".") && !strings.HasPrefix(pp[i], `\.`) {
			return true
		}
	}
	return false
}

// checkPathArg guard-checks anything in an argument that names a path: the
// argument itself, or the value of --opt=VALUE and -fVALUE forms, when it
// contains a slash or names an existing entry of dir. Other words cannot
// make a program open a file.
func (r *Runner) checkPathArg(a, dir string) error {
	candidates := []string{a}
	if strings.HasPrefix(a, "-") && len(a) > 1 {
		candidates = nil
		if _, v, ok := strings.Cut(a, "="); ok {
			candidates = append(candidates, v)
		} else if i := strings.IndexAny(a, "/~"); i > 1 {
			candidates = append(candidates, a[i:])
		}
	}
	for _, c := range candidates {
		if c == "" || c == "-" {
			continue
		}
		p := c
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if !strings.ContainsRune(c, '/') {
			if _, err := os.Lstat(p); err != nil {
				continue // not a path: a pattern or a word
			}
		}
		if _, err := r.opts.Guard.Check(p); err != nil {
			var be *pathguard.BlockedError
			if errors.As(err, &be) {
				return refuse("%s is a protected location: %s", c, be.Reason)
			}
			if !errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "dangling") {
				return refuse("cannot check path %s: %v", c, err)
			}
		}
	}
	return nil
}

// checkWriteTargets requires every path operand of a file-mutating program
// to lie strictly inside a write root and, for recursive operations, every
// directory operand to be free of protected paths.
func (r *Runner) checkWriteTargets(name string, prog program, args, operands []string, dir string) error {
	targets := operands
	if name == "chmod" && len(targets) > 0 {
		targets = targets[1:] // the mode
	}
	for i, a := range args {
		if (a == "-t" || a == "--target-directory") && i+1 < len(args) {
			targets = append(targets, args[i+1])
		} else if v, ok := strings.CutPrefix(a, "--target-directory="); ok {
			targets = append(targets, v)
		}
	}
	if len(targets) == 0 && name != "tee" {
		return refuse("%s needs at least one path", name)
	}
	recursive := isRecursive(prog, args)
	for _, t := range targets {
		p := t
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		canon, err := r.opts.Guard.Check(p)
		if err != nil {
			return refuse("%v", err)
		}
		if !r.insideWriteRoot(canon) {
			return refuse("%s may only change paths inside %s (not the folders themselves); %s is outside", name, strings.Join(r.opts.WriteRoots, " or "), t)
		}
		if recursive || name == "mv" {
			if err := r.verifyTree(canon); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Runner) insideWriteRoot(canon string) bool {
	for _, root := range r.opts.WriteRoots {
		for _, v := range []string{root, resolved(root)} {
			if v != "" && canon != v && strings.HasPrefix(canon, v+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}

func resolved(p string) string {
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return c
}

// verifyTree refuses when a directory holds a protected path below it; a
// tree too large to verify is refused too.
func (r *Runner) verifyTree(root string) error {
	info, err := os.Lstat(root)
	if err != nil || !info.IsDir() {
		return nil
	}
	n := 0
	errFound := errors.New("found")
	var blocked error
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxVerifyEntries {
			return refuse("%s holds more than %d entries; too many to verify that no protected file is inside", root, maxVerifyEntries)
		}
		if e := r.opts.Guard.Match(p); e != nil {
			blocked = e
			return errFound
		}
		return nil
	})
	if blocked != nil {
		return refuse("%s contains a protected path: %v", root, blocked)
	}
	if err != nil && !errors.Is(err, errFound) {
		return err
	}
	return nil
}

func (r *Runner) lookPath(name string) (string, error) {
	for _, d := range r.opts.SearchPath {
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", refuse("%s is allowed but not installed on this machine", name)
}

func (r *Runner) run(ctx context.Context, line, dir string, write bool) (*Result, error) {
	argvs, dir, err := r.Prepare(line, dir, write)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	res := &Result{Command: line, Directory: dir}
	stdout := &capBuffer{max: r.opts.MaxOutput}
	stderr := &capBuffer{max: r.opts.MaxOutput}
	cmds := make([]*exec.Cmd, len(argvs))
	var closeAfterStart []io.Closer
	for i, argv := range argvs {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Dir = dir
		c.Env = r.childEnv()
		c.Stderr = stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return killGroup(c) }
		c.WaitDelay = 2 * time.Second // stdin stays nil: /dev/null
		cmds[i] = c
	}
	for i := 0; i < len(cmds)-1; i++ {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmds[i].Stdout = pw
		cmds[i+1].Stdin = pr
		closeAfterStart = append(closeAfterStart, pr, pw)
	}
	cmds[len(cmds)-1].Stdout = stdout
	start := time.Now()
	started := 0
	var startErr error
	for _, c := range cmds {
		if startErr = c.Start(); startErr != nil {
			break
		}
		limitMemory(c.Process.Pid, r.opts.MemoryLimit)
		started++
	}
	for _, c := range closeAfterStart {
		c.Close()
	}
	if started < len(cmds) {
		for _, c := range cmds[:started] {
			killGroup(c)
			c.Wait()
		}
		return nil, fmt.Errorf("start %s: %w", filepath.Base(argvs[started][0]), startErr)
	}
	for i, c := range cmds {
		c.Wait()
		code := -1
		if c.ProcessState != nil {
			code = c.ProcessState.ExitCode()
		}
		res.Stages = append(res.Stages, StageResult{Argv: append([]string{filepath.Base(argvs[i][0])}, argvs[i][1:]...), ExitCode: code})
	}
	res.DurationMS = time.Since(start).Milliseconds()
	res.ExitCode = res.Stages[len(res.Stages)-1].ExitCode
	res.TimedOut = ctx.Err() == context.DeadlineExceeded
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.Truncated = stdout.truncated || stderr.truncated
	return res, nil
}

// childEnv is the whole environment of a child: no inherited secrets.
func (r *Runner) childEnv() []string {
	env := []string{"PATH=" + strings.Join(r.opts.SearchPath, ":"), "HOME=" + r.opts.Home}
	for _, k := range []string{"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func killGroup(c *exec.Cmd) error {
	if c.Process == nil {
		return nil
	}
	if err := syscall.Kill(-c.Process.Pid, syscall.SIGKILL); err != nil {
		return c.Process.Kill()
	}
	return nil
}

// capBuffer keeps the first max bytes and records that more arrived; it
// keeps accepting writes so that producers are not blocked.
type capBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room < len(p) {
		b.truncated = true
	}
	if room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(b.buf.String(), "\uFFFD")
}
