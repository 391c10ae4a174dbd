package main

import (
	"context"
	"fmt"
	"strings"
)

// job is one JOB of a command that dispatches on its first argument
// (`steward mail backfill`, `steward writeops confirm-mail`).
type job struct {
	name, summary string
	run           func(ctx context.Context, env *cliEnv, args []string) error
}

// jobCommand returns the Run of the command name whose first argument
// picks one of jobs; with no argument or -h/--help it lists the jobs and
// ends with footer (where the command's data lives, which doc explains it).
func jobCommand(name, footer string, jobs []job) func(ctx context.Context, env *cliEnv, args []string) error {
	width := 0
	names := make([]string, len(jobs))
	for i, j := range jobs {
		width = max(width, len(j.name))
		names[i] = j.name
	}
	return func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
			fmt.Fprintf(env.Stderr, "Usage: steward %s JOB [options]\n\nJobs:\n", name)
			for _, j := range jobs {
				fmt.Fprintf(env.Stderr, "  %-*s %s\n", width+1, j.name, j.summary)
			}
			fmt.Fprintln(env.Stderr, "\n"+footer)
			if len(args) == 0 {
				return errUsage
			}
			return nil
		}
		for _, j := range jobs {
			if j.name == args[0] {
				return j.run(ctx, env, args[1:])
			}
		}
		return fmt.Errorf("unknown %s job %q (have: %s)", name, args[0], strings.Join(names, ", "))
	}
}
