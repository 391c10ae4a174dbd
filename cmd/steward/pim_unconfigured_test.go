package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// TestUnbuiltBecauseUnconfigured: an index that is not built reads "not
// configured" (one line, still matching the connector's not-built error)
// only when no source is configured; other failures and a configured
// connector's errors pass unchanged.
func TestUnbuiltBecauseUnconfigured(t *testing.T) {
	reason := fmt.Errorf("%w: no calendar sources: /h/calendar.yaml does not exist; create it with, for example:\nsources: …", localsource.ErrNotConfigured)
	other := errors.New("disk on fire")
	for _, c := range []struct {
		name         string
		openErr      error
		unconfigured error
		want         string
		notBuilt     bool
	}{
		{"unconfigured, not built", calendar.ErrNoIndex, reason, "not configured: no calendar sources: /h/calendar.yaml does not exist", true},
		{"configured, not built", calendar.ErrNoIndex, nil, calendar.ErrNoIndex.Error(), true},
		{"unconfigured, other failure", other, reason, "disk on fire", false},
		{"unconfigured, opens", nil, reason, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			open := unbuiltBecauseUnconfigured(func(context.Context) (int, error) { return 7, c.openErr }, calendar.ErrNoIndex, func() error { return c.unconfigured })
			n, err := open(context.Background())
			if n != 7 {
				t.Errorf("service = %d, want the opener's 7", n)
			}
			if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if errors.Is(err, calendar.ErrNoIndex) != c.notBuilt {
				t.Errorf("errors.Is(err, ErrNoIndex) = %v, want %v", !c.notBuilt, c.notBuilt)
			}
		})
	}
}
