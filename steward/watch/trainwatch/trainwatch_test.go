package trainwatch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/trains"
	"github.com/agentstack/agentstack/steward/watch"
)

const fixtures = "../../../../shared/fixtures/viaggiatreno/viaggiatreno_ha-tests"

var (
	now = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	seg = trains.Segment{FromID: "S01765", FromName: "COMO LAGO", ToID: "S01066", ToName: "MILANO CADORNA"}
)

// recorded normalises a real andamentoTreno response of REG 136 Como Lago →
// Milano Cadorna: "notStarted" before departure, "running" near Milano Bovisa.
func recorded(t *testing.T, which string) *trains.Snapshot {
	t.Helper()
	file := map[string]string{
		"notStarted": "andamentoTreno_S01765_136_1767394800000.json",
		"running":    "andamentoTreno_S01765_136_1767308400000.json",
	}[which]
	b, err := os.ReadFile(filepath.Join(fixtures, file))
	if os.IsNotExist(err) {
		t.Skipf("fixture %s is absent", file)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := trains.ParseStatus(b, seg, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func raw(s *trains.Snapshot) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func TestEventsFromRecordedTransition(t *testing.T) {
	a := New(Options{Language: "it"})
	prev, cur := recorded(t, "notStarted"), recorded(t, "running")
	events, err := a.Events(raw(prev), raw(cur))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	byType := map[string]watch.Event{}
	keys := map[string]bool{}
	for _, e := range events {
		count[e.Type]++
		byType[e.Type] = e
		if keys[e.Key] {
			t.Errorf("duplicate key %s", e.Key)
		}
		keys[e.Key] = true
		if e.FallbackText == "" || e.Notification == nil {
			t.Errorf("%s lacks fallback or wording", e.Type)
		}
	}
	want := map[string]int{PlatformAnnounced: 1, PlatformConfirmed: 1, Departed: 1, DelayChanged: 1, ETAChanged: 1, StopArrived: 12, StopDeparted: 12}
	for typ, n := range want {
		if count[typ] != n {
			t.Errorf("%s: %d events, want %d", typ, count[typ], n)
		}
	}
	if count[Arrived]+count[Cancelled]+count[PlatformChanged] != 0 {
		t.Errorf("unexpected events %v", count)
	}
	if e := byType[PlatformConfirmed]; e.Key != "platform_confirmed:1" || e.FallbackText != "REG 136: binario 1 confermato." {
		t.Errorf("platform_confirmed %q %q", e.Key, e.FallbackText)
	}
	if e := byType[DelayChanged]; e.Key != "delay:0->5" || e.Data["newDelayMinutes"] != 5 {
		t.Errorf("delay_changed %q %v", e.Key, e.Data)
	}
	// The last stop event: Milano Bovisa, two stops before the destination.
	var bovisa *watch.Event
	for i := range events {
		if events[i].Type == StopArrived && events[i].Data["stationId"] == "S01642" {
			bovisa = &events[i]
		}
	}
	if bovisa == nil || bovisa.Data["positionRelativeToDestination"] != -2 || bovisa.Data["nextStop"].(map[string]any)["id"] != "S01067" {
		t.Fatalf("Bovisa arrival %+v", bovisa)
	}
	// Stable keys: the same observation yields the same keys; none at all
	// without change.
	again, _ := a.Events(raw(prev), raw(cur))
	if len(again) != len(events) || again[0].Key != events[0].Key {
		t.Error("events are not deterministic")
	}
	if none, err := a.Events(raw(cur), raw(cur)); err != nil || len(none) != 0 {
		t.Errorf("%d events without change (%v)", len(none), err)
	}
	if first, err := a.Events(nil, raw(cur)); err != nil || len(first) != 0 {
		t.Errorf("the initial snapshot produced %d events (%v)", len(first), err)
	}
}

func TestPlatformChangeArrivalCancellation(t *testing.T) {
	a := New(Options{})
	base := recorded(t, "running")
	changed := *base
	changed.Platform, changed.EffectivePlatform = "3", "3"
	ev, _ := a.Events(raw(base), raw(&changed))
	if len(ev) != 1 || ev[0].Type != PlatformChanged || ev[0].Key != "platform_changed:1:3:confirmed" ||
		ev[0].Data["previousPlatform"] != "1" || ev[0].Data["newPlatform"] != "3" {
		t.Fatalf("platform change %+v", ev)
	}
	arrived := *base
	arrived.Arrived, arrived.RunArrived = true, true
	ev, _ = a.Events(raw(base), raw(&arrived))
	if len(ev) != 1 || ev[0].Type != Arrived || !a.IsTerminal(raw(&arrived)) {
		t.Fatalf("arrival %+v terminal %v", ev, a.IsTerminal(raw(&arrived)))
	}
	// Arriving at the requested destination is not the end of the run.
	atDestination := *base
	atDestination.Arrived = true
	if a.IsTerminal(raw(&atDestination)) {
		t.Error("arrival at the requested destination ended the watch")
	}
	cancelled := *base
	cancelled.Cancelled = true
	ev, _ = a.Events(raw(base), raw(&cancelled))
	if len(ev) != 1 || ev[0].Type != Cancelled || !a.IsTerminal(raw(&cancelled)) {
		t.Fatalf("cancellation %+v", ev)
	}
}

func TestCheckRules(t *testing.T) {
	a := New(Options{})
	snap := raw(recorded(t, "notStarted"))
	rules, err := a.CheckRules([]watch.Rule{
		{ID: "penultimate", Event: StopArrived, Where: map[string]any{"positionRelativeToDestination": -1.0}},
		{ID: "saronno", Event: StopDeparted, Where: map[string]any{"station": "saronno"}},
		{ID: "by-id", Event: StopArrived, Where: map[string]any{"stationId": "S01642"}},
		{ID: "departed", Event: Departed},
		{ID: "eta", Trigger: &watch.Trigger{Kind: watch.TriggerBeforeTime, Field: "estimatedArrivalMs", Minutes: 30}},
	}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if rules[1].Where["station"] != "SARONNO" {
		t.Errorf("named stop not normalised to the route's spelling: %v", rules[1].Where)
	}
	for _, tc := range []struct {
		rule watch.Rule
		want string
	}{
		{watch.Rule{ID: "all", Event: StopArrived}, "needs where.station"},
		{watch.Rule{ID: "x", Event: StopArrived, Where: map[string]any{"station": "Torino"}}, "not a stop of this train"},
		{watch.Rule{ID: "x", Event: StopArrived, Where: map[string]any{"stationId": "S99999"}}, "not on this train's route"},
		{watch.Rule{ID: "x", Event: StopArrived, Where: map[string]any{"positionRelativeToDestination": 1.0}}, "no stop at position 1"},
		{watch.Rule{ID: "x", Event: StopArrived, Where: map[string]any{"positionRelativeToDestination": -0.5}}, "whole number"},
		{watch.Rule{ID: "x", Event: "train.teleported"}, "unknown train event"},
	} {
		if _, err := a.CheckRules([]watch.Rule{tc.rule}, snap); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.rule, err, tc.want)
		}
	}
}

func TestExpiryAndUrgency(t *testing.T) {
	a := New(Options{})
	s := recorded(t, "notStarted")
	if got := a.DefaultExpiry(raw(s), now); !got.Equal(time.UnixMilli(s.ScheduledArrivalMs).Add(2 * time.Hour)) {
		t.Errorf("expiry %v", got)
	}
	noTimes := *s
	noTimes.ScheduledArrivalMs, noTimes.ScheduledDepartureMs = 0, 0
	if got := a.DefaultExpiry(raw(&noTimes), now); !got.Equal(now.Add(8 * time.Hour)) {
		t.Errorf("fallback expiry %v", got)
	}
	dep := time.UnixMilli(s.EstimatedDepartureMs)
	for _, tc := range []struct {
		at   time.Time
		want time.Duration
	}{
		{dep.Add(-time.Hour), 0},
		{dep.Add(-8 * time.Minute), 15 * time.Second},
		{dep.Add(-time.Minute), watch.MinUrgentInterval},
	} {
		if got := a.PollWithin(raw(s), tc.at); got != tc.want {
			t.Errorf("%v before departure: %v, want %v", dep.Sub(tc.at), got, tc.want)
		}
	}
}

// fakeTrains replays snapshots for a trainRef.
type fakeTrains struct {
	mu   sync.Mutex
	snap *trains.Snapshot
}

func (f *fakeTrains) Status(context.Context, string) (*trains.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := *f.snap
	return &c, nil
}

type deliverer struct {
	mu    sync.Mutex
	turns []watch.Turn
}

func (d *deliverer) DeliverWatchTurn(_ context.Context, t watch.Turn) (watch.Delivered, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.turns = append(d.turns, t)
	return watch.Delivered{ChatID: t.ChatID, Text: "ok " + t.EventID}, nil
}

// TestThroughEngine: the real adapter in the generic engine — the
// penultimate-stop rule and the departure rule each fire once.
func TestThroughEngine(t *testing.T) {
	src := &fakeTrains{snap: recorded(t, "notStarted")}
	d := &deliverer{}
	clock := now
	e, err := watch.Open(context.Background(), watch.Options{Path: filepath.Join(t.TempDir(), "watches.db"),
		Adapters: []watch.Adapter{New(Options{Trains: src})}, Deliverer: d, Clock: clockFunc(func() time.Time { return clock })})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Create(context.Background(), watch.CreateRequest{Source: Source, ResourceRef: "vt1_x", ChatID: "chat_1",
		Instruction: "Avvisami alla partenza e alla penultima fermata", Rules: []watch.Rule{
			{ID: "departed", Event: Departed, Once: true},
			{ID: "bovisa", Event: StopArrived, Where: map[string]any{"station": "milano bovisa politecnico"}, Once: true},
			{ID: "penultimate", Event: StopArrived, Where: map[string]any{"positionRelativeToDestination": -1}, Once: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	src.snap = recorded(t, "running")
	src.mu.Unlock()
	clock = clock.Add(time.Minute)
	c, err := e.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// departed and the Bovisa arrival match; Milano Domodossola (-1) is not reached yet.
	if c.Queued != 2 || c.Delivered != 2 {
		t.Fatalf("cycle %+v", c)
	}
	var rules []string
	for _, turn := range d.turns {
		for _, id := range []string{"departed", "bovisa", "penultimate"} {
			if strings.Contains(turn.Prompt, `"`+id+`" (`) {
				rules = append(rules, id)
			}
		}
	}
	sort.Strings(rules)
	if strings.Join(rules, ",") != "bovisa,departed" {
		t.Errorf("rules delivered %v", rules)
	}
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time                         { return f() }
func (f clockFunc) After(d time.Duration) <-chan time.Time { return time.After(d) }
