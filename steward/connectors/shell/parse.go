// Package shell is Steward's constrained filesystem connector: find_files
// walks directories with filters, run_readonly runs shell-like pipelines of
// allow-listed read-only programs without a shell, and run_write runs the
// file-mutating commands that the host's approval policy gates. Every path
// passes the shared sensitive-path guard.
package shell

import (
	"fmt"
	"strings"
	"unicode"
)

// Limits of the command-line parser.
const (
	MaxCommandLine = 4096
	MaxStages      = 8
	MaxArgs        = 256
)

// Pipeline is a parsed command line: commands joined by pipes.
type Pipeline struct {
	Stages []Stage
}

// Stage is one command of a pipeline: its words, in order.
type Stage struct {
	Words []Word
}

// Word is one argument as parsed. Text is its literal value. Pattern is set
// when it had unquoted glob characters: the glob to expand, with quoted
// metacharacters escaped. Tilde marks a leading unquoted ~ (the home
// directory).
type Word struct {
	Text    string
	Pattern string
	Tilde   bool
}

// Argv returns the literal words.
func (s Stage) Argv() []string {
	out := make([]string, len(s.Words))
	for i, w := range s.Words {
		out[i] = w.Text
	}
	return out
}

// RefusedError explains why a command line was not accepted. Its message
// is meant for the user and the model.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "command refused: " + e.Reason }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Parse splits a command line into pipeline stages the way a POSIX shell
// would for the accepted subset: words, single and double quotes,
// backslash escapes and "|". Everything that would make a shell do more —
// command or process substitution, variables, redirection, lists, background
// jobs, subshells, environment assignments, comments — is refused with a
// reason instead of being interpreted.
func Parse(line string) (*Pipeline, error) {
	if strings.TrimSpace(line) == "" {
		return nil, refuse("the command is empty")
	}
	if len(line) > MaxCommandLine {
		return nil, refuse("the command is longer than %d characters", MaxCommandLine)
	}
	p := &Pipeline{}
	var cur Stage
	var word, pattern strings.Builder
	inWord, glob, tilde := false, false, false
	// lit adds quoted or escaped text: literal in the word and in the pattern.
	lit := func(s string) {
		word.WriteString(s)
		for _, r := range s {
			if strings.ContainsRune("*?[]\\", r) {
				pattern.WriteByte('\\')
			}
			pattern.WriteRune(r)
		}
		inWord = true
	}
	endWord := func() {
		if inWord {
			w := Word{Text: word.String(), Tilde: tilde}
			if glob {
				w.Pattern = pattern.String()
			}
			cur.Words = append(cur.Words, w)
		}
		word.Reset()
		pattern.Reset()
		inWord, glob, tilde = false, false, false
	}
	endStage := func() error {
		endWord()
		if len(cur.Words) == 0 {
			return refuse("a pipe needs a command on each side")
		}
		p.Stages = append(p.Stages, cur)
		cur = Stage{}
		return nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		next := rune(0)
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case c == '\n' || c == '\r':
			return nil, refuse("multiple lines are not allowed; run one command (pipes are fine)")
		case c == 0:
			return nil, refuse("the command contains a NUL character")
		case c == ' ' || c == '\t':
			endWord()
		case c == '\'':
			end := indexRune(rs, i+1, '\'')
			if end < 0 {
				return nil, refuse("unterminated single quote")
			}
			lit(string(rs[i+1 : end]))
			i = end
		case c == '"':
			j := i + 1
			var quoted strings.Builder
			for ; j < len(rs) && rs[j] != '"'; j++ {
				switch rs[j] {
				case '$':
					return nil, refuse("variable expansion and command substitution ($) are not supported, even in double quotes; use single quotes for a literal $")
				case '`':
					return nil, refuse("command substitution (backticks) is not allowed")
				case '\\':
					if j+1 < len(rs) && strings.ContainsRune("\"\\$`", rs[j+1]) {
						j++
					}
				}
				quoted.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, refuse("unterminated double quote")
			}
			lit(quoted.String())
			i = j
		case c == '\\':
			if next == 0 {
				return nil, refuse("the command ends with a backslash")
			}
			if next == '\n' {
				return nil, refuse("multiple lines are not allowed")
			}
			lit(string(next))
			i++
		case c == '|':
			if next == '|' {
				return nil, refuse("|| lists are not allowed; run one pipeline")
			}
			if next == '&' {
				return nil, refuse("|& redirection is not allowed")
			}
			if err := endStage(); err != nil {
				return nil, err
			}
			if len(p.Stages) >= MaxStages {
				return nil, refuse("a pipeline may have at most %d commands", MaxStages)
			}
		case c == '$':
			if next == '(' {
				return nil, refuse("command substitution $(…) is not allowed")
			}
			return nil, refuse("variable expansion ($) is not supported; write the value literally or quote it with single quotes")
		case c == '`':
			return nil, refuse("command substitution (backticks) is not allowed")
		case c == ';':
			return nil, refuse("command lists with ; are not allowed; run one pipeline")
		case c == '&':
			if next == '&' {
				return nil, refuse("command lists with && are not allowed; run one pipeline")
			}
			return nil, refuse("background jobs (&) and & redirections are not allowed")
		case c == '>' || c == '<':
			if c == '<' && next == '(' || c == '>' && next == '(' {
				return nil, refuse("process substitution %c(…) is not allowed", c)
			}
			if c == '<' && next == '<' {
				return nil, refuse("here-documents (<<) are not allowed")
			}
			return nil, refuse("redirection (%c) is not allowed: read-only commands print their output, they do not write or read files through the shell", c)
		case c == '(' || c == ')':
			return nil, refuse("subshells and grouping with parentheses are not allowed; quote a literal parenthesis")
		case c == '#' && !inWord:
			return nil, refuse("comments (#) are not supported; quote a literal #")
		case c == '~' && !inWord && (next == 0 || next == '/' || next == ' ' || next == '|'):
			word.WriteRune(c)
			pattern.WriteRune(c)
			inWord, tilde = true, true
		case c == '*' || c == '?' || c == '[':
			word.WriteRune(c)
			pattern.WriteRune(c)
			inWord, glob = true, true
		case c == '{' && strings.ContainsRune(string(rs[i:]), ',') && strings.ContainsRune(string(rs[i:]), '}'):
			return nil, refuse("brace expansion {a,b} is not supported; list the arguments")
		case c == '!' && !inWord && (next == ' ' || next == 0):
			return nil, refuse("pipeline negation (!) is not supported")
		default:
			if unicode.IsControl(c) {
				return nil, refuse("control characters are not allowed")
			}
			word.WriteRune(c)
			pattern.WriteRune(c)
			inWord = true
		}
		if len(cur.Words) > MaxArgs {
			return nil, refuse("a command may have at most %d arguments", MaxArgs)
		}
	}
	if err := endStage(); err != nil {
		return nil, err
	}
	for _, s := range p.Stages {
		if isAssignment(s.Words[0].Text) {
			return nil, refuse("environment assignments (%s) are not allowed", strings.SplitN(s.Words[0].Text, "=", 2)[0]+"=…")
		}
	}
	return p, nil
}

func indexRune(rs []rune, from int, r rune) int {
	for i := from; i < len(rs); i++ {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// isAssignment reports whether w has the NAME=value form a shell treats as
// an environment assignment before a command.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}
