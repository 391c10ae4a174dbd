package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
)

// Limits of the file tools.
const (
	// MaxReadBytes bounds a file the read tool opens.
	MaxReadBytes = 4 << 20
	// MaxReadOutput bounds the text one read returns.
	MaxReadOutput = 64 << 10
	// MaxLineChars truncates very long lines in read output.
	MaxLineChars = 2000
	// DefaultReadLines is the default window of a read.
	DefaultReadLines = 2000
	// MaxWriteBytes bounds content written by write/edit.
	MaxWriteBytes = 8 << 20
)

func init() {
	register("read", readTool)
	register("write", writeTool)
	register("edit", editTool)
}

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

func readTool(env *Env) agent.Tool {
	return tool(spec("read", "Read a text file (numbered lines) or list a directory. Paths are project-relative or absolute. "+
		"record:NAME reads a record of your card, record:CARD/NAME another card's record, record:CARD/NAME@N an exact accepted version (0 = baseline).",
		`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":1,"description":"first line (1-based)"},"limit":{"type":"integer","minimum":1,"description":"number of lines (default 2000)"}},"required":["path"],"additionalProperties":false}`),
		func(ctx context.Context, a readArgs) (agent.ToolResult, error) {
			if rp, isRec, err := env.parseRecordPath(a.Path); isRec {
				if err != nil {
					return failf("%v", err), nil
				}
				v, err := env.readRecord(ctx, rp)
				if err != nil {
					return failf("%v", err), nil
				}
				text, _ := numbered(v.Content, a.Offset, a.Limit)
				return v.result(v.describe() + "\n" + env.redact(text)), nil
			}
			p, err := env.readPath(a.Path)
			if err != nil {
				return failf("%v", err), nil
			}
			st, err := os.Stat(p)
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			if st.IsDir() {
				return ok(env.listDir(p)), nil
			}
			if !st.Mode().IsRegular() {
				return failf("%s is not a regular file", env.display(p)), nil
			}
			if st.Size() > MaxReadBytes {
				return failf("%s is %d bytes; read opens files up to %d bytes (use grep, or run_command with head/sed)", env.display(p), st.Size(), MaxReadBytes), nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			if isBinary(data) {
				return failf("%s looks binary (%d bytes); read shows text files only", env.display(p), len(data)), nil
			}
			text, total := numbered(string(data), a.Offset, a.Limit)
			if text == "" && total == 0 {
				return ok(env.display(p) + " is empty"), nil
			}
			return ok(env.redact(text)), nil
		})
}

// numbered renders lines offset..offset+limit-1 with line numbers, bounded.
func numbered(s string, offset, limit int) (string, int) {
	if offset < 1 {
		offset = 1
	}
	if limit < 1 {
		limit = DefaultReadLines
	}
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	end := min(len(lines), offset-1+limit)
	for i := offset - 1; i < end; i++ {
		line := strings.TrimRight(lines[i], "\r\n")
		if len(line) > MaxLineChars {
			line = truncUTF8(line, MaxLineChars) + " …[line truncated]"
		}
		row := fmt.Sprintf("%6d\t%s\n", i+1, line)
		if b.Len()+len(row) > MaxReadOutput {
			fmt.Fprintf(&b, "…[output truncated at line %d of %d; continue with offset %d]\n", i, len(lines), i+1)
			return b.String(), len(lines)
		}
		b.WriteString(row)
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "…[%d more lines; continue with offset %d]\n", len(lines)-end, end+1)
	}
	return b.String(), len(lines)
}

func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isBinary(b []byte) bool {
	head := b[:min(len(b), 8192)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(head[:lastRuneStart(head)])
}

// lastRuneStart returns a cut that does not split a trailing multi-byte rune.
func lastRuneStart(b []byte) int {
	n := len(b)
	for i := n - 1; i >= 0 && i >= n-4; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return n
			}
			return i
		}
	}
	return n
}

func cleanErr(err error, display string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", display)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", display)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", display, pe.Err)
	}
	return err
}

func (env *Env) listDir(p string) string {
	entries, err := os.ReadDir(p)
	if err != nil {
		return "Error: " + cleanErr(err, env.display(p)).Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s/ (%d entries)\n", env.display(p), len(entries))
	for i, e := range entries {
		if i == 500 {
			fmt.Fprintf(&b, "…[%d more entries]\n", len(entries)-i)
			break
		}
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		b.WriteString(name + "\n")
	}
	return b.String()
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func writeTool(env *Env) agent.Tool {
	return tool(spec("write", "Create or replace a file inside the project with the given content (parent directories are created). "+
		"record:NAME replaces the content of your node's draft of record NAME.",
		`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`),
		func(ctx context.Context, a writeArgs) (agent.ToolResult, error) {
			if len(a.Content) > MaxWriteBytes {
				return failf("content is %d bytes; the limit is %d", len(a.Content), MaxWriteBytes), nil
			}
			if rp, isRec, err := env.parseRecordPath(a.Path); isRec {
				if err != nil {
					return failf("%v", err), nil
				}
				msg, err := env.writeRecord(ctx, rp, a.Content)
				if err != nil {
					return failf("%v", err), nil
				}
				return ok(msg), nil
			}
			p, err := env.writePath(a.Path)
			if err != nil {
				return failf("%v", err), nil
			}
			if err := env.admitFiles(ctx, p); err != nil {
				return failf("%v", err), nil
			}
			existed, err := writeFile(p, []byte(a.Content))
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			verb := "created"
			if existed {
				verb = "replaced"
			}
			return ok(fmt.Sprintf("%s %s (%d bytes)", verb, env.display(p), len(a.Content))), nil
		})
}

// writeFile writes data, keeping an existing file's permissions.
func writeFile(p string, data []byte) (existed bool, err error) {
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(p); err == nil {
		existed, mode = true, st.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return existed, err
	}
	return existed, os.WriteFile(p, data, mode)
}

type editArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

func editTool(env *Env) agent.Tool {
	return tool(spec("edit", "Replace exact text in a file: old_string must occur exactly once unless replace_all is true. "+
		"record:NAME edits your node's draft of record NAME (needs the write tool too).",
		`{"type":"object","properties":{"path":{"type":"string"},"old_string":{"type":"string","minLength":1},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["path","old_string","new_string"],"additionalProperties":false}`),
		func(ctx context.Context, a editArgs) (agent.ToolResult, error) {
			if a.OldString == "" {
				return failf("old_string is empty; use write to create a file"), nil
			}
			if a.OldString == a.NewString {
				return failf("old_string and new_string are identical; nothing to change"), nil
			}
			apply := func(text, display string) (string, error) {
				n := strings.Count(text, a.OldString)
				switch {
				case n == 0:
					return "", fmt.Errorf("old_string was not found in %s (it must match exactly, including whitespace)", display)
				case n > 1 && !a.ReplaceAll:
					return "", fmt.Errorf("old_string occurs %d times in %s; add surrounding text to make it unique or set replace_all", n, display)
				}
				out := strings.ReplaceAll(text, a.OldString, a.NewString)
				if len(out) > MaxWriteBytes {
					return "", fmt.Errorf("the edited content would be %d bytes; the limit is %d", len(out), MaxWriteBytes)
				}
				return out, nil
			}
			if rp, isRec, err := env.parseRecordPath(a.Path); isRec {
				if err != nil {
					return failf("%v", err), nil
				}
				cur, err := env.readRecord(ctx, rp)
				if err != nil {
					return failf("%v", err), nil
				}
				out, err := apply(cur.Content, rp.String())
				if err != nil {
					return failf("%v", err), nil
				}
				msg, err := env.writeRecord(ctx, rp, out)
				if err != nil {
					return failf("%v", err), nil
				}
				return ok(msg), nil
			}
			p, err := env.writePath(a.Path)
			if err != nil {
				return failf("%v", err), nil
			}
			if err := env.admitFiles(ctx, p); err != nil {
				return failf("%v", err), nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			if isBinary(data) {
				return failf("%s looks binary; edit changes text files only", env.display(p)), nil
			}
			out, err := apply(string(data), env.display(p))
			if err != nil {
				return failf("%v", err), nil
			}
			if _, err := writeFile(p, []byte(out)); err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			return ok(fmt.Sprintf("edited %s (%d replacement(s))", env.display(p), strings.Count(string(data), a.OldString))), nil
		})
}
