package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for the steward binary when the
// host under test spawns its connectors (`<self> mcp NAME`) or a test runs a
// job in its own process, so that tests run real processes instead of
// re-running the tests.
func TestMain(m *testing.M) {
	// Any non-flag first argument runs a subcommand (`mcp NAME` for the
	// connectors, `writeops send-due` and `mail reconcile` for the jobs the
	// crash tests kill and restart).
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(run(context.Background(), os.Args[1:], &cliEnv{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}
