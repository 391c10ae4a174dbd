package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/agentstack/agentstack/agent"
)

// MaxPatchBytes bounds an apply_patch input.
const MaxPatchBytes = 4 << 20

// Patch operations.
const (
	patchAdd    = "add"
	patchDelete = "delete"
	patchUpdate = "update"
)

// filePatch is one file section of a patch.
type filePatch struct {
	Op     string
	Path   string
	MoveTo string
	// Add: the new content.
	Content string
	// Update: the chunks in order.
	Chunks []patchChunk
}

// patchChunk replaces Old lines with New lines, after Anchor when set.
type patchChunk struct {
	Anchor string
	Old    []string
	New    []string
	EOF    bool
}

// parsePatch parses the apply_patch format:
//
//	*** Begin Patch
//	*** Add File: PATH       followed by "+" lines
//	*** Delete File: PATH
//	*** Update File: PATH    optionally "*** Move to: PATH", then chunks
//	@@ optional anchor       chunk lines start with " ", "-" or "+"
//	*** End Patch
func parsePatch(text string) ([]filePatch, error) {
	if len(text) > MaxPatchBytes {
		return nil, fmt.Errorf("patch is %d bytes; the limit is %d", len(text), MaxPatchBytes)
	}
	lines := strings.Split(strings.ReplaceAll(strings.TrimSpace(text), "\r\n", "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "*** Begin Patch" {
		return nil, errors.New(`a patch starts with the line "*** Begin Patch"`)
	}
	if strings.TrimSpace(lines[len(lines)-1]) != "*** End Patch" {
		return nil, errors.New(`a patch ends with the line "*** End Patch"`)
	}
	lines = lines[1 : len(lines)-1]
	var out []filePatch
	seen := map[string]bool{}
	for i := 0; i < len(lines); {
		line := lines[i]
		var fp filePatch
		switch {
		case strings.HasPrefix(line, "*** Add File: "):
			fp = filePatch{Op: patchAdd, Path: strings.TrimSpace(strings.TrimPrefix(line, "*** Add File: "))}
			i++
			var body []string
			for ; i < len(lines) && !strings.HasPrefix(lines[i], "*** "); i++ {
				l, ok := strings.CutPrefix(lines[i], "+")
				if !ok {
					return nil, fmt.Errorf("line %d: every line of an added file starts with '+'", i+2)
				}
				body = append(body, l)
			}
			fp.Content = strings.Join(body, "\n")
			if len(body) > 0 {
				fp.Content += "\n"
			}
		case strings.HasPrefix(line, "*** Delete File: "):
			fp = filePatch{Op: patchDelete, Path: strings.TrimSpace(strings.TrimPrefix(line, "*** Delete File: "))}
			i++
		case strings.HasPrefix(line, "*** Update File: "):
			fp = filePatch{Op: patchUpdate, Path: strings.TrimSpace(strings.TrimPrefix(line, "*** Update File: "))}
			i++
			if i < len(lines) && strings.HasPrefix(lines[i], "*** Move to: ") {
				fp.MoveTo = strings.TrimSpace(strings.TrimPrefix(lines[i], "*** Move to: "))
				i++
			}
			for i < len(lines) && (!strings.HasPrefix(lines[i], "*** ") || lines[i] == "*** End of File") {
				var ch patchChunk
				if a, ok := strings.CutPrefix(lines[i], "@@"); ok {
					ch.Anchor = strings.TrimSpace(a)
					i++
				} else if len(fp.Chunks) > 0 {
					return nil, fmt.Errorf("line %d: expected @@ to start the next chunk of %s", i+2, fp.Path)
				}
				changed := false
				for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@") && !strings.HasPrefix(lines[i], "*** "); i++ {
					l := lines[i]
					switch {
					case l == "":
						ch.Old, ch.New = append(ch.Old, ""), append(ch.New, "")
					case l[0] == ' ':
						ch.Old, ch.New = append(ch.Old, l[1:]), append(ch.New, l[1:])
					case l[0] == '-':
						ch.Old, changed = append(ch.Old, l[1:]), true
					case l[0] == '+':
						ch.New, changed = append(ch.New, l[1:]), true
					default:
						return nil, fmt.Errorf("line %d: chunk lines of %s start with ' ', '-' or '+'", i+2, fp.Path)
					}
				}
				if i < len(lines) && lines[i] == "*** End of File" {
					ch.EOF = true
					i++
				}
				if !changed {
					return nil, fmt.Errorf("a chunk of %s changes nothing", fp.Path)
				}
				fp.Chunks = append(fp.Chunks, ch)
			}
			if len(fp.Chunks) == 0 && fp.MoveTo == "" {
				return nil, fmt.Errorf("update of %s has no chunks", fp.Path)
			}
		default:
			return nil, fmt.Errorf("line %d: expected *** Add File:, *** Delete File: or *** Update File:, got %q", i+2, line)
		}
		if fp.Path == "" {
			return nil, fmt.Errorf("line %d: missing path", i+1)
		}
		for _, p := range []string{fp.Path, fp.MoveTo} {
			if p == "" {
				continue
			}
			if seen[p] {
				return nil, fmt.Errorf("%s appears twice in the patch", p)
			}
			seen[p] = true
		}
		out = append(out, fp)
	}
	if len(out) == 0 {
		return nil, errors.New("the patch changes no file")
	}
	return out, nil
}

// applyChunks applies an update's chunks to content.
func applyChunks(content string, chunks []patchChunk) (string, error) {
	trailingNL := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if content == "" {
		lines = nil
	}
	cursor := 0
	for n, ch := range chunks {
		if ch.Anchor != "" {
			at := findLines(lines, []string{ch.Anchor}, cursor, false)
			if at < 0 {
				return "", fmt.Errorf("chunk %d: anchor %q not found", n+1, ch.Anchor)
			}
			cursor = at + 1
		}
		var at int
		switch {
		case len(ch.Old) == 0:
			at = len(lines)
			if !ch.EOF && ch.Anchor != "" {
				at = cursor
			}
		default:
			at = findLines(lines, ch.Old, cursor, ch.EOF)
		}
		if at < 0 {
			return "", fmt.Errorf("chunk %d: the lines to replace were not found:\n%s", n+1, strings.Join(ch.Old, "\n"))
		}
		next := append(append(append([]string{}, lines[:at]...), ch.New...), lines[at+len(ch.Old):]...)
		lines, cursor = next, at+len(ch.New)
	}
	out := strings.Join(lines, "\n")
	if len(lines) > 0 && (trailingNL || content == "") {
		out += "\n"
	}
	return out, nil
}

// findLines finds want in lines at or after from: exactly, then ignoring
// trailing whitespace, then ignoring surrounding whitespace.
func findLines(lines, want []string, from int, eof bool) int {
	norms := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	}
	for _, norm := range norms {
		start, end := from, len(lines)-len(want)
		if eof {
			start = max(end, from)
		}
		for i := start; i <= end; i++ {
			match := true
			for j, w := range want {
				if norm(lines[i+j]) != norm(w) {
					match = false
					break
				}
			}
			if match {
				return i
			}
		}
	}
	return -1
}

func init() { register("apply_patch", applyPatchTool) }

type patchArgs struct {
	Patch string `json:"patch"`
}

// plannedEffect is one effect of an admitted patch: write content to path
// (then remove from, for a move), or remove path.
type plannedEffect struct {
	path, from string
	content    []byte
	remove     bool
}

func (w plannedEffect) apply() error {
	if w.remove {
		return os.Remove(w.path)
	}
	if _, err := writeFile(w.path, w.content); err != nil {
		return err
	}
	if w.from != "" {
		return os.Remove(w.from)
	}
	return nil
}

func applyPatchTool(env *Env) agent.Tool {
	return tool(spec("apply_patch", "Apply a multi-file patch inside the project. Format:\n*** Begin Patch\n*** Add File: path\n+new line\n*** Update File: path\n*** Move to: new/path (optional)\n@@ optional anchor line\n context line\n-removed line\n+added line\n*** Delete File: path\n*** End Patch\n"+
		"Every destination and chunk is checked before any file changes.",
		`{"type":"object","properties":{"patch":{"type":"string","minLength":1}},"required":["patch"],"additionalProperties":false}`),
		func(ctx context.Context, a patchArgs) (agent.ToolResult, error) {
			fps, err := parsePatch(a.Patch)
			if err != nil {
				return failf("invalid patch: %v", err), nil
			}
			// Every destination is admitted (writePath, then the source
			// gate for all of them at once) before any file is read or
			// changed: one refused destination refuses the whole patch.
			dests := make([][2]string, len(fps))
			var all []string
			for i, fp := range fps {
				for j, rel := range []string{fp.Path, fp.MoveTo} {
					if rel == "" {
						continue
					}
					p, err := env.writePath(rel)
					if err != nil {
						return failf("%v", err), nil
					}
					dests[i][j] = p
					all = append(all, p)
				}
			}
			if err := env.admitFiles(ctx, all...); err != nil {
				return failf("%v", err), nil
			}
			var plan []plannedEffect
			var summary []string
			for i, fp := range fps {
				p := dests[i][0]
				_, statErr := os.Stat(p)
				exists := statErr == nil
				switch fp.Op {
				case patchAdd:
					if exists {
						return failf("cannot add %s: it already exists (use *** Update File)", fp.Path), nil
					}
					plan = append(plan, plannedEffect{path: p, content: []byte(fp.Content)})
					summary = append(summary, "A "+env.display(p))
				case patchDelete:
					if !exists {
						return failf("cannot delete %s: it does not exist", fp.Path), nil
					}
					plan = append(plan, plannedEffect{path: p, remove: true})
					summary = append(summary, "D "+env.display(p))
				case patchUpdate:
					data, err := os.ReadFile(p)
					if err != nil {
						return failf("cannot update %s: %v", fp.Path, cleanErr(err, fp.Path)), nil
					}
					out, err := applyChunks(string(data), fp.Chunks)
					if err != nil {
						return failf("cannot update %s: %v", fp.Path, err), nil
					}
					w := plannedEffect{path: p, content: []byte(out)}
					if fp.MoveTo != "" {
						dst := dests[i][1]
						if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
							return failf("cannot move %s to %s: the destination exists", fp.Path, fp.MoveTo), nil
						}
						w.path, w.from = dst, p
						summary = append(summary, "R "+env.display(p)+" → "+env.display(dst))
					} else {
						summary = append(summary, "M "+env.display(p))
					}
					plan = append(plan, w)
				}
			}
			if err := ctx.Err(); err != nil {
				return agent.ToolResult{}, err
			}
			for i, w := range plan {
				if err := w.apply(); err != nil {
					return failf("applying the patch stopped at %s: %v (already applied: %s)", env.display(w.path), err, strings.Join(summary[:i], ", ")), nil
				}
			}
			return ok("applied patch:\n" + strings.Join(summary, "\n")), nil
		})
}
