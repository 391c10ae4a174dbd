package trains

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // Europe/Rome must be available on every machine
)

// SourceName is every snapshot's provenance.
const SourceName = "ViaggiaTreno"

// Platform confidence.
const (
	PlatformConfirmed = "confirmed" // an effective platform was published
	PlatformScheduled = "scheduled" // only the programmed platform is known
	PlatformUnknown   = "unknown"   // none has been communicated
)

// rome is where train times are displayed, whatever the machine's zone.
var rome = mustLoad("Europe/Rome")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // time/tzdata is embedded: unreachable
	}
	return loc
}

// Snapshot is the normalised state of one train for a requested segment: the
// TrainSnapshot contract shared by find_next_train, train_status and the
// train watch adapter. Missing values are omitted, never invented; *Ms fields
// are Unix milliseconds and the matching string fields show the same instant
// as HH:MM in Europe/Rome.
type Snapshot struct {
	Source        string `json:"source"`
	LastUpdated   string `json:"lastUpdated"`
	LastUpdatedMs int64  `json:"lastUpdatedMs"`
	TrainRef      string `json:"trainRef,omitempty"`

	Train TrainInfo `json:"train"`
	From  Endpoint  `json:"from"`
	To    Endpoint  `json:"to"`

	ScheduledDepartureMs int64  `json:"scheduledDepartureMs,omitempty"`
	ScheduledDeparture   string `json:"scheduledDeparture,omitempty"`
	EstimatedDepartureMs int64  `json:"estimatedDepartureMs,omitempty"`
	EstimatedDeparture   string `json:"estimatedDeparture,omitempty"`
	ActualDepartureMs    int64  `json:"actualDepartureMs,omitempty"`
	ScheduledArrivalMs   int64  `json:"scheduledArrivalMs,omitempty"`
	ScheduledArrival     string `json:"scheduledArrival,omitempty"`
	EstimatedArrivalMs   int64  `json:"estimatedArrivalMs,omitempty"`
	EstimatedArrival     string `json:"estimatedArrival,omitempty"`
	ActualArrivalMs      int64  `json:"actualArrivalMs,omitempty"`

	DelayMinutes int `json:"delayMinutes"`

	// Platform is the departure platform to show: the effective one when
	// published, otherwise the programmed one. PlatformStatus says which.
	Platform                  string `json:"platform,omitempty"`
	PlatformStatus            string `json:"platformStatus"`
	ProgrammedPlatform        string `json:"programmedPlatform,omitempty"`
	EffectivePlatform         string `json:"effectivePlatform,omitempty"`
	ArrivalProgrammedPlatform string `json:"arrivalProgrammedPlatform,omitempty"`
	ArrivalEffectivePlatform  string `json:"arrivalEffectivePlatform,omitempty"`

	Cancelled bool `json:"cancelled"`
	Departed  bool `json:"departed"`
	Arrived   bool `json:"arrived"`
	// RunArrived says the train reached the final stop of its run (not merely
	// the requested destination).
	RunArrived bool `json:"runArrived"`

	LastDetection *Detection `json:"lastDetection,omitempty"`
	Stops         []Stop     `json:"stops"`
}

// TrainInfo identifies the run: number + origin + service day are unique.
type TrainInfo struct {
	Number          int64  `json:"number"`
	Category        string `json:"category,omitempty"`
	Label           string `json:"label,omitempty"`
	OriginID        string `json:"originId"`
	OriginName      string `json:"originName,omitempty"`
	DestinationID   string `json:"destinationId,omitempty"`
	DestinationName string `json:"destinationName,omitempty"`
	ServiceDayMs    int64  `json:"serviceDayMs"`
	ServiceDay      string `json:"serviceDay,omitempty"`
}

// Endpoint is the requested departure or destination stop.
type Endpoint struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Index int    `json:"index"`
}

// Detection is ViaggiaTreno's last reported position of the train.
type Detection struct {
	Station string `json:"station"`
	AtMs    int64  `json:"atMs,omitempty"`
	At      string `json:"at,omitempty"`
}

// Stop is one stop of the run.
type Stop struct {
	Index                int    `json:"index"`
	ID                   string `json:"id"`
	Name                 string `json:"name"`
	ScheduledArrivalMs   int64  `json:"scheduledArrivalMs,omitempty"`
	ScheduledArrival     string `json:"scheduledArrival,omitempty"`
	ScheduledDepartureMs int64  `json:"scheduledDepartureMs,omitempty"`
	ScheduledDeparture   string `json:"scheduledDeparture,omitempty"`
	ActualArrivalMs      int64  `json:"actualArrivalMs,omitempty"`
	ActualArrival        string `json:"actualArrival,omitempty"`
	ActualDepartureMs    int64  `json:"actualDepartureMs,omitempty"`
	ActualDeparture      string `json:"actualDeparture,omitempty"`
	Cancelled            bool   `json:"cancelled"`
	// PositionRelativeToDestination is stopIndex - toIndex: -1 is the stop
	// before the requested destination, 0 the destination itself.
	PositionRelativeToDestination int `json:"positionRelativeToDestination"`
}

// Segment is the requested part of a run.
type Segment struct {
	FromID, FromName string
	ToID, ToName     string
}

// clock formats ms as HH:MM in Europe/Rome; 0 is "".
func clock(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).In(rome).Format("15:04")
}

func first(vals ...flexInt) int64 {
	for _, v := range vals {
		if v.Valid && v.V > 0 {
			return v.V
		}
	}
	return 0
}

// ErrNotOnRoute reports a requested station the run does not serve in order.
type ErrNotOnRoute struct{ Msg string }

func (e *ErrNotOnRoute) Error() string { return e.Msg }

// normalize collapses an andamentoTreno response (plus the departure-board
// row it was found through, when there is one) into a Snapshot for seg.
func normalize(run *rawRun, board *rawRun, seg Segment, now time.Time) (*Snapshot, error) {
	if len(run.Fermate) == 0 {
		return nil, fmt.Errorf("ViaggiaTreno returned train %d without stops", run.NumeroTreno.V)
	}
	fromIdx, toIdx := -1, -1
	for i, st := range run.Fermate {
		id := strings.TrimSpace(st.ID)
		if fromIdx < 0 && id == seg.FromID {
			fromIdx = i
		}
		if id == seg.ToID && fromIdx >= 0 && i > fromIdx {
			toIdx = i
			break
		}
	}
	if fromIdx < 0 {
		return nil, &ErrNotOnRoute{fmt.Sprintf("train %d does not stop at %s (%s)", run.NumeroTreno.V, seg.FromName, seg.FromID)}
	}
	if toIdx < 0 {
		return nil, &ErrNotOnRoute{fmt.Sprintf("train %d does not reach %s (%s) after %s", run.NumeroTreno.V, seg.ToName, seg.ToID, seg.FromName)}
	}
	if board == nil {
		board = &rawRun{}
	}
	from, to := &run.Fermate[fromIdx], &run.Fermate[toIdx]
	last := &run.Fermate[len(run.Fermate)-1]
	suppressed := suppressedIDs(run.FermateSoppresse)

	s := &Snapshot{
		Source: SourceName, LastUpdated: now.UTC().Format(time.RFC3339), LastUpdatedMs: now.UnixMilli(),
		Train: TrainInfo{
			Number: run.NumeroTreno.V, Category: strings.TrimSpace(run.Categoria), Label: strings.TrimSpace(run.CompNumeroTreno),
			OriginID: firstString(run.IDOrigine, run.CodOrigine, strings.TrimSpace(run.Fermate[0].ID)), OriginName: strings.TrimSpace(run.Origine),
			DestinationID: strings.TrimSpace(run.IDDestinazione), DestinationName: strings.TrimSpace(run.Destinazione),
			ServiceDayMs: first(run.DataPartenzaTreno, board.DataPartenzaTreno),
		},
		From: Endpoint{ID: seg.FromID, Name: firstString(seg.FromName, from.Stazione), Index: fromIdx},
		To:   Endpoint{ID: seg.ToID, Name: firstString(seg.ToName, to.Stazione), Index: toIdx},
	}
	if s.Train.ServiceDayMs != 0 {
		s.Train.ServiceDay = time.UnixMilli(s.Train.ServiceDayMs).In(rome).Format("2006-01-02")
	}

	// Scheduled times: stop-level theoretical/programmed, then board/run level.
	s.ScheduledDepartureMs = first(from.PartenzaTeorica, from.Programmata, board.OrarioPartenza)
	if s.ScheduledDepartureMs == 0 && fromIdx == 0 {
		s.ScheduledDepartureMs = first(run.OrarioPartenza)
	}
	s.ScheduledArrivalMs = first(to.ArrivoTeorico, to.Programmata)
	if s.ScheduledArrivalMs == 0 && toIdx == len(run.Fermate)-1 {
		s.ScheduledArrivalMs = first(run.OrarioArrivo)
	}

	// Delay: departure-stop, stop, run, then board; zero when none is known.
	// A stop's zero delay before the train reached it is not a measurement.
	delay, runDelay := 0, 0
	switch {
	case from.PartenzaReale.Valid && from.RitardoPartenza.Valid:
		delay = int(from.RitardoPartenza.V)
	case from.measured() && from.Ritardo.Valid:
		delay = int(from.Ritardo.V)
	case run.Ritardo.Valid:
		delay = int(run.Ritardo.V)
	case board.Ritardo.Valid:
		delay = int(board.Ritardo.V)
	}
	if run.Ritardo.Valid {
		runDelay = int(run.Ritardo.V)
	} else {
		runDelay = delay
	}
	s.DelayMinutes = delay

	// Estimated: the actual timestamp, otherwise scheduled plus delay. Once
	// the train has left the departure stop the run's current delay is the
	// better predictor of the arrival.
	s.ActualDepartureMs = first(from.PartenzaReale)
	s.ActualArrivalMs = first(to.ArrivoReale)
	switch {
	case s.ActualDepartureMs != 0:
		s.EstimatedDepartureMs = s.ActualDepartureMs
	case s.ScheduledDepartureMs != 0:
		s.EstimatedDepartureMs = s.ScheduledDepartureMs + int64(delay)*60_000
	}
	arrivalDelay := delay
	if s.ActualDepartureMs != 0 {
		arrivalDelay = runDelay
	}
	switch {
	case s.ActualArrivalMs != 0:
		s.EstimatedArrivalMs = s.ActualArrivalMs
	case s.ScheduledArrivalMs != 0:
		s.EstimatedArrivalMs = s.ScheduledArrivalMs + int64(arrivalDelay)*60_000
	}
	s.ScheduledDeparture, s.EstimatedDeparture = clock(s.ScheduledDepartureMs), clock(s.EstimatedDepartureMs)
	s.ScheduledArrival, s.EstimatedArrival = clock(s.ScheduledArrivalMs), clock(s.EstimatedArrivalMs)

	// Platform: effective first, otherwise programmed; stop level, then board.
	s.EffectivePlatform = firstString(str(from.BinEffPartenza), str(board.BinEffPartenza))
	s.ProgrammedPlatform = firstString(str(from.BinProgPartenza), str(board.BinProgPartenza))
	switch {
	case s.EffectivePlatform != "":
		s.Platform, s.PlatformStatus = s.EffectivePlatform, PlatformConfirmed
	case s.ProgrammedPlatform != "":
		s.Platform, s.PlatformStatus = s.ProgrammedPlatform, PlatformScheduled
	default:
		s.PlatformStatus = PlatformUnknown
	}
	s.ArrivalEffectivePlatform, s.ArrivalProgrammedPlatform = str(to.BinEffArrivo), str(to.BinProgArrivo)

	// Stops, with the index of the last one where the train was detected.
	lastSeen := -1
	for i := range run.Fermate {
		st := &run.Fermate[i]
		id := strings.TrimSpace(st.ID)
		stop := Stop{Index: i, ID: id, Name: strings.TrimSpace(st.Stazione),
			ScheduledArrivalMs: first(st.ArrivoTeorico), ScheduledDepartureMs: first(st.PartenzaTeorica),
			ActualArrivalMs: first(st.ArrivoReale), ActualDepartureMs: first(st.PartenzaReale),
			Cancelled:                     suppressed[id] || (st.ActualFermataType.Valid && st.ActualFermataType.V == 3) || st.Soppressa.V,
			PositionRelativeToDestination: i - toIdx,
		}
		if stop.ScheduledArrivalMs == 0 && stop.ScheduledDepartureMs == 0 {
			if i == 0 {
				stop.ScheduledDepartureMs = first(st.Programmata)
			} else {
				stop.ScheduledArrivalMs = first(st.Programmata)
			}
		}
		stop.ScheduledArrival, stop.ScheduledDeparture = clock(stop.ScheduledArrivalMs), clock(stop.ScheduledDepartureMs)
		stop.ActualArrival, stop.ActualDeparture = clock(stop.ActualArrivalMs), clock(stop.ActualDepartureMs)
		if st.measured() {
			lastSeen = i
		}
		s.Stops = append(s.Stops, stop)
	}
	if name := strings.TrimSpace(run.UltimoRilevamento); name != "" && name != "--" {
		s.LastDetection = &Detection{Station: name, AtMs: first(run.OraUltimoRilevam)}
		if s.LastDetection.AtMs != 0 {
			s.LastDetection.At = clock(s.LastDetection.AtMs)
		}
		for i := len(run.Fermate) - 1; i > lastSeen; i-- {
			if strings.EqualFold(strings.TrimSpace(run.Fermate[i].Stazione), name) {
				lastSeen = i
				break
			}
		}
	}

	// Cancellation: whole-train provisions, or the requested departure stop
	// cancelled.
	tipo := strings.ToUpper(strings.TrimSpace(run.TipoTreno))
	s.Cancelled = tipo == "ST" || (run.Provvedimento.Valid && run.Provvedimento.V == 1) || s.Stops[fromIdx].Cancelled

	// Departed: board/run state at the origin, an actual departure, or a
	// detection after the departure stop.
	s.Departed = s.ActualDepartureMs != 0 || lastSeen > fromIdx ||
		(fromIdx == 0 && run.NonPartito.Valid && !run.NonPartito.V && run.OraUltimoRilevam.Valid)
	s.RunArrived = first(last.ArrivoReale) != 0 || run.Arrivato.V
	s.Arrived = s.ActualArrivalMs != 0 || s.RunArrived
	return s, nil
}

func firstString(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// ParseStatus normalises a raw andamentoTreno response body for seg, as
// train_status does; it lets other packages (and their tests) work from
// recorded responses.
func ParseStatus(body []byte, seg Segment, now time.Time) (*Snapshot, error) {
	var run rawRun
	if err := json.Unmarshal(body, &run); err != nil {
		return nil, fmt.Errorf("ViaggiaTreno status is not valid JSON: %w", err)
	}
	return normalize(&run, nil, seg, now)
}
