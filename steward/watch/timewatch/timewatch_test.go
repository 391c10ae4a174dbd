package timewatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/watch"
)

var (
	rome = mustLoad("Europe/Rome")
	now  = time.Date(2026, 3, 28, 8, 0, 0, 0, time.UTC) // the day before the switch to summer time
)

func mustLoad(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

func TestPrepareRef(t *testing.T) {
	a := New(Options{Location: rome})
	tests := []struct {
		ref, want, err string
	}{
		{"afterMinutes=30", "2026-03-28T08:30:00Z", ""},
		{"2026-03-28T10:00:00+01:00", "2026-03-28T09:00:00Z", ""},
		{"2026-03-29T09:00:00+02:00", "2026-03-29T07:00:00Z", ""},
		{"2026-03-28T10:00:00", "", "explicit offset"},
		{"tomorrow at 9", "", "explicit offset"},
		{"2026-03-28T07:00:00Z", "", "already past"},
		{"afterMinutes=0", "", "between 0 and 10080"},
		{"afterMinutes=x", "", "between 0 and 10080"},
	}
	for _, tc := range tests {
		got, err := a.PrepareRef(tc.ref, now)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.ref, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.ref, got, err, tc.want)
		}
	}
}

func TestReachedOnceAndLocalRendering(t *testing.T) {
	clock := now
	a := New(Options{Location: rome, Now: func() time.Time { return clock }, Language: "it"})
	before, err := a.Snapshot(context.Background(), "2026-03-29T07:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	json.Unmarshal(before, &s)
	// The date-specific offset: summer time starts on 29 March.
	if s.AtLocal != "2026-03-29T09:00:00+02:00" || s.Reached {
		t.Errorf("snapshot %+v", s)
	}
	if a.IsTerminal(before) {
		t.Error("terminal before the time")
	}
	if d := a.PollWithin(before, clock); d != 23*time.Hour {
		t.Errorf("poll within %v", d)
	}
	clock = time.Date(2026, 3, 29, 7, 0, 1, 0, time.UTC)
	after, _ := a.Snapshot(context.Background(), "2026-03-29T07:00:00Z")
	ev, err := a.Events(before, after)
	if err != nil || len(ev) != 1 || ev[0].Type != EventReached || ev[0].FallbackText != "Sono le 09:00: ecco il promemoria." {
		t.Fatalf("events %+v %v", ev, err)
	}
	if again, err := a.Events(after, after); err != nil || len(again) != 0 {
		t.Errorf("time.reached twice: %d events (%v)", len(again), err)
	}
	if !a.IsTerminal(after) {
		t.Error("a reached time is not terminal")
	}
	if exp := a.DefaultExpiry(after, now); !exp.Equal(time.Date(2026, 3, 29, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("expiry %v", exp)
	}
	if _, err := a.CheckRules([]watch.Rule{{ID: "x", Event: "train.departed"}}, after); err == nil {
		t.Error("a train event was accepted on a time watch")
	}
}
