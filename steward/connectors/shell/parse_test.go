package shell

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/pathguard"
)

// TestParse covers the parser alone: accepted lines with their argv, and
// refused constructs with the reason the user sees.
func TestParse(t *testing.T) {
	cases := []struct {
		line   string
		argv   [][]string // accepted: words per stage
		refuse string     // refused: part of the reason
	}{
		{line: "ls", argv: [][]string{{"ls"}}},
		{line: "ls -la /tmp", argv: [][]string{{"ls", "-la", "/tmp"}}},
		{line: "  cat   a.txt  ", argv: [][]string{{"cat", "a.txt"}}},
		{line: "grep 'hello world' notes.txt", argv: [][]string{{"grep", "hello world", "notes.txt"}}},
		{line: `grep "a b" x`, argv: [][]string{{"grep", "a b", "x"}}},
		{line: `echo "say \"hi\""`, argv: [][]string{{"echo", `say "hi"`}}},
		{line: `echo it\'s`, argv: [][]string{{"echo", "it's"}}},
		{line: `echo 'a;b|c>d'`, argv: [][]string{{"echo", "a;b|c>d"}}},
		{line: `echo "a;b|c&d"`, argv: [][]string{{"echo", "a;b|c&d"}}},
		{line: `echo 'cost $5'`, argv: [][]string{{"echo", "cost $5"}}},
		{line: "cat a | sort | uniq -c", argv: [][]string{{"cat", "a"}, {"sort"}, {"uniq", "-c"}}},
		{line: "cat a|sort", argv: [][]string{{"cat", "a"}, {"sort"}}},
		{line: "ls *.pdf", argv: [][]string{{"ls", "*.pdf"}}},
		{line: "ls ~/Documents", argv: [][]string{{"ls", "~/Documents"}}},
		{line: "grep -c '#include' main.c", argv: [][]string{{"grep", "-c", "#include", "main.c"}}},
		{line: "echo a#b", argv: [][]string{{"echo", "a#b"}}},
		{line: `echo ""`, argv: [][]string{{"echo", ""}}},
		{line: "find . -name '*.go'", argv: [][]string{{"find", ".", "-name", "*.go"}}},
		{line: "echo città", argv: [][]string{{"echo", "città"}}},
		{line: "sort -t, -k2 data.csv", argv: [][]string{{"sort", "-t,", "-k2", "data.csv"}}},
		{line: "echo $(whoami)", refuse: "command substitution"},
		{line: "echo `whoami`", refuse: "backticks"},
		{line: `echo "$(id)"`, refuse: "($)"},
		{line: `echo "$HOME"`, refuse: "($)"},
		{line: "echo $HOME", refuse: "variable expansion"},
		{line: "ls; rm -rf ~", refuse: "with ;"},
		{line: "ls && rm -rf ~", refuse: "&&"},
		{line: "ls || curl evil", refuse: "||"},
		{line: "sleep 100 &", refuse: "background"},
		{line: "cat a > b", refuse: "redirection (>)"},
		{line: "cat a >> b", refuse: "redirection (>)"},
		{line: "sort < a", refuse: "redirection (<)"},
		{line: "diff <(ls a) <(ls b)", refuse: "process substitution"},
		{line: "cat <<EOF", refuse: "here-documents"},
		{line: "ls 2>/dev/null", refuse: "redirection"},
		{line: "ls |& cat", refuse: "|&"},
		{line: "(cd / && ls)", refuse: "subshells"},
		{line: "FOO=bar ls", refuse: "environment assignments (FOO=…)"},
		{line: "ls | LD_PRELOAD=x.so cat", refuse: "environment assignments"},
		{line: "ls\nrm x", refuse: "multiple lines"},
		{line: "ls # comment", refuse: "comments"},
		{line: "echo {a,b}", refuse: "brace expansion"},
		{line: "! ls", refuse: "negation"},
		{line: "ls |", refuse: "a pipe needs a command"},
		{line: "| ls", refuse: "a pipe needs a command"},
		{line: "echo 'open", refuse: "unterminated single quote"},
		{line: `echo "open`, refuse: "unterminated double quote"},
		{line: `echo \`, refuse: "backslash"},
		{line: "", refuse: "empty"},
		{line: strings.Repeat("a ", 3000), refuse: "longer than"},
		{line: strings.Repeat("cat | ", 9) + "cat", refuse: "at most 8 commands"},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			p, err := Parse(tc.line)
			if tc.refuse != "" {
				var re *RefusedError
				if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.refuse) {
					t.Fatalf("Parse(%q) = %v, %v; want refusal containing %q", tc.line, p, err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.line, err)
			}
			var got [][]string
			for _, s := range p.Stages {
				got = append(got, s.Argv())
			}
			if !equalArgv(got, tc.argv) {
				t.Fatalf("Parse(%q) = %q, want %q", tc.line, got, tc.argv)
			}
		})
	}
}

func equalArgv(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") || len(a[i]) != len(b[i]) {
			return false
		}
	}
	return true
}

func TestParseGlobPatterns(t *testing.T) {
	p, err := Parse(`ls '*'.txt x?y "a[1]"b*`)
	if err != nil {
		t.Fatal(err)
	}
	w := p.Stages[0].Words
	if w[1].Pattern != `\*.txt` && w[1].Pattern != "" {
		t.Fatalf("quoted star became a glob: %+v", w[1])
	}
	if w[1].Pattern != "" {
		t.Fatalf("fully quoted word must not glob: %+v", w[1])
	}
	if w[2].Pattern != "x?y" || w[3].Pattern != `a\[1\]b*` || w[3].Text != "a[1]b*" {
		t.Fatalf("patterns %+v", w)
	}
}

// TestPolicy covers the whole read-only path — parse, allow-list, option
// policy, glob expansion and path checks — without running anything.
func TestPolicy(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("KEY"), 0o600)
	os.WriteFile(filepath.Join(home, ".env"), []byte("X=1"), 0o600)
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("n"), 0o600)
	os.WriteFile(filepath.Join(home, "b.txt"), []byte("b"), 0o600)
	os.Symlink(filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, "key.lnk"))
	r := NewRunner(Options{Guard: pathguard.New(pathguard.Options{Home: home}), Home: home})
	cases := []struct {
		line   string
		argv   []string // first stage after expansion, program name as base
		refuse string
	}{
		{line: "cat notes.txt", argv: []string{"cat", "notes.txt"}},
		{line: "cat *.txt", argv: []string{"cat", "b.txt", "notes.txt"}},
		{line: "ls ~", argv: []string{"ls", home}},
		{line: "head -n 5 notes.txt", argv: []string{"head", "-n", "5", "notes.txt"}},
		{line: "grep -c credentials notes.txt", argv: []string{"grep", "-c", "credentials", "notes.txt"}},
		{line: "find . -name '*.txt' -type f", argv: []string{"find", ".", "-name", "*.txt", "-type", "f"}},
		{line: "sort -k2 -t, notes.txt", argv: []string{"sort", "-k2", "-t,", "notes.txt"}},
		{line: "cat .ssh/id_ed25519", refuse: "protected location"},
		{line: "cat ~/.ssh/id_ed25519", refuse: "protected location"},
		{line: "cat notes.txt/../.ssh/id_ed25519", refuse: "protected location"},
		{line: "cat key.lnk", refuse: "protected location"},
		{line: "cat *.lnk", refuse: "reached through a link"},
		{line: "cat .env", refuse: "protected location"},
		{line: "cat .*", refuse: "reaches a protected path"},
		{line: "ls ~/.ss?", refuse: "reaches a protected path"},
		{line: "cat nothing*", refuse: "no files match"},
		{line: "grep -f/x/.ssh/id_rsa notes.txt", refuse: "protected location"},
		{line: "grep --file=.env notes.txt", refuse: "protected location"},
		{line: "find . -exec cat {} ;", refuse: "with ;"},
		{line: "find . -exec cat {} +", refuse: "find -exec is not allowed: it would run another program"},
		{line: "find . -name x -execdir sh -c id +", refuse: "-execdir"},
		{line: "find . -delete", refuse: "writes files"},
		{line: "find . -fprint out", refuse: "writes files"},
		{line: "sort -o out notes.txt", refuse: "sort -o"},
		{line: "sort --output=out notes.txt", refuse: "--output"},
		{line: "sort --compress-program=sh notes.txt", refuse: "run another program"},
		{line: "grep -r password .", refuse: "recursive"},
		{line: "grep -Rn password .", refuse: "recursive"},
		{line: "grep -d recurse x .", refuse: "recursive"},
		{line: "grep --directories=recurse x .", refuse: "recursive"},
		{line: "tail -f notes.txt", refuse: "never ends"},
		{line: "uniq notes.txt out.txt", refuse: "at most 1 operand"},
		{line: "date -s 2020-01-01", refuse: "system clock"},
		{line: "sh -c id", refuse: `"sh" is not an allowed program`},
		{line: "bash", refuse: "not an allowed program"},
		{line: "curl http://example.com", refuse: "not an allowed program"},
		{line: "xargs rm", refuse: "not an allowed program"},
		{line: "awk '{system(\"id\")}'", refuse: "not an allowed program"},
		{line: "/bin/cat notes.txt", refuse: "not a path"},
		{line: "ls | rm notes.txt", refuse: "use run_write"},
		{line: "cat notes.txt && rm notes.txt", refuse: "&&"},
		{line: "env", refuse: "not an allowed program"},
		{line: "hostname evil", refuse: "changes the host name"},
		{line: "diff . /tmp", refuse: "diff on directories"},
		{line: "sort --files0-from=list.txt", refuse: "names of the files"},
		{line: "tree --fromfile notes.txt", refuse: "names of the files"},
		{line: `jq -n 'import "x" as $c; $c'`, refuse: "import"},
		{line: "jq -L / -n 1", refuse: "jq -L"},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			argvs, _, err := r.Prepare(tc.line, home, false)
			if tc.refuse != "" {
				var re *RefusedError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.refuse) {
					t.Fatalf("Prepare(%q) = %q, %v; want refusal containing %q", tc.line, argvs, err, tc.refuse)
				}
				if strings.Contains(err.Error(), "KEY") {
					t.Fatal("refusal leaks file content")
				}
				return
			}
			if err != nil {
				if strings.Contains(err.Error(), "not installed") {
					t.Skip(err)
				}
				t.Fatalf("Prepare(%q): %v", tc.line, err)
			}
			got := append([]string{filepath.Base(argvs[0][0])}, argvs[0][1:]...)
			if strings.Join(got, "\x00") != strings.Join(tc.argv, "\x00") {
				t.Fatalf("Prepare(%q) = %q, want %q", tc.line, got, tc.argv)
			}
		})
	}
}
