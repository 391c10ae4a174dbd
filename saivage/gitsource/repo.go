package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/procgroup"
)

// zeroOID is the old value that makes update-ref create-only.
const zeroOID = "0000000000000000000000000000000000000000"

// Repo is one commissioned (or to-be-commissioned) checkout.
type Repo struct {
	opts     Options
	ns       string
	git      string
	dir      string // working tree root (symlinks resolved)
	gitDir   string // absolute
	workDir  string
	branch   string   // refs/heads/<D>
	excluded []string // cleaned, GeneratedDir first
	env      []string
}

// Open checks the git binary (MinGitVersion) and the checkout and returns a
// Repo.
func Open(ctx context.Context, opts Options) (*Repo, error) {
	r := &Repo{opts: opts, ns: strings.TrimSuffix(opts.Namespace, "/"), git: opts.Git}
	if r.ns == "" {
		r.ns = DefaultNamespace
	}
	if r.git == "" {
		r.git = "git"
	}
	p, err := exec.LookPath(r.git)
	if err != nil {
		return nil, fmt.Errorf("open git source: find git: %w", err)
	}
	r.git = p
	if r.opts.QueryDeadline <= 0 {
		r.opts.QueryDeadline = QueryDeadline
	}
	if opts.DeliveryBranch == "" {
		return nil, errors.New("open git source: an explicit delivery branch is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open git source %s: %w", opts.Dir, err)
	}
	r.dir = dir
	r.env = baseEnv(opts)
	out, err := r.run(ctx, Command{Args: []string{"version"}})
	if err != nil {
		return nil, fmt.Errorf("open git source: %w", err)
	}
	if err := checkVersion(string(out.Stdout)); err != nil {
		return nil, err
	}
	out, err = r.run(ctx, Command{Args: []string{"rev-parse", "--absolute-git-dir", "--show-toplevel", "--show-object-format"}})
	if err != nil {
		return nil, fmt.Errorf("open git source %s: not a git checkout: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	if len(lines) != 3 {
		return nil, fmt.Errorf("open git source %s: unexpected rev-parse output %q", dir, out.Stdout)
	}
	if lines[1] != dir {
		return nil, fmt.Errorf("open git source: %s is not the top of its checkout (%s is)", dir, lines[1])
	}
	if lines[2] != "sha1" {
		return nil, &UnsupportedError{Feature: "object format", Detail: lines[2] + " (only sha1 repositories are supported)"}
	}
	r.gitDir = lines[0]
	for _, ref := range []string{r.ns + "/cards/x", "refs/heads/" + opts.DeliveryBranch} {
		if _, err := r.run(ctx, Command{Args: []string{"check-ref-format", ref}}); err != nil || !strings.HasPrefix(ref, "refs/") {
			return nil, fmt.Errorf("open git source: invalid ref name %q", ref)
		}
	}
	r.branch = "refs/heads/" + opts.DeliveryBranch
	r.workDir = opts.WorkDir
	if r.workDir == "" {
		r.workDir = filepath.Join(r.gitDir, "saivage")
	}
	if err := os.MkdirAll(r.workDir, 0o700); err != nil {
		return nil, fmt.Errorf("open git source: create work directory: %w", err)
	}
	r.excluded = []string{GeneratedDir}
	for _, e := range opts.ExcludedPaths {
		c := filepath.ToSlash(filepath.Clean(e))
		if c == "." || strings.HasPrefix(c, "../") || filepath.IsAbs(e) {
			return nil, fmt.Errorf("open git source: excluded path %q must be relative inside the checkout", e)
		}
		r.excluded = append(r.excluded, strings.TrimSuffix(c, "/"))
	}
	if rel, err := filepath.Rel(r.dir, r.workDir); err == nil && !strings.HasPrefix(rel, "..") && !r.isExcluded(filepath.ToSlash(rel)) &&
		!strings.HasPrefix(r.workDir+"/", r.gitDir+"/") {
		return nil, fmt.Errorf("open git source: work directory %s is inside the checkout but not excluded", r.workDir)
	}
	qctx, cancel := r.queryContext(ctx)
	defer cancel()
	if _, err := r.supportedConfig(qctx); err != nil {
		return nil, err
	}
	return r, nil
}

// baseEnv is the environment of every Git child: the caller's environment
// without any GIT_* variable but the four identity ones and the global
// configuration switches, plus the engine's fixed settings.
func baseEnv(opts Options) []string {
	environ := os.Environ
	if opts.Environ != nil {
		environ = opts.Environ
	}
	var env []string
	for _, kv := range environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") && !slices.Contains(keptGitEnv, k) {
			continue
		}
		if strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANGUAGE=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C", "LANGUAGE=", "GIT_TERMINAL_PROMPT=0", "GIT_NO_LAZY_FETCH=1", "GIT_OPTIONAL_LOCKS=0",
		"GIT_EDITOR=false", "GIT_SEQUENCE_EDITOR=false", "GIT_PAGER=cat")
	if opts.Identity.Name != "" {
		env = append(env, "GIT_AUTHOR_NAME="+opts.Identity.Name, "GIT_COMMITTER_NAME="+opts.Identity.Name)
	}
	if opts.Identity.Email != "" {
		env = append(env, "GIT_AUTHOR_EMAIL="+opts.Identity.Email, "GIT_COMMITTER_EMAIL="+opts.Identity.Email)
	}
	return env
}

// keptGitEnv are the GIT_* variables Git children inherit.
var keptGitEnv = []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
	"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"}

// checkVersion parses `git version` output and compares it with
// MinGitVersion.
func checkVersion(out string) error {
	have := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "git version "))
	if versionLess(have, MinGitVersion) {
		return &VersionError{Have: have, Want: MinGitVersion}
	}
	return nil
}

// versionLess compares dotted numeric versions ("2.39.5", "2.45.1.windows.1").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range 3 {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(strings.TrimFunc(as[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// Command is one Git invocation through the managed runner.
type Command struct {
	Args []string
	// Stdin, when HasStdin, is given exactly to git.
	Stdin    []byte
	HasStdin bool
	// IndexFile, when set, is the GIT_INDEX_FILE (a private index).
	IndexFile string
	// Env is added to the child's environment.
	Env []string
}

// Output is a successful command's output.
type Output struct {
	Stdout, Stderr []byte
}

// Git runs one Git argv in its own managed process group in the checkout.
// Anything but an exit-zero leader with no surviving group member is a
// *CommandError.
func (r *Repo) Git(ctx context.Context, c Command) (Output, error) {
	return r.run(ctx, c)
}

func (r *Repo) run(ctx context.Context, c Command) (Output, error) {
	out, res, err := r.runCode(ctx, c)
	if err != nil {
		return out, err
	}
	if !res.Succeeded() {
		return out, r.commandError(c, out, res)
	}
	return out, nil
}

// runCode runs c and returns its result whatever the exit code; err is set
// only when it could not run (or was cancelled or contained).
func (r *Repo) runCode(ctx context.Context, c Command) (Output, procgroup.Result, error) {
	var stdout, stderr bytes.Buffer
	env := r.env
	if c.IndexFile != "" || len(c.Env) > 0 {
		env = append(append([]string{}, r.env...), c.Env...)
		if c.IndexFile != "" {
			env = append(env, "GIT_INDEX_FILE="+c.IndexFile)
		}
	}
	res, err := procgroup.Run(ctx, procgroup.Spec{Argv: append([]string{r.git}, c.Args...), Dir: r.dir, Env: env,
		Stdin: c.Stdin, HasStdin: c.HasStdin, Stdout: &stdout, Stderr: &stderr})
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err != nil {
		return out, res, fmt.Errorf("git %s: %w", strings.Join(c.Args, " "), err)
	}
	if res.Cancelled || res.Contained {
		return out, res, r.commandError(c, out, res)
	}
	return out, res, nil
}

func (r *Repo) commandError(c Command, out Output, res procgroup.Result) error {
	return &CommandError{Args: c.Args, ExitCode: res.ExitCode, Stderr: string(out.Stderr), Contained: res.Contained, Cancelled: res.Cancelled}
}

// queryContext is the one finite deadline a synchronous check's queries
// share.
func (r *Repo) queryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.QueryDeadline)
}

func (r *Repo) step(s Step) {
	if r.opts.AfterStep != nil {
		r.opts.AfterStep(s)
	}
}

// isExcluded reports whether a slash path is excluded from capture and
// delivery.
func (r *Repo) isExcluded(p string) bool {
	for _, e := range r.excluded {
		if p == e || strings.HasPrefix(p, e+"/") {
			return true
		}
	}
	return false
}

// revParse resolves a revision to an OID ("" when it does not exist).
func (r *Repo) revParse(ctx context.Context, rev string) (OID, error) {
	out, res, err := r.runCode(ctx, Command{Args: []string{"rev-parse", "-q", "--verify", "--end-of-options", rev}})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", nil
	}
	return OID(strings.TrimSpace(string(out.Stdout))), nil
}

// head reads HEAD: its commit and the branch it is attached to ("" when
// detached).
func (r *Repo) head(ctx context.Context) (OID, string, error) {
	out, res, err := r.runCode(ctx, Command{Args: []string{"rev-parse", "HEAD", "--symbolic-full-name", "HEAD"}})
	if err != nil {
		return "", "", fmt.Errorf("read HEAD: %w", err)
	}
	f := strings.Fields(string(out.Stdout))
	if res.ExitCode != 0 || len(f) != 2 {
		return "", "", errors.New("read HEAD: the checkout has no commit")
	}
	if f[1] == "HEAD" {
		return OID(f[0]), "", nil
	}
	return OID(f[0]), f[1], nil
}

// headTuple is the tuple of the commit HEAD names (no Ref).
func (r *Repo) headTuple(ctx context.Context) (Tuple, error) {
	head, _, err := r.head(ctx)
	if err != nil {
		return Tuple{}, err
	}
	t, err := r.tuple(ctx, string(head))
	t.Ref = ""
	return t, err
}

// tuple resolves a ref (or commit) to a tuple.
func (r *Repo) tuple(ctx context.Context, ref string) (Tuple, error) {
	out, res, err := r.runCode(ctx, Command{Args: []string{"rev-parse", ref + "^{commit}", ref + "^{tree}"}})
	if err != nil {
		return Tuple{}, err
	}
	f := strings.Fields(string(out.Stdout))
	if res.ExitCode != 0 || len(f) != 2 {
		return Tuple{}, fmt.Errorf("resolve %s: %w", ref, errNoRef)
	}
	return Tuple{Ref: ref, Commit: OID(f[0]), Tree: OID(f[1])}, nil
}

var errNoRef = errors.New("no such ref or commit")

// updateRef moves ref to newOID only if it is at oldOID (zeroOID: absent).
func (r *Repo) updateRef(ctx context.Context, ref string, newOID, oldOID OID, msg string) error {
	if _, err := r.run(ctx, Command{Args: []string{"update-ref", "-m", msg, ref, string(newOID), string(oldOID)}}); err != nil {
		return fmt.Errorf("move %s to %s: %w", ref, short(newOID), err)
	}
	return nil
}

// rebaseInProgress reports whether a native rebase is stopped.
func (r *Repo) rebaseInProgress() bool {
	for _, d := range []string{"rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(filepath.Join(r.gitDir, d)); err == nil {
			return true
		}
	}
	return false
}
