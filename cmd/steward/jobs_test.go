package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestJobCommand: a job command lists its jobs (aligned, with the footer)
// for no argument (a usage error) and for --help, runs the named job with
// the remaining arguments, and names its jobs when asked for another.
func TestJobCommand(t *testing.T) {
	var ran []string
	jobs := []job{
		{"send", "send things", func(_ context.Context, _ *cliEnv, args []string) error {
			ran = append(ran, "send "+strings.Join(args, " "))
			return nil
		}},
		{"confirm-all", "confirm things", func(context.Context, *cliEnv, []string) error { return errors.New("confirm failed") }},
	}
	run := jobCommand("things", "Things live in STEWARD_HOME/things.db.", jobs)
	help := "Usage: steward things JOB [options]\n\nJobs:\n" +
		"  send         send things\n" +
		"  confirm-all  confirm things\n" +
		"\nThings live in STEWARD_HOME/things.db.\n"
	for _, tc := range []struct {
		name       string
		args       []string
		wantErr    string
		wantStderr string
		wantRan    []string
	}{
		{name: "no job", wantErr: errUsage.Error(), wantStderr: help},
		{name: "help", args: []string{"--help"}, wantStderr: help},
		{name: "short help", args: []string{"-h"}, wantStderr: help},
		{name: "a job with its arguments", args: []string{"send", "--json", "x"}, wantRan: []string{"send --json x"}},
		{name: "a failing job", args: []string{"confirm-all"}, wantErr: "confirm failed"},
		{name: "unknown job", args: []string{"sned"}, wantErr: `unknown things job "sned" (have: send, confirm-all)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			var stderr bytes.Buffer
			err := run(context.Background(), &cliEnv{Stderr: &stderr}, tc.args)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if stderr.String() != tc.wantStderr {
				t.Errorf("stderr\n%s\nwant\n%s", stderr.String(), tc.wantStderr)
			}
			if !slices.Equal(ran, tc.wantRan) {
				t.Errorf("ran %q, want %q", ran, tc.wantRan)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
