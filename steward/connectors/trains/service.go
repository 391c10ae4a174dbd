package trains

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Direct-train search bounds.
const (
	staleRow       = 2 * time.Minute // board rows older than this are dropped
	maxCandidates  = 10              // board rows whose runs are checked
	trainRefPrefix = "vt1_"
)

// Find statuses beyond the resolver's.
const (
	StatusFound         = "found"
	StatusNoDirectTrain = "no_direct_train"
)

// Options configures a Service.
type Options struct {
	Client *Client
	// Now defaults to time.Now.
	Now func() time.Time
}

// Service answers the train tools: direct-train search and status refresh.
type Service struct {
	client   *Client
	resolver *Resolver
	now      func() time.Time
}

// NewService returns a service over opts.Client.
func NewService(opts Options) *Service {
	if opts.Client == nil {
		opts.Client = NewClient(ClientOptions{})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{client: opts.Client, resolver: NewResolver(opts.Client), now: opts.Now}
}

// Resolver returns the station resolver.
func (s *Service) Resolver() *Resolver { return s.resolver }

// Ref is the decoded content of a trainRef: enough to find the same run of
// the same service day and recompute the requested segment.
type Ref struct {
	V            int    `json:"v"`
	Number       int64  `json:"n"`
	OriginID     string `json:"o"`
	ServiceDayMs int64  `json:"d"`
	FromID       string `json:"f"`
	FromName     string `json:"fn"`
	ToID         string `json:"t"`
	ToName       string `json:"tn"`
}

// EncodeRef returns the opaque trainRef: "vt1_" + base64url(JSON). It is not
// a secret or an authorisation, only a stable handle.
func EncodeRef(r Ref) string {
	r.V = 1
	b, _ := json.Marshal(r)
	return trainRefPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// DecodeRef parses a trainRef.
func DecodeRef(ref string) (Ref, error) {
	var r Ref
	body, ok := strings.CutPrefix(strings.TrimSpace(ref), trainRefPrefix)
	if !ok || len(body) > 2048 {
		return r, errors.New("trainRef must be the vt1_… value returned by find_next_train")
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(body, "="))
	if err != nil {
		return r, errors.New("trainRef is damaged (not base64url); use the value returned by find_next_train")
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, errors.New("trainRef is damaged (not the expected JSON); use the value returned by find_next_train")
	}
	switch {
	case r.V != 1:
		return r, fmt.Errorf("trainRef version %d is not supported", r.V)
	case r.Number <= 0 || !validStationID(r.OriginID) || !validStationID(r.FromID) || !validStationID(r.ToID) || r.ServiceDayMs <= 0:
		return r, errors.New("trainRef is incomplete; use the value returned by find_next_train")
	}
	return r, nil
}

func validStationID(id string) bool {
	if len(id) < 2 || len(id) > 12 {
		return false
	}
	for _, c := range id {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// FindResult is find_next_train's answer.
type FindResult struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind string `json:"kind"`
	// Status is found, ambiguous_station, station_not_found or no_direct_train.
	Status string `json:"status"`
	// Field names the ambiguous or unknown station (from or to).
	Field      string      `json:"field,omitempty"`
	Query      string      `json:"query,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
	From       *Station    `json:"from,omitempty"`
	To         *Station    `json:"to,omitempty"`
	Train      *Snapshot   `json:"train,omitempty"`
	Checked    int         `json:"checkedCandidates,omitempty"`
	Message    string      `json:"message"`
}

// FindNextTrain resolves both stations, reads the departure board at
// departureAfter (default now), drops rows older than two minutes, checks the
// first ten runs concurrently and returns the earliest scheduled one that
// stops at the destination after the departure. No match is reported
// explicitly; no route with changes is ever synthesised.
func (s *Service) FindNextTrain(ctx context.Context, from, to string, departureAfter time.Time) (*FindResult, error) {
	var fromRes, toRes *Resolution
	var fromErr, toErr error
	var wg sync.WaitGroup
	wg.Go(func() { fromRes, fromErr = s.resolver.Resolve(ctx, from) })
	wg.Go(func() { toRes, toErr = s.resolver.Resolve(ctx, to) })
	wg.Wait()
	if fromErr != nil {
		return nil, fmt.Errorf("departure station: %w", fromErr)
	}
	if toErr != nil {
		return nil, fmt.Errorf("destination station: %w", toErr)
	}
	for _, x := range []struct {
		field string
		res   *Resolution
	}{{"from", fromRes}, {"to", toRes}} {
		switch x.res.Status {
		case StatusAmbiguous:
			msg := fmt.Sprintf("%q matches several stations; ask the user which one they mean.", x.res.Query)
			if len(x.res.Candidates) == 1 {
				msg = fmt.Sprintf("%q only loosely matches %s; ask the user to confirm.", x.res.Query, x.res.Candidates[0].Name)
			}
			return &FindResult{Status: StatusAmbiguous, Field: x.field, Query: x.res.Query, Candidates: x.res.Candidates, Message: msg}, nil
		case StatusNotFound:
			return &FindResult{Status: StatusNotFound, Field: x.field, Query: x.res.Query,
				Message: fmt.Sprintf("No station matches %q; ask the user to spell it differently.", x.res.Query)}, nil
		}
	}
	fs, ts := fromRes.Station, toRes.Station
	if fs.ID == ts.ID {
		return nil, fmt.Errorf("departure and destination are the same station (%s)", fs.Name)
	}
	now := s.now()
	after := departureAfter
	if after.IsZero() {
		after = now
	}
	rows, err := s.client.departures(ctx, fs.ID, after)
	if errors.Is(err, ErrNoLiveData) {
		return nil, fmt.Errorf("ViaggiaTreno has no live departure board for %s at %s", fs.Name, clock(after.UnixMilli()))
	}
	if err != nil {
		return nil, fmt.Errorf("departure board of %s: %w", fs.Name, err)
	}
	cutoff := after.Add(-staleRow).UnixMilli()
	var fresh []rawRun
	for _, r := range rows {
		if r.OrarioPartenza.Valid && r.OrarioPartenza.V >= cutoff && r.NumeroTreno.Valid {
			fresh = append(fresh, r)
		}
	}
	sort.SliceStable(fresh, func(a, b int) bool { return fresh[a].OrarioPartenza.V < fresh[b].OrarioPartenza.V })
	fresh = fresh[:min(len(fresh), maxCandidates)]

	seg := Segment{FromID: fs.ID, FromName: fs.Name, ToID: ts.ID, ToName: ts.Name}
	snaps := make([]*Snapshot, len(fresh))
	errs := make([]error, len(fresh))
	for i := range fresh {
		wg.Go(func() {
			row := &fresh[i]
			origin := firstString(row.CodOrigine, row.IDOrigine)
			if origin == "" {
				origin = fs.ID
			}
			run, err := s.client.run(ctx, origin, row.NumeroTreno.V, row.DataPartenzaTreno.V)
			if err != nil {
				errs[i] = err
				return
			}
			snap, err := normalize(run, row, seg, now)
			if err != nil {
				var nr *ErrNotOnRoute
				if !errors.As(err, &nr) {
					errs[i] = err
				}
				return
			}
			snap.TrainRef = EncodeRef(Ref{Number: snap.Train.Number, OriginID: origin, ServiceDayMs: firstNonZero(snap.Train.ServiceDayMs, row.DataPartenzaTreno.V),
				FromID: fs.ID, FromName: fs.Name, ToID: ts.ID, ToName: ts.Name})
			snaps[i] = snap
		})
	}
	wg.Wait()
	var best *Snapshot
	for _, sn := range snaps {
		if sn != nil && (best == nil || sn.ScheduledDepartureMs < best.ScheduledDepartureMs) {
			best = sn
		}
	}
	res := &FindResult{From: fs, To: ts, Checked: len(fresh)}
	if best != nil {
		res.Status, res.Train = StatusFound, best
		res.Message = describe(best)
		return res, nil
	}
	failed := 0
	for _, e := range errs {
		if e != nil {
			failed++
		}
	}
	if failed > 0 && failed == len(fresh) {
		return nil, fmt.Errorf("could not read any of the %d candidate trains: %w", failed, errors.Join(errs...))
	}
	res.Status = StatusNoDirectTrain
	res.Message = fmt.Sprintf("No direct train from %s to %s among the next %d departures after %s. This tool does not plan journeys with changes.",
		fs.Name, ts.Name, len(fresh), clock(after.UnixMilli()))
	return res, nil
}

func firstNonZero(v ...int64) int64 {
	for _, x := range v {
		if x != 0 {
			return x
		}
	}
	return 0
}

// Status refreshes the train of trainRef for its requested segment.
func (s *Service) Status(ctx context.Context, trainRef string) (*Snapshot, error) {
	ref, err := DecodeRef(trainRef)
	if err != nil {
		return nil, err
	}
	run, err := s.client.run(ctx, ref.OriginID, ref.Number, ref.ServiceDayMs)
	if errors.Is(err, ErrNoLiveData) {
		return nil, fmt.Errorf("ViaggiaTreno has no live data for train %d today", ref.Number)
	}
	if err != nil {
		return nil, fmt.Errorf("status of train %d: %w", ref.Number, err)
	}
	snap, err := normalize(run, nil, Segment{FromID: ref.FromID, FromName: ref.FromName, ToID: ref.ToID, ToName: ref.ToName}, s.now())
	if err != nil {
		return nil, err
	}
	snap.TrainRef = trainRef
	return snap, nil
}

// describe is a one-line summary for the model, honest about platform confidence.
func describe(s *Snapshot) string {
	var b strings.Builder
	label := s.Train.Label
	if label == "" {
		label = fmt.Sprintf("train %d", s.Train.Number)
	}
	fmt.Fprintf(&b, "%s from %s at %s", label, s.From.Name, s.ScheduledDeparture)
	if s.DelayMinutes != 0 {
		fmt.Fprintf(&b, " (delay %d min, expected %s)", s.DelayMinutes, s.EstimatedDeparture)
	}
	if s.ScheduledArrival != "" {
		fmt.Fprintf(&b, ", arriving at %s at %s", s.To.Name, s.EstimatedArrival)
	}
	switch s.PlatformStatus {
	case PlatformConfirmed:
		fmt.Fprintf(&b, "; platform %s (confirmed)", s.Platform)
	case PlatformScheduled:
		fmt.Fprintf(&b, "; platform %s (scheduled only, not yet confirmed)", s.Platform)
	default:
		b.WriteString("; platform not yet communicated")
	}
	if s.Cancelled {
		b.WriteString("; CANCELLED")
	}
	b.WriteString(".")
	return b.String()
}
