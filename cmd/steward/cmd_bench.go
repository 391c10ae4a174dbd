package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// benchmark is one `steward bench NAME` suite. It writes a JSON report and
// prints a human summary with progress on env.Stderr.
type benchmark struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, env *cliEnv, args []string) error
}

// benchmarks holds the suites, filled by registerBench calls in init functions
// of this package's cmd_*.go files.
var benchmarks = map[string]*benchmark{}

func registerBench(b *benchmark) {
	if _, dup := benchmarks[b.Name]; dup {
		panic("steward: duplicate benchmark " + b.Name)
	}
	benchmarks[b.Name] = b
}

func init() {
	register(&command{
		Name:    "bench",
		Summary: "run a measured benchmark suite and write a JSON report",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
				names := make([]string, 0, len(benchmarks))
				for n := range benchmarks {
					names = append(names, n)
				}
				sort.Strings(names)
				fmt.Fprintln(env.Stderr, "Usage: steward bench SUITE [options]\n\nSuites:")
				for _, n := range names {
					fmt.Fprintf(env.Stderr, "  %-12s %s\n", n, benchmarks[n].Summary)
				}
				fmt.Fprintln(env.Stderr, "\nRun 'steward bench SUITE --help' for a suite's options.")
				if len(args) == 0 {
					return errUsage
				}
				return nil
			}
			b, ok := benchmarks[args[0]]
			if !ok {
				return fmt.Errorf("unknown benchmark suite %q", strings.TrimSpace(args[0]))
			}
			return b.Run(ctx, env, args[1:])
		},
	})
}
