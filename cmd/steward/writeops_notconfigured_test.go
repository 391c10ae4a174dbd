package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/scheduler"
)

// TestWriteopsMailJobsWithoutAccountsAreNotConfigured: in a home without
// mail accounts the scheduled mail write-ops jobs exit "not configured", so
// the scheduler reports them skipped instead of failed.
func TestWriteopsMailJobsWithoutAccountsAreNotConfigured(t *testing.T) {
	for _, job := range []string{"send-due", "confirm-mail"} {
		env, _, stderr := testEnv(t, map[string]string{})
		if code := run(context.Background(), []string{"writeops", job, "--json"}, env); code != scheduler.ExitNotConfigured {
			t.Errorf("writeops %s exit %d, want %d (not configured); stderr:\n%s", job, code, scheduler.ExitNotConfigured, stderr)
		}
		if !strings.Contains(stderr.String(), "no mail accounts configured") {
			t.Errorf("writeops %s stderr = %q, want the reason", job, stderr)
		}
	}
}
