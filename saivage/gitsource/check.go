package gitsource

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// entry is one tree or index entry.
type entry struct {
	mode  string // "100644", "100755", "120000", "160000"
	oid   OID
	stage int
}

// supportedConfig reads the repository's configuration once and refuses
// state the engine does not support.
func (r *Repo) supportedConfig(ctx context.Context) (map[string]string, error) {
	out, err := r.run(ctx, Command{Args: []string{"config", "--list", "-z"}})
	if err != nil {
		return nil, fmt.Errorf("read git configuration: %w", err)
	}
	cfg := map[string]string{}
	for _, kv := range strings.Split(string(out.Stdout), "\x00") {
		k, v, _ := strings.Cut(kv, "\n")
		if k != "" {
			cfg[strings.ToLower(k)] = v
		}
	}
	truthy := func(k string) bool {
		v, ok := cfg[k]
		if !ok {
			return false
		}
		switch strings.ToLower(v) {
		case "", "false", "no", "off", "0":
			return false
		}
		return true
	}
	switch {
	case truthy("core.fsmonitor"):
		return nil, &UnsupportedError{Feature: "fsmonitor", Detail: "core.fsmonitor is set; unset it for this checkout"}
	case truthy("core.sparsecheckout") || truthy("index.sparse"):
		return nil, &UnsupportedError{Feature: "sparse checkout", Detail: "core.sparseCheckout/index.sparse is on; run git sparse-checkout disable"}
	case truthy("core.autocrlf"):
		return nil, &UnsupportedError{Feature: "line-ending transform", Detail: "core.autocrlf is " + cfg["core.autocrlf"]}
	case strings.EqualFold(cfg["core.eol"], "crlf"):
		return nil, &UnsupportedError{Feature: "line-ending transform", Detail: "core.eol is crlf"}
	case cfg["extensions.objectformat"] != "" && cfg["extensions.objectformat"] != "sha1":
		return nil, &UnsupportedError{Feature: "object format", Detail: cfg["extensions.objectformat"]}
	}
	return cfg, nil
}

// lsTree lists a tree recursively.
func (r *Repo) lsTree(ctx context.Context, tree OID) (map[string]entry, error) {
	out, res, err := r.runCode(ctx, Command{Args: []string{"ls-tree", "-r", "-z", "--full-tree", string(tree)}})
	if err != nil {
		return nil, fmt.Errorf("list tree %s: %w", short(tree), err)
	}
	if res.ExitCode != 0 {
		if missing, _ := r.missing(ctx, tree); missing {
			return nil, &MissingObjectError{OID: tree}
		}
		return nil, fmt.Errorf("list tree %s: %s", short(tree), bytes.TrimSpace(out.Stderr))
	}
	m := map[string]entry{}
	for _, rec := range strings.Split(string(out.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type oid
		if len(f) != 3 {
			return nil, fmt.Errorf("list tree %s: malformed entry %q", short(tree), rec)
		}
		m[path] = entry{mode: f[0], oid: OID(f[2])}
	}
	return m, nil
}

// missing reports whether an object is absent from the local repository.
func (r *Repo) missing(ctx context.Context, oid OID) (bool, error) {
	_, res, err := r.runCode(ctx, Command{Args: []string{"cat-file", "-e", string(oid)}})
	if err != nil {
		return false, err
	}
	return res.ExitCode != 0, nil
}

// lsIndex lists an index (the real one when indexFile is ""), every stage;
// skip-worktree entries are refused as sparse state.
func (r *Repo) lsIndex(ctx context.Context, indexFile string) (map[string][]entry, error) {
	out, err := r.run(ctx, Command{Args: []string{"ls-files", "-s", "-t", "-z"}, IndexFile: indexFile})
	if err != nil {
		return nil, fmt.Errorf("list index: %w", err)
	}
	m := map[string][]entry{}
	for _, rec := range strings.Split(string(out.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // tag mode oid stage
		if len(f) != 4 {
			return nil, fmt.Errorf("list index: malformed entry %q", rec)
		}
		if f[0] == "S" {
			return nil, &UnsupportedError{Feature: "sparse checkout", Detail: "skip-worktree entry " + path}
		}
		stage, _ := strconv.Atoi(f[3])
		m[path] = append(m[path], entry{mode: f[1], oid: OID(f[2]), stage: stage})
	}
	return m, nil
}

// others lists untracked files that are not ignored, relative to an index.
func (r *Repo) others(ctx context.Context, indexFile string) ([]string, error) {
	args := []string{"ls-files", "-z", "--others", "--exclude-standard"}
	for _, e := range r.excluded {
		args = append(args, "--exclude=/"+e) // not even walked; filtered below too
	}
	out, err := r.run(ctx, Command{Args: args, IndexFile: indexFile})
	if err != nil {
		return nil, fmt.Errorf("list untracked files: %w", err)
	}
	var paths []string
	for _, p := range strings.Split(string(out.Stdout), "\x00") {
		if p != "" && !r.isExcluded(p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// transformAttrs refuses paths whose attributes would make Git's stored
// bytes differ from the file's (filters, eol, ident, encodings).
func (r *Repo) transformAttrs(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	out, err := r.run(ctx, Command{Args: []string{"check-attr", "-z", "--stdin", "filter", "eol", "ident", "working-tree-encoding"},
		Stdin: in.Bytes(), HasStdin: true})
	if err != nil {
		return fmt.Errorf("check attributes: %w", err)
	}
	f := strings.Split(string(out.Stdout), "\x00")
	for i := 0; i+2 < len(f); i += 3 {
		if v := f[i+2]; v != "unspecified" && v != "unset" {
			return &UnsupportedError{Feature: "transform attribute", Detail: fmt.Sprintf("%s has %s=%s", f[i], f[i+1], v)}
		}
	}
	return nil
}

// blobID is the Git blob SHA-1 of data.
func blobID(data []byte) OID {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return OID(hex.EncodeToString(h.Sum(nil)))
}

// fileBlob hashes a file as Git would store it: its mode and blob id.
// Missing files and directories return mode "".
func (r *Repo) fileBlob(p string) (string, OID, error) {
	full := filepath.Join(r.dir, filepath.FromSlash(p))
	st, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("stat %s: %w", p, err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return "", "", fmt.Errorf("read link %s: %w", p, err)
		}
		return "120000", blobID([]byte(target)), nil
	case st.Mode().IsRegular():
		f, err := os.Open(full)
		if err != nil {
			return "", "", fmt.Errorf("read %s: %w", p, err)
		}
		defer f.Close()
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
		n, err := io.Copy(h, f)
		if err != nil {
			return "", "", fmt.Errorf("read %s: %w", p, err)
		}
		if n != st.Size() {
			return "", "", fmt.Errorf("read %s: changed while being read", p)
		}
		mode := "100644"
		if st.Mode()&0o100 != 0 {
			mode = "100755"
		}
		return mode, OID(hex.EncodeToString(h.Sum(nil))), nil
	}
	return "", "", nil // a directory (a container) or a special file
}

// Check is the synchronous read-only source check of the checkout against
// want: real index entries against the tree, file bytes, executable modes
// and symlink targets against blob hashes, and untracked files. All of its
// Git queries share one QueryDeadline; none writes the index or objects.
// Refused repository state is an *UnsupportedError.
func (r *Repo) Check(ctx context.Context, want Tuple) (Observation, error) {
	qctx, cancel := r.queryContext(ctx)
	defer cancel()
	obs, err := r.check(qctx, want)
	if err != nil {
		return obs, fmt.Errorf("check source against %s: %w", short(want.Commit), err)
	}
	return obs, nil
}

func (r *Repo) check(ctx context.Context, want Tuple) (Observation, error) {
	var obs Observation
	if _, err := r.supportedConfig(ctx); err != nil {
		return obs, err
	}
	if want.Tree == "" {
		t, err := r.tuple(ctx, string(want.Commit))
		if err != nil {
			return obs, err
		}
		want.Tree = t.Tree
	}
	head, headRef, err := r.head(ctx)
	if err != nil {
		return obs, err
	}
	obs.Head, obs.HeadRef = head, headRef
	tree, err := r.lsTree(ctx, want.Tree)
	if err != nil {
		return obs, err
	}
	index, err := r.lsIndex(ctx, "")
	if err != nil {
		return obs, err
	}
	others, err := r.others(ctx, "")
	if err != nil {
		return obs, err
	}
	all := make([]string, 0, len(tree)+len(others))
	for p, e := range tree {
		if e.mode == "160000" {
			return obs, &UnsupportedError{Feature: "submodule", Detail: p}
		}
		all = append(all, p)
	}
	all = append(all, others...)
	if err := r.transformAttrs(ctx, all); err != nil {
		return obs, err
	}
	for p, es := range index {
		t, ok := tree[p]
		if !ok || len(es) != 1 || es[0].stage != 0 || es[0].mode != t.mode || es[0].oid != t.oid {
			obs.IndexMismatch = append(obs.IndexMismatch, p)
		}
	}
	for p, t := range tree {
		if _, ok := index[p]; !ok {
			obs.IndexMismatch = append(obs.IndexMismatch, p)
		}
		if r.isExcluded(p) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return obs, err
		}
		mode, oid, err := r.fileBlob(p)
		if err != nil {
			return obs, err
		}
		if mode != t.mode || oid != t.oid {
			obs.WorktreeMismatch = append(obs.WorktreeMismatch, p)
		}
	}
	// Files in the real index but not in the tree are reported through
	// the index; files only on disk through others.
	obs.Uncaptured = others
	slices.Sort(obs.IndexMismatch)
	slices.Sort(obs.WorktreeMismatch)
	slices.Sort(obs.Uncaptured)
	return obs, nil
}

// Verify is Check that turns a mismatch into a *DirtyError.
func (r *Repo) Verify(ctx context.Context, want Tuple) error {
	obs, err := r.Check(ctx, want)
	if err != nil {
		return err
	}
	if !obs.Clean() {
		return &DirtyError{What: describe(want), Observation: obs}
	}
	return nil
}

func describe(t Tuple) string {
	if t.Ref != "" {
		return fmt.Sprintf("%s (%s)", t.Ref, short(t.Commit))
	}
	return string(short(t.Commit))
}
