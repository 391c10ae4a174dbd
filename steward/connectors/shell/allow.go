package shell

import (
	"slices"
	"strings"
)

// program is the policy for one allow-listed binary. docs/shell-allowlist.md
// documents this table; keep them in step.
type program struct {
	// write marks file-mutating programs, available only to run_write.
	write bool
	// valueShort are short options that take a value: scanning a cluster
	// such as -A3 stops at them.
	valueShort string
	// refuseShort maps short options to the reason they are refused.
	refuseShort map[rune]string
	// refuseLong maps long options (matched with or without =value) and
	// find-style single-dash words to the reason they are refused.
	refuseLong map[string]string
	// maxOperands bounds non-option arguments (0 = unbounded).
	maxOperands int
	// recursiveShort/recursiveLong are options that make a write program
	// walk directories; their directory operands must not contain
	// protected paths.
	recursiveShort string
	recursiveLong  []string
}

const (
	reasonExec      = "it would run another program"
	reasonWrites    = "it writes files; use run_write for changes"
	reasonRecursive = "a recursive read could reach protected files; use find_files to locate files and name them explicitly"
	reasonFollow    = "following a file never ends"
	reasonListFile  = "it reads the names of the files to open from another file, which cannot be checked"
	reasonModules   = "jq modules are read from directories that cannot be checked"
)

// programs is the allow-list. Anything not named here is refused.
var programs = map[string]program{
	// Reading and inspecting files.
	"cat":  {},
	"head": {valueShort: "nc"},
	"tail": {valueShort: "nc", refuseShort: map[rune]string{'f': reasonFollow, 'F': reasonFollow}, refuseLong: map[string]string{"--follow": reasonFollow, "--retry": reasonFollow}},
	"wc":   {},
	"nl":   {valueShort: "bdfhilnpsvw"},
	"tac":  {},
	"rev":  {},
	"od":   {valueShort: "AjNSt"},
	"file": {valueShort: "emfFP", refuseShort: map[rune]string{'C': reasonWrites}, refuseLong: map[string]string{"--compile": reasonWrites}},
	"stat": {valueShort: "cf"},
	"ls":   {valueShort: "IwT"},
	"du":   {valueShort: "dBtX"},
	"df":   {valueShort: "BtxF"},
	"tree": {valueShort: "LPIH", refuseShort: map[rune]string{'o': reasonWrites}, refuseLong: map[string]string{"--fromfile": reasonListFile}},
	"find": {refuseLong: map[string]string{
		"-exec": reasonExec, "-execdir": reasonExec, "-ok": reasonExec, "-okdir": reasonExec,
		"-delete": reasonWrites, "-fprint": reasonWrites, "-fprint0": reasonWrites, "-fprintf": reasonWrites, "-fls": reasonWrites,
	}},
	"realpath": {}, "readlink": {}, "basename": {}, "dirname": {}, "pwd": {},
	"md5sum": {}, "sha1sum": {}, "sha256sum": {}, "sha512sum": {}, "shasum": {valueShort: "a"}, "md5": {valueShort: "s"}, "cksum": {},
	"mdls": {valueShort: "n"}, "mdfind": {valueShort: "n"},
	// Text processing in pipelines.
	"grep": {valueShort: "efmABCdD", refuseShort: map[rune]string{'r': reasonRecursive, 'R': reasonRecursive},
		refuseLong: map[string]string{"--recursive": reasonRecursive, "--dereference-recursive": reasonRecursive, "--directories": reasonRecursive}},
	"sort":  {valueShort: "kt", refuseShort: map[rune]string{'o': reasonWrites}, refuseLong: map[string]string{"--output": reasonWrites, "--compress-program": reasonExec, "--files0-from": reasonListFile}},
	"uniq":  {valueShort: "fsw", maxOperands: 1},
	"cut":   {valueShort: "bcdf"},
	"tr":    {},
	"paste": {valueShort: "d"}, "join": {valueShort: "12jteo"}, "comm": {}, "column": {valueShort: "cst"},
	"fold": {valueShort: "w"}, "expand": {valueShort: "t"}, "unexpand": {valueShort: "t"},
	"diff": {valueShort: "CUIFLx", refuseShort: map[rune]string{'r': reasonRecursive}, refuseLong: map[string]string{"--recursive": reasonRecursive}},
	"cmp":  {valueShort: "in"},
	"jq":   {refuseShort: map[rune]string{'L': reasonModules}},
	// System information.
	"echo": {}, "date": {valueShort: "dfr", refuseShort: map[rune]string{'s': "it changes the system clock"}, refuseLong: map[string]string{"--set": "it changes the system clock"}},
	"seq": {}, "uname": {}, "whoami": {}, "id": {}, "hostname": {refuseShort: map[rune]string{'F': reasonWrites}},
	"sw_vers": {}, "true": {}, "false": {},

	// File-mutating programs: run_write only.
	"mkdir": {write: true, valueShort: "m"},
	"touch": {write: true, valueShort: "drt"},
	"cp":    {write: true, valueShort: "tS", recursiveShort: "rRa", recursiveLong: []string{"--recursive", "--archive"}},
	"mv":    {write: true, valueShort: "tS"},
	"rm":    {write: true, recursiveShort: "rR", recursiveLong: []string{"--recursive"}},
	"rmdir": {write: true},
	"ln":    {write: true, valueShort: "tS"},
	"chmod": {write: true, recursiveShort: "R", recursiveLong: []string{"--recursive"}},
	"tee":   {write: true},
}

// ReadOnlyPrograms lists the binaries run_readonly accepts, sorted.
func ReadOnlyPrograms() []string { return programNames(false) }

// WritePrograms lists the file-mutating binaries run_write adds, sorted.
func WritePrograms() []string { return programNames(true) }

func programNames(write bool) []string {
	var out []string
	for n, p := range programs {
		if p.write == write {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// checkOptions applies a program's option policy to its arguments (argv
// without the program name). It returns the operands.
func checkOptions(name string, p program, args []string) ([]string, error) {
	var operands []string
	endOfOptions := false
	skipNext := false
	for i, a := range args {
		if skipNext {
			skipNext = false
			if name == "grep" && i > 0 && args[i-1] == "-d" && a == "recurse" {
				return nil, refuse("%s %s is not allowed: %s", name, "-d recurse", reasonRecursive)
			}
			continue
		}
		switch {
		case endOfOptions || a == "-" || !strings.HasPrefix(a, "-"):
			operands = append(operands, a)
		case a == "--":
			endOfOptions = true
		case strings.HasPrefix(a, "--"):
			key, _, _ := strings.Cut(a, "=")
			for _, k := range []string{a, key} {
				if reason, ok := p.refuseLong[k]; ok {
					return nil, refuse("%s %s is not allowed: %s", name, key, reason)
				}
			}
		default:
			if reason, ok := p.refuseLong[a]; ok { // find-style -exec
				return nil, refuse("%s %s is not allowed: %s", name, a, reason)
			}
			if name == "find" {
				continue // find predicates are words, not clusters
			}
			for j, r := range a[1:] {
				if reason, ok := p.refuseShort[r]; ok {
					return nil, refuse("%s -%c is not allowed: %s", name, r, reason)
				}
				if strings.ContainsRune(p.valueShort, r) {
					if j == len(a)-2 {
						skipNext = true // value is the next argument
					}
					break
				}
			}
		}
	}
	if p.maxOperands > 0 && len(operands) > p.maxOperands {
		return nil, refuse("%s accepts at most %d operand(s) here: a further one would be written to", name, p.maxOperands)
	}
	if name == "jq" {
		for _, a := range args {
			if strings.Contains(a, "import") || strings.Contains(a, "include") {
				return nil, refuse("jq import and include are not allowed: %s", reasonModules)
			}
		}
	}
	if name == "hostname" && len(operands) > 0 {
		return nil, refuse("hostname with an argument changes the host name")
	}
	if name == "chmod" {
		for _, o := range operands[:min(1, len(operands))] {
			if strings.ContainsAny(o, "st") || len(o) == 4 && o[0] != '0' {
				return nil, refuse("chmod mode %s is not allowed: setuid, setgid and sticky bits are refused", o)
			}
		}
	}
	return operands, nil
}

// isRecursive reports whether args turn on a write program's recursion.
func isRecursive(p program, args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			if slices.Contains(p.recursiveLong, a) {
				return true
			}
			continue
		}
		if strings.HasPrefix(a, "-") && p.recursiveShort != "" && strings.ContainsAny(a[1:], p.recursiveShort) {
			return true
		}
	}
	return false
}
