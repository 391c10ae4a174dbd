package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// jsonCommand is a command line with a --json option and the operand it
// needs, if any.
type jsonCommand struct{ path, operand []string }

func (c jsonCommand) args(flags ...string) []string {
	return slices.Concat(c.path, flags, c.operand)
}

// jsonCommands walks the command registry and returns every command line
// whose --help lists a -json option: each registered command, and the
// subcommands its help names (in its Usage line or under Jobs:, Commands:
// or Suites:).
func jsonCommands(t *testing.T) []jsonCommand {
	t.Helper()
	usageWord := regexp.MustCompile(`^[a-z][a-z-]*$`)
	operand := regexp.MustCompile(`(?m)^Usage: steward .* [A-Z]+…?$`)
	helpOf := func(args ...string) string {
		env, out, errb := testEnv(t, map[string]string{})
		run(context.Background(), append(args, "--help"), env)
		return out.String() + errb.String()
	}
	var found []jsonCommand
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	}) {
		help := helpOf(name)
		candidates := [][]string{{name}}
		section := false
		for line := range strings.Lines(help) {
			line = strings.TrimRight(line, "\n")
			if rest, ok := strings.CutPrefix(line, "Usage: steward "+name+" "); ok {
				for alt := range strings.SplitSeq(rest, "|") {
					if f := strings.Fields(alt); len(f) > 0 && usageWord.MatchString(strings.Trim(f[0], "[]")) {
						candidates = append(candidates, []string{name, strings.Trim(f[0], "[]")})
					}
				}
				continue
			}
			switch {
			case line == "Jobs:" || line == "Commands:" || line == "Suites:":
				section = true
			case !strings.HasPrefix(line, "  "):
				section = false
			case section && !strings.Contains(line, "steward "): // the scheduler lists jobs as command lines
				if w := strings.Fields(line)[0]; usageWord.MatchString(w) {
					candidates = append(candidates, []string{name, w})
				}
			}
		}
		for _, c := range candidates {
			h := help
			if len(c) == 2 {
				h = helpOf(c...)
			}
			if strings.Contains(h, "\n  -json") {
				jc := jsonCommand{path: c}
				// A command that needs an operand (PATH, QUERY) gets one,
				// so that it reaches its configuration.
				if operand.MatchString(h) {
					jc.operand = []string{"x"}
				}
				if !slices.ContainsFunc(found, func(f jsonCommand) bool { return slices.Equal(f.path, c) }) {
					found = append(found, jc)
				}
			}
		}
	}
	return found
}

// TestEveryJSONCommandReportsErrorsAsJSON: every command that offers --json
// reports a failure as one JSON line {"error": "..."} on stderr with a
// non-zero exit, whether the failure is a bad option or an unusable
// configuration, and prints nothing else a script would have to skip.
func TestEveryJSONCommandReportsErrorsAsJSON(t *testing.T) {
	cmds := jsonCommands(t)
	var names []string
	for _, c := range cmds {
		names = append(names, strings.Join(c.path, " "))
	}
	for _, want := range []string{"mail status", "usage", "scheduler status", "wiki search", "calendar sync", "writeops list", "bench gateway"} {
		if !slices.Contains(names, want) {
			t.Fatalf("registry walk found %q, missing %q", names, want)
		}
	}
	t.Logf("%d --json commands: %s", len(cmds), strings.Join(names, ", "))

	notADir := filepath.Join(t.TempDir(), "home-is-a-file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, args []string, vars map[string]string, wantCode int, wantInError string) {
		t.Helper()
		env, out, errb := testEnv(t, vars)
		env.Log = newLogger(errb, "error")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		code := run(ctx, args, env)
		if code == 0 || (wantCode != 0 && code != wantCode) {
			t.Errorf("exit %d, want non-zero %d", code, wantCode)
		}
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		var rep map[string]string
		if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rep) != nil || len(rep) != 1 || rep["error"] == "" {
			t.Fatalf("stderr = %q, want exactly one line {\"error\": \"...\"}", errb)
		}
		if !strings.Contains(rep["error"], wantInError) {
			t.Errorf("error %q does not say %q", rep["error"], wantInError)
		}
		if out.Len() != 0 {
			t.Errorf("stdout = %q, want nothing", out)
		}
	}
	for _, c := range cmds {
		t.Run(strings.Join(c.path, "_"), func(t *testing.T) {
			check(t, c.args("--json", "--no-such-option"), map[string]string{}, 2, "-no-such-option")
			if c.path[0] == "bench" || c.path[0] == "restore" {
				return // suites measure without reading the configuration; restore writes the home --home names
			}
			check(t, c.args("--json"), map[string]string{"STEWARD_HOME": notADir}, 0, notADir)
		})
	}
}

func TestJSONRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"status", "--json"}, true},
		{[]string{"-json"}, true},
		{[]string{"--json=true"}, true},
		{[]string{"--json=false"}, false},
		{[]string{"--", "--json"}, false},
		{[]string{"status", "--jsonl"}, false},
		{[]string{"search", "json"}, false},
	} {
		if got := jsonRequested(tc.args); got != tc.want {
			t.Errorf("jsonRequested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
