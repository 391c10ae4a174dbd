package main

import (
	"os"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/voice/ringbacktest"
)

// TestMain lets the test binary stand in for the steward binary when the
// host under test spawns its connectors (`<self> mcp NAME`) or the scheduler
// its jobs (`<self> mail reconcile --json`), so that serve tests run real
// child processes instead of re-running the tests, as the binary the CLI
// tests run (buildSteward: given a command line it runs main, signal
// handling included), and as a user's MCP server (runTestMCPServer).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == testMCPServerArg {
		os.Exit(runTestMCPServer(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == testRingbackArg {
		if err := ringbacktest.Main(os.Args[2]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		main()
	}
	os.Exit(m.Run())
}
