package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Record paths name card records in the file tools:
//
//	record:NAME            a record of the caller's card
//	record:CARD/NAME       a record of another card
//	record:CARD/NAME@N     accepted version N (read-only evidence)
const recordScheme = "record:"

// recordPath is a parsed record path.
type recordPath struct {
	Card, Name string
	Version    int // -1 = current
}

func (p recordPath) String() string {
	s := recordScheme + p.Card + "/" + p.Name
	if p.Version >= 0 {
		s += "@" + strconv.Itoa(p.Version)
	}
	return s
}

// parseRecordPath parses a record path; ok is false when p is not one.
func (e *Env) parseRecordPath(p string) (recordPath, bool, error) {
	rest, isRec := strings.CutPrefix(strings.TrimSpace(p), recordScheme)
	if !isRec {
		return recordPath{}, false, nil
	}
	rp := recordPath{Version: -1}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		n, err := strconv.Atoi(rest[at+1:])
		if err != nil || n < 0 {
			return rp, true, fmt.Errorf("record path %q: the version after @ must be a number ≥ 0", p)
		}
		rp.Version, rest = n, rest[:at]
	}
	if card, name, ok := strings.Cut(rest, "/"); ok {
		rp.Card, rp.Name = card, name
	} else {
		rp.Card, rp.Name = e.Caller.Card, rest
	}
	if rp.Card == "" {
		return rp, true, fmt.Errorf("record path %q: a global caller must name the card (record:CARD/NAME)", p)
	}
	if rp.Name == "" || strings.ContainsAny(rp.Name, "/\\@") {
		return rp, true, fmt.Errorf("record path %q: expected record:NAME, record:CARD/NAME or record:CARD/NAME@VERSION", p)
	}
	return rp, true, nil
}

// errProtected refuses Saivage's internal namespaces.
var errProtected = errors.New("is inside .saivage, which holds Saivage's own state; use record: paths for records (only .saivage/work and .saivage/prompts are readable, only .saivage/work is writable)")

// abs makes p absolute against the project root.
func (e *Env) abs(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.Root, p)
	}
	return filepath.Clean(p), nil
}

// within reports whether p is base or below it.
func within(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolved evaluates symlinks of p's longest existing ancestor.
func resolved(p string) string {
	dir, rest := p, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// stateArea classifies a path inside .saivage: "" (outside), "work",
// "prompts" or "internal".
func (e *Env) stateArea(p string) string {
	if !within(e.StateDir, p) {
		return ""
	}
	for _, area := range []string{"work", "prompts"} {
		if within(filepath.Join(e.StateDir, area), p) {
			return area
		}
	}
	return "internal"
}

// readPath admits a path for read, glob and grep: native absolute or
// project-relative, excluding Saivage's internal namespace lexically and
// after symlink resolution.
func (e *Env) readPath(p string) (string, error) {
	a, err := e.abs(p)
	if err != nil {
		return "", err
	}
	for _, cand := range []string{a, resolved(a)} {
		if area := e.stateArea(cand); area == "internal" {
			return "", fmt.Errorf("%s %w", e.display(a), errProtected)
		}
	}
	return a, nil
}

// writePath admits a destination for write, edit and apply_patch: inside
// the project (lexically and resolved), never Saivage's state except
// .saivage/work. A symlink into .saivage does not acquire work authority.
func (e *Env) writePath(p string) (string, error) {
	a, err := e.abs(p)
	if err != nil {
		return "", err
	}
	r := resolved(a)
	if !within(e.Root, a) || !within(e.Root, r) {
		return "", fmt.Errorf("%s is outside the project %s; file tools change only files inside the project (use run_command for anything else)", p, e.Root)
	}
	la, ra := e.stateArea(a), e.stateArea(r)
	if la == "internal" || la == "prompts" || ra == "internal" || ra == "prompts" || (ra == "work" && la != "work") {
		return "", fmt.Errorf("%s %w", e.display(a), errProtected)
	}
	if st, err := os.Lstat(a); err == nil && st.IsDir() {
		return "", fmt.Errorf("%s is a directory", e.display(a))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return a, nil
}

// display shows a path relative to the project when it is inside.
func (e *Env) display(p string) string {
	if within(e.Root, p) {
		if rel, err := filepath.Rel(e.Root, p); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return p
}
