package main

import (
	"fmt"
	"io"
)

// benchCheck is one target of a benchmark suite evaluated on a run. Reports
// carry their checks, so the "met" column of docs/benchmarks.md is read from
// a report rather than written by hand.
type benchCheck struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// printChecks writes one PASS or FAIL line per check.
func printChecks(w io.Writer, checks []benchCheck) {
	for _, c := range checks {
		mark := "PASS"
		if !c.Met {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "[%s] %s: %s\n", mark, c.Target, c.Measured)
	}
}
