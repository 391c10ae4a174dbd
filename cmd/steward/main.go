// Command steward is the local-first personal agent: `steward serve` runs the
// whole product; the other subcommands run one job each.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/scheduler"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// command is one `steward NAME …` subcommand.
type command struct {
	Name    string
	Summary string // one line for `steward help`
	// Run executes the command. args excludes the command name. Returning
	// errUsage prints the command's help.
	Run func(ctx context.Context, env *cliEnv, args []string) error
}

// errUsage asks main to print usage and exit 2.
var errUsage = errors.New("usage")

// commands is the subcommand registry, filled by register calls in init
// functions of this package's cmd_*.go files.
var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("steward: duplicate command " + c.Name)
	}
	commands[c.Name] = c
}

// cliEnv is what every subcommand gets: output streams, a logger, and the
// configuration, loaded on first use so that `steward version` never creates
// the data directory.
type cliEnv struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Log            *slog.Logger
	loadOpts       config.LoadOptions
	cfg            *config.Config
}

// Config loads STEWARD_HOME and config.env once.
func (e *cliEnv) Config() (*config.Config, error) {
	if e.cfg != nil {
		return e.cfg, nil
	}
	cfg, err := config.Load(e.loadOpts)
	if err != nil {
		return nil, err
	}
	// STEWARD_LOG_LEVEL may come from config.env, read only now.
	if v, ok := cfg.Lookup("STEWARD_LOG_LEVEL"); ok {
		l, err := parseLevel(v)
		if err != nil {
			return nil, err
		}
		e.Log = slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: l}))
	}
	cfg.LogWarnings(e.Log)
	e.cfg = cfg
	return cfg, nil
}

// reloadConfig reads STEWARD_HOME/config.env again (after set-up wrote it)
// without replacing the configuration the running commands hold.
func (e *cliEnv) reloadConfig() (*config.Config, error) {
	return config.Load(e.loadOpts)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &cliEnv{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, env *cliEnv) int {
	if env.Log == nil {
		env.Log = newLogger(env.Stderr, os.Getenv("STEWARD_LOG_LEVEL"))
	}
	if len(args) == 0 {
		// Like saivage: a bare `steward` is a usage error, said once.
		printHelp(env.Stderr)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return runCommand(ctx, c, env, []string{"--help"})
			}
		}
		printHelp(env.Stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "steward: unknown command %q\n\n", args[0])
		printHelp(env.Stderr)
		return 2
	}
	return runCommand(ctx, c, env, args[1:])
}

func runCommand(ctx context.Context, c *command, env *cliEnv, args []string) int {
	err := c.Run(ctx, env, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	asJSON := jsonRequested(args)
	code, msg := 1, err.Error()
	switch {
	case errors.Is(err, errUsage):
		hint := fmt.Sprintf("run 'steward %s --help' for usage", c.Name)
		if !asJSON {
			fmt.Fprintln(env.Stderr, hint) // the flag package has said what was wrong
			return 2
		}
		code, msg = 2, hint
		if detail, ok := strings.CutPrefix(err.Error(), errUsage.Error()+": "); ok {
			msg = detail + "; " + hint
		}
	case errors.As(err, new(notConfiguredError)):
		code = scheduler.ExitNotConfigured
	}
	if asJSON {
		writeJSONError(env.Stderr, msg)
	} else {
		fmt.Fprintf(env.Stderr, "steward %s: %s\n", c.Name, msg)
	}
	return code
}

// jsonRequested reports whether a command line asks for --json output, so
// that its failure is reported as JSON too.
func jsonRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "json" {
			if !hasVal {
				return true
			}
			b, err := strconv.ParseBool(val)
			return err == nil && b
		}
	}
	return false
}

// writeJSONError reports a failed --json command as one line on stderr,
// {"error": "..."}, so that a script reads the failure the way it reads the
// report; the exit status stays non-zero.
func writeJSONError(w io.Writer, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	fmt.Fprintf(w, "%s\n", b)
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "Steward %s — a local-first personal agent.\n\nUsage: steward COMMAND [options]\n\nCommands:\n", version)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nRun 'steward COMMAND --help' for a command's options.")
	fmt.Fprintln(w, "Data lives in STEWARD_HOME; settings come from the environment and STEWARD_HOME/config.env.")
}

// newFlagSet returns a flag set whose --help prints usage and the command's
// description to stderr.
func newFlagSet(env *cliEnv, name, usage, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("steward "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: steward %s %s\n\n%s\n", name, usage, strings.TrimSpace(description))
		var hasFlags bool
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nOptions:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs, mapping a parse error to errUsage. With
// --json (and no request for help) the flag package prints nothing: the
// error is reported once, as JSON.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if jsonRequested(args) && !slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// writeJSON prints v as indented JSON: the --json output of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONFile writes v as indented JSON to the file path: the report of
// every benchmark suite.
func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseLevel reads a STEWARD_LOG_LEVEL value.
func parseLevel(v string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "debug", "info", "warn", "error":
		l.UnmarshalText([]byte(strings.TrimSpace(v)))
		return l, nil
	case "":
		return slog.LevelInfo, nil
	}
	return l, fmt.Errorf("STEWARD_LOG_LEVEL: %q is not a log level (use debug, info, warn or error)", v)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(level))); err != nil || level == "" {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func init() {
	register(&command{
		Name:    "version",
		Summary: "print the version",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fmt.Fprintf(env.Stdout, "steward %s\n", version)
			return nil
		},
	})
}
