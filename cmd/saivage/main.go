// Command saivage manages a Saivage project: a card-centred runtime where
// Planner, Executor and Reviewer agents build software: saivage start serves a
// project (operator API, Analyst, runtime); run, pause, resume, stop and
// status talk to the live server; init, validate, tree, card and record work
// offline.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
)

// Version is set at build time with -ldflags "-X main.Version=…".
var Version = "dev"

// env carries a command's inputs and outputs.
type env struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
}

// command is one subcommand.
type command struct {
	name    string
	usage   string // argument synopsis
	summary string
	help    string // longer explanation
	run     func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error
	flags   func(fs *flag.FlagSet)
}

// usageError makes the command exit 2 after printing its usage.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// exitCode ends a command with that status after it reported what it did.
type exitCode int

func (x exitCode) Error() string { return fmt.Sprintf("exit status %d", int(x)) }

func commands() []*command {
	return []*command{
		versionCommand(), initCommand(), validateCommand(), startCommand(), runCommand(),
		pauseCommand(), resumeCommand(), stopCommand(), restartCommand(), statusCommand(),
		treeCommand(), cardCommand(), recordCommand(), chatCommand(), gcCommand(), resetCommand(), repairCommand(), notifyCommand(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv}))
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `saivage — card-centred runtime for autonomous software development

A project keeps its configuration and state under .saivage/ in the project
directory: config.yaml and prompts/ (yours to edit), and the generated cards/,
agents/, logs/ and work/ (written by Saivage).

Usage:
  saivage <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every project command accepts --root DIR (default: $SAIVAGE_ROOT, else the
current directory) and --config FILE (default: $SAIVAGE_CONFIG, else
<root>/.saivage/config.yaml). Add --json for machine-readable output.

Run "saivage <command> --help" for details.
`)
}

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 && args[0] == "help" {
			return run(ctx, []string{args[1], "--help"}, e)
		}
		printUsage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(e.stderr, "saivage: unknown command %q\n\n", args[0])
		printUsage(e.stderr)
		return 2
	}
	fs := flag.NewFlagSet("saivage "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: saivage %s %s\n\n%s\n", cmd.name, cmd.usage, strings.TrimSpace(cmd.help))
		var hasFlags bool
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(e.stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	if err := fs.Parse(interspersed(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := cmd.run(ctx, e, fs, fs.Args()); err != nil {
		var xc exitCode
		if errors.As(err, &xc) {
			return int(xc)
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(e.stderr, "saivage %s: %s\n", cmd.name, ue.msg)
			fs.Usage()
			return 2
		}
		fmt.Fprintf(e.stderr, "saivage %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

// interspersed moves flags after positional arguments to the front, so
// "saivage card show project.a --json" works like "--json project.a".
func interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func versionCommand() *command {
	var asJSON bool
	return &command{
		name: "version", summary: "print the version", usage: "[--json]",
		help:  "Prints the saivage version and the Go toolchain it was built with.",
		flags: func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") },
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			goVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			if asJSON {
				return writeJSON(e.stdout, map[string]string{"version": Version, "go": goVersion})
			}
			fmt.Fprintf(e.stdout, "saivage %s (%s)\n", Version, goVersion)
			return nil
		},
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
