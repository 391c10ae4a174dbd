// Package trainwatch is the watch adapter for live Italian trains: it reads
// a trainRef's TrainSnapshot and turns transitions into train.* events
// (platform announced/confirmed/changed, departed, arrived, cancelled,
// delay and ETA changes, per-stop arrival and departure).
package trainwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/steward/connectors/trains"
	"github.com/agentstack/agentstack/steward/watch"
)

// Source is the watch source name.
const Source = "train"

// Event types.
const (
	PlatformAnnounced = "train.platform_announced"
	PlatformConfirmed = "train.platform_confirmed"
	PlatformChanged   = "train.platform_changed"
	Departed          = "train.departed"
	Arrived           = "train.arrived"
	Cancelled         = "train.cancelled"
	DelayChanged      = "train.delay_changed"
	ETAChanged        = "train.eta_changed"
	StopArrived       = "train.stop_arrived"
	StopDeparted      = "train.stop_departed"
)

// EventTypes lists every event the adapter emits.
var EventTypes = []string{PlatformAnnounced, PlatformConfirmed, PlatformChanged, Departed, Arrived, Cancelled,
	DelayChanged, ETAChanged, StopArrived, StopDeparted}

// Expiry defaults (spec: two hours after scheduled arrival, or departure;
// eight hours from creation when neither is known).
const (
	ExpiryAfterJourney = 2 * time.Hour
	ExpiryFallback     = 8 * time.Hour
)

// StatusSource refreshes a train; *trains.Service is one.
type StatusSource interface {
	Status(ctx context.Context, trainRef string) (*trains.Snapshot, error)
}

// Options configures the adapter.
type Options struct {
	Trains   StatusSource
	Language string // "en" (default) or "it"
}

// Adapter is the train watch adapter.
type Adapter struct{ opts Options }

// New returns the adapter.
func New(opts Options) *Adapter { return &Adapter{opts: opts} }

// Source implements watch.Adapter.
func (a *Adapter) Source() string { return Source }

// Snapshot implements watch.Adapter.
func (a *Adapter) Snapshot(ctx context.Context, ref string) (json.RawMessage, error) {
	if a.opts.Trains == nil {
		return nil, errors.New("the train connector is not available")
	}
	s, err := a.opts.Trains.Status(ctx, ref)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

func parse(b json.RawMessage) (*trains.Snapshot, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s trains.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("damaged train snapshot: %w", err)
	}
	return &s, nil
}

// Events implements watch.Adapter. Keys carry the state that makes a
// transition distinct (the platform value, the new delay, the stop and its
// actual time), so a repeated observation is never a new event.
func (a *Adapter) Events(prevRaw, curRaw json.RawMessage) ([]watch.Event, error) {
	prev, err := parse(prevRaw)
	if err != nil {
		return nil, err
	}
	cur, err := parse(curRaw)
	if err != nil || cur == nil {
		return nil, errors.New("damaged train snapshot")
	}
	if prev == nil {
		return nil, nil // the initial snapshot: only future transitions count
	}
	at := time.UnixMilli(cur.LastUpdatedMs)
	var out []watch.Event
	add := func(typ, key string, data map[string]any, fallback string) {
		d := a.common(cur)
		for k, v := range data {
			d[k] = v
		}
		out = append(out, watch.Event{Key: key, Type: typ, At: at, Data: d, Previous: prevRaw, Current: curRaw,
			FallbackText: fallback, Notification: &watch.Notification{Title: watch.Text{"": a.title(cur)}, Guidance: watch.Text{"": guidance}}})
	}
	t := a.texts()
	name := a.trainName(cur)

	if prev.Platform == "" && cur.Platform != "" {
		add(PlatformAnnounced, fmt.Sprintf("platform_announced:%s:%s", cur.Platform, cur.PlatformStatus),
			map[string]any{"programmedPlatform": cur.ProgrammedPlatform, "effectivePlatform": cur.EffectivePlatform},
			fmt.Sprintf(t.announced, name, cur.Platform, a.confidence(cur.PlatformStatus)))
	}
	if prev.EffectivePlatform == "" && cur.EffectivePlatform != "" {
		add(PlatformConfirmed, "platform_confirmed:"+cur.EffectivePlatform, nil, fmt.Sprintf(t.confirmed, name, cur.EffectivePlatform))
	}
	if prev.Platform != "" && cur.Platform != "" && prev.Platform != cur.Platform {
		add(PlatformChanged, fmt.Sprintf("platform_changed:%s:%s:%s", prev.Platform, cur.Platform, cur.PlatformStatus),
			map[string]any{"previousPlatform": prev.Platform, "newPlatform": cur.Platform},
			fmt.Sprintf(t.changed, name, prev.Platform, cur.Platform, a.confidence(cur.PlatformStatus)))
	}
	if !prev.Departed && cur.Departed {
		add(Departed, "departed", nil, fmt.Sprintf(t.departed, name, cur.From.Name, delayText(t, cur.DelayMinutes)))
	}
	if !prev.Arrived && cur.Arrived {
		add(Arrived, "arrived", nil, fmt.Sprintf(t.arrived, name, cur.To.Name))
	}
	if !prev.Cancelled && cur.Cancelled {
		add(Cancelled, "cancelled", nil, fmt.Sprintf(t.cancelled, name))
	}
	if prev.DelayMinutes != cur.DelayMinutes {
		add(DelayChanged, fmt.Sprintf("delay:%d->%d", prev.DelayMinutes, cur.DelayMinutes),
			map[string]any{"previousDelayMinutes": prev.DelayMinutes, "newDelayMinutes": cur.DelayMinutes},
			fmt.Sprintf(t.delay, name, delayText(t, cur.DelayMinutes)))
	}
	if prev.EstimatedArrivalMs != cur.EstimatedArrivalMs && cur.EstimatedArrivalMs != 0 {
		add(ETAChanged, fmt.Sprintf("eta:%d", cur.EstimatedArrivalMs),
			map[string]any{"previousEstimatedArrivalMs": prev.EstimatedArrivalMs, "previousEstimatedArrival": prev.EstimatedArrival},
			fmt.Sprintf(t.eta, name, cur.To.Name, cur.EstimatedArrival))
	}
	before := map[string]trains.Stop{}
	for _, s := range prev.Stops {
		before[s.ID] = s
	}
	for i, s := range cur.Stops {
		p, known := before[s.ID]
		stopData := func(actual int64, clock string) map[string]any {
			d := map[string]any{"station": s.Name, "stationId": s.ID, "stopIndex": s.Index,
				"positionRelativeToDestination": s.PositionRelativeToDestination, "actualMs": actual, "actual": clock,
				"isDestination": s.PositionRelativeToDestination == 0}
			if i+1 < len(cur.Stops) {
				n := cur.Stops[i+1]
				d["nextStop"] = map[string]any{"id": n.ID, "name": n.Name}
			}
			return d
		}
		if s.ActualArrivalMs != 0 && (!known || p.ActualArrivalMs == 0) {
			add(StopArrived, fmt.Sprintf("stop_arrived:%s:%d", s.ID, s.ActualArrivalMs), stopData(s.ActualArrivalMs, s.ActualArrival),
				fmt.Sprintf(t.stopArrived, name, s.Name, s.ActualArrival))
		}
		if s.ActualDepartureMs != 0 && (!known || p.ActualDepartureMs == 0) {
			add(StopDeparted, fmt.Sprintf("stop_departed:%s:%d", s.ID, s.ActualDepartureMs), stopData(s.ActualDepartureMs, s.ActualDeparture),
				fmt.Sprintf(t.stopDeparted, name, s.Name, s.ActualDeparture))
		}
	}
	return out, nil
}

const guidance = "Say what happened to the train in one short sentence. A platform whose platformStatus is \"scheduled\" is only programmed: never present it as confirmed."

// common is the data every train event exposes.
func (a *Adapter) common(s *trains.Snapshot) map[string]any {
	return map[string]any{
		"trainNumber": s.Train.Number, "train": a.trainName(s), "from": s.From.Name, "to": s.To.Name,
		"delayMinutes": s.DelayMinutes, "platform": s.Platform, "platformStatus": s.PlatformStatus,
		"scheduledDeparture": s.ScheduledDeparture, "estimatedDeparture": s.EstimatedDeparture,
		"scheduledArrival": s.ScheduledArrival, "estimatedArrival": s.EstimatedArrival, "estimatedArrivalMs": s.EstimatedArrivalMs,
		"cancelled": s.Cancelled, "departed": s.Departed, "arrived": s.Arrived, "lastUpdated": s.LastUpdated,
	}
}

func (a *Adapter) trainName(s *trains.Snapshot) string {
	if l := strings.TrimSpace(s.Train.Label); l != "" {
		return l
	}
	return fmt.Sprintf("%d", s.Train.Number)
}

func (a *Adapter) title(s *trains.Snapshot) string {
	if a.opts.Language == "it" {
		return "Treno " + a.trainName(s)
	}
	return "Train " + a.trainName(s)
}

func (a *Adapter) confidence(status string) string {
	t := a.texts()
	switch status {
	case trains.PlatformConfirmed:
		return t.confirmedWord
	case trains.PlatformScheduled:
		return t.scheduledWord
	}
	return ""
}

type texts struct {
	announced, confirmed, changed, departed, arrived, cancelled, delay, eta, stopArrived, stopDeparted string
	confirmedWord, scheduledWord, onTime, late                                                         string
}

var textsByLang = map[string]texts{
	"en": {
		announced: "%s: platform %s %s.", confirmed: "%s: platform %s is confirmed.", changed: "%s: platform changed from %s to %s %s.",
		departed: "%s has left %s%s.", arrived: "%s has arrived at %s.", cancelled: "%s is cancelled.", delay: "%s%s.",
		eta: "%s: now expected at %s at %s.", stopArrived: "%s has arrived at %s (%s).", stopDeparted: "%s has left %s (%s).",
		confirmedWord: "(confirmed)", scheduledWord: "(scheduled, not yet confirmed)", onTime: "on time", late: "%d min late",
	},
	"it": {
		announced: "%s: binario %s %s.", confirmed: "%s: binario %s confermato.", changed: "%s: binario cambiato da %s a %s %s.",
		departed: "%s è partito da %s%s.", arrived: "%s è arrivato a %s.", cancelled: "%s è stato soppresso.", delay: "%s%s.",
		eta: "%s: arrivo previsto a %s alle %s.", stopArrived: "%s è arrivato a %s (%s).", stopDeparted: "%s è partito da %s (%s).",
		confirmedWord: "(confermato)", scheduledWord: "(programmato, non ancora confermato)", onTime: "in orario", late: "%d min di ritardo",
	},
}

func (a *Adapter) texts() texts {
	if t, ok := textsByLang[a.opts.Language]; ok {
		return t
	}
	return textsByLang["en"]
}

func delayText(t texts, d int) string {
	if d <= 0 {
		return ", " + t.onTime
	}
	return ", " + fmt.Sprintf(t.late, d)
}

// DefaultExpiry implements watch.Adapter.
func (a *Adapter) DefaultExpiry(snap json.RawMessage, created time.Time) time.Time {
	s, err := parse(snap)
	switch {
	case err != nil || s == nil:
	case s.ScheduledArrivalMs != 0:
		return time.UnixMilli(s.ScheduledArrivalMs).Add(ExpiryAfterJourney)
	case s.ScheduledDepartureMs != 0:
		return time.UnixMilli(s.ScheduledDepartureMs).Add(ExpiryAfterJourney)
	}
	return created.Add(ExpiryFallback)
}

// IsTerminal implements watch.Adapter: cancellation, or arrival at the final
// stop of the run (not merely the requested destination).
func (a *Adapter) IsTerminal(snap json.RawMessage) bool {
	s, err := parse(snap)
	return err == nil && s != nil && (s.Cancelled || s.RunArrived)
}

// PollWithin implements watch.Urgency: near a departure, an arrival or the
// next stop, poll faster.
func (a *Adapter) PollWithin(snap json.RawMessage, now time.Time) time.Duration {
	s, err := parse(snap)
	if err != nil || s == nil {
		return 0
	}
	var next time.Duration = -1
	consider := func(ms int64) {
		if ms == 0 {
			return
		}
		if d := time.UnixMilli(ms).Sub(now); d > -5*time.Minute && (next < 0 || d < next) {
			next = max(d, 0)
		}
	}
	if !s.Departed {
		consider(s.EstimatedDepartureMs)
	}
	if !s.Arrived {
		consider(s.EstimatedArrivalMs)
		for _, st := range s.Stops {
			if st.Index > s.From.Index && st.Index <= s.To.Index && st.ActualArrivalMs == 0 {
				consider(st.ScheduledArrivalMs + int64(s.DelayMinutes)*60_000)
				break
			}
		}
	}
	switch {
	case next < 0:
		return 0
	case next <= 2*time.Minute:
		return watch.MinUrgentInterval
	case next <= 10*time.Minute:
		return 15 * time.Second
	}
	return 0
}

// CheckRules implements watch.RuleChecker: known events only; stop rules need
// a selector, which is validated against the current route (named stops are
// normalised to the route's spelling so equality matching works).
func (a *Adapter) CheckRules(rules []watch.Rule, snap json.RawMessage) ([]watch.Rule, error) {
	s, err := parse(snap)
	if err != nil || s == nil {
		return nil, errors.New("no train state to check the rules against")
	}
	known := map[string]bool{}
	for _, t := range EventTypes {
		known[t] = true
	}
	out := make([]watch.Rule, len(rules))
	for i, r := range rules {
		out[i] = r
		if r.Event == "" {
			continue
		}
		if !known[r.Event] {
			return nil, fmt.Errorf("rule %q: unknown train event %q (known: %s)", r.ID, r.Event, strings.Join(EventTypes, ", "))
		}
		if r.Event != StopArrived && r.Event != StopDeparted {
			continue
		}
		where := map[string]any{}
		for k, v := range r.Where {
			where[k] = v
		}
		station, hasStation := where["station"]
		stationID, hasID := where["stationId"]
		pos, hasPos := where["positionRelativeToDestination"]
		if !hasStation && !hasID && !hasPos {
			return nil, fmt.Errorf("rule %q: %s needs where.station, where.stationId or where.positionRelativeToDestination; "+
				"for every stop add one rule per stop", r.ID, r.Event)
		}
		if hasStation {
			name, _ := station.(string)
			stop, ok := findStop(s, name)
			if !ok {
				return nil, fmt.Errorf("rule %q: %q is not a stop of this train (stops: %s)", r.ID, name, stopNames(s))
			}
			where["station"] = stop.Name
		}
		if hasID {
			id, _ := stationID.(string)
			found := false
			for _, st := range s.Stops {
				found = found || st.ID == id
			}
			if !found {
				return nil, fmt.Errorf("rule %q: station id %q is not on this train's route", r.ID, id)
			}
		}
		if hasPos {
			p, ok := pos.(float64)
			if !ok || p != float64(int(p)) {
				return nil, fmt.Errorf("rule %q: positionRelativeToDestination must be a whole number (-1 is the stop before the destination)", r.ID)
			}
			if idx := s.To.Index + int(p); idx < 0 || idx >= len(s.Stops) {
				return nil, fmt.Errorf("rule %q: there is no stop at position %d relative to %s", r.ID, int(p), s.To.Name)
			}
		}
		out[i].Where = where
	}
	return out, nil
}

func findStop(s *trains.Snapshot, name string) (trains.Stop, bool) {
	want := strings.Join(search.Terms(name), " ")
	for _, st := range s.Stops {
		if strings.Join(search.Terms(st.Name), " ") == want {
			return st, true
		}
	}
	return trains.Stop{}, false
}

func stopNames(s *trains.Snapshot) string {
	names := make([]string, len(s.Stops))
	for i, st := range s.Stops {
		names[i] = st.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
