package trains

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	fileRunning    = "viaggiatreno_ha-tests/andamentoTreno_S01765_136_1767308400000.json" // REG 136 near Milano Bovisa
	fileNotStarted = "viaggiatreno_ha-tests/andamentoTreno_S01765_136_1767394800000.json" // REG 136 not departed
	fileFR9600     = "viaggiatreno_ha-tests/andamentoTreno_S01765_136_1767481200000.json" // FR 9600 Milano C.le → Torino P.N.
	fileEC18       = "iwan-vcr-cassettes-2016/andamentoTreno_S01700_18_2016-06-28.decoded.json"
)

func loadRun(t *testing.T, rel string) *rawRun {
	t.Helper()
	var r rawRun
	if err := json.Unmarshal(fixture(t, rel), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

var testNow = time.Date(2026, 1, 4, 8, 20, 0, 0, time.UTC)

// TestNormalizeRecorded checks the TrainSnapshot table field by field on
// real andamentoTreno responses.
func TestNormalizeRecorded(t *testing.T) {
	type want struct {
		fromIdx, toIdx               int
		schedDep, estDep, actDep     int64
		schedArr, estArr             int64
		schedDepClock, estArrClock   string
		delay                        int
		platform, status, prog, eff  string
		cancelled, departed, arrived bool
		lastDetection                string
		stops                        int
	}
	tests := []struct {
		name string
		file string
		seg  Segment
		want want
	}{
		{"departed fast train, effective platform", fileFR9600, Segment{FromID: "S01700", FromName: "Milano Centrale", ToID: "S00219", ToName: "Torino Porta Nuova"}, want{
			fromIdx: 0, toIdx: 3,
			schedDep: 1767509580000, actDep: 1767510390000, estDep: 1767510390000,
			// after departure the run's current delay (15) predicts the arrival
			schedArr: 1767513300000, estArr: 1767513300000 + 15*60_000,
			schedDepClock: "07:53", estArrClock: "09:10",
			delay: 14, platform: "7", status: PlatformConfirmed, prog: "6", eff: "7",
			departed: true, lastDetection: "MILANO CERTOSA", stops: 4,
		}},
		{"intermediate stop not reached, programmed platform only", fileFR9600, Segment{FromID: "S01039", FromName: "Rho Fiera", ToID: "S00035", ToName: "Torino Porta Susa"}, want{
			fromIdx: 1, toIdx: 2,
			schedDep: 1767510360000, estDep: 1767510360000 + 15*60_000,
			schedArr: 1767512580000, estArr: 1767512580000 + 15*60_000,
			schedDepClock: "08:06", estArrClock: "08:58",
			delay: 15, platform: "5", status: PlatformScheduled, prog: "5",
			lastDetection: "MILANO CERTOSA", stops: 4,
		}},
		{"regional train at an intermediate station", fileRunning, Segment{FromID: "S01642", FromName: "Milano Bovisa", ToID: "S01066", ToName: "Milano Cadorna"}, want{
			fromIdx: 12, toIdx: 14,
			schedDep: 1767348600000, estDep: 1767348600000 + 60_000,
			schedArr: 1767349080000, estArr: 1767349080000 + 60_000,
			schedDepClock: "11:10", estArrClock: "11:19",
			delay: 1, platform: "4", status: PlatformConfirmed, eff: "4",
			lastDetection: "MILANO BOVISA POLITECNICO", stops: 15,
		}},
		{"regional train already past the departure stop", fileRunning, Segment{FromID: "S01933", FromName: "Saronno", ToID: "S01066", ToName: "Milano Cadorna"}, want{
			fromIdx: 11, toIdx: 14,
			schedDep: 1767347820000, actDep: 1767348065000, estDep: 1767348065000,
			schedArr: 1767349080000, estArr: 1767349080000 + 60_000,
			schedDepClock: "10:57", estArrClock: "11:19",
			delay: 4, platform: "1", status: PlatformConfirmed, eff: "1",
			departed: true, lastDetection: "MILANO BOVISA POLITECNICO", stops: 15,
		}},
		{"not departed, nothing communicated", fileNotStarted, Segment{FromID: "S01765", FromName: "Como Lago", ToID: "S01066", ToName: "Milano Cadorna"}, want{
			fromIdx: 0, toIdx: 14,
			schedDep: 1767431760000, estDep: 1767431760000,
			schedArr: 1767435480000, estArr: 1767435480000,
			schedDepClock: "10:16", estArrClock: "11:18",
			status: PlatformUnknown, stops: 15,
		}},
		{"2016 response with padded platform values", fileEC18, Segment{FromID: "S01700", FromName: "Milano Centrale", ToID: "S01301", ToName: "Chiasso"}, want{
			fromIdx: 0, toIdx: 2,
			schedDep: 1467116700000, estDep: 1467116700000,
			schedArr: 1467119280000, estArr: 1467119280000,
			schedDepClock: "14:25", estArrClock: "15:08",
			platform: "8", status: PlatformConfirmed, prog: "9", eff: "8", stops: 3,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := normalize(loadRun(t, tc.file), nil, tc.seg, testNow)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.want
			got := want{s.From.Index, s.To.Index, s.ScheduledDepartureMs, s.EstimatedDepartureMs, s.ActualDepartureMs,
				s.ScheduledArrivalMs, s.EstimatedArrivalMs, s.ScheduledDeparture, s.EstimatedArrival, s.DelayMinutes,
				s.Platform, s.PlatformStatus, s.ProgrammedPlatform, s.EffectivePlatform, s.Cancelled, s.Departed, s.Arrived, "", len(s.Stops)}
			if s.LastDetection != nil {
				got.lastDetection = s.LastDetection.Station
			}
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			if s.Source != "ViaggiaTreno" || s.LastUpdated != "2026-01-04T08:20:00Z" {
				t.Errorf("provenance %q %q", s.Source, s.LastUpdated)
			}
			for i, st := range s.Stops {
				if st.Index != i || st.PositionRelativeToDestination != i-w.toIdx {
					t.Errorf("stop %d: index %d position %d", i, st.Index, st.PositionRelativeToDestination)
				}
			}
		})
	}
}

// TestNormalizeOmitsMissing: values ViaggiaTreno did not give are absent from
// the JSON, never zeros or empty strings.
func TestNormalizeOmitsMissing(t *testing.T) {
	s, err := normalize(loadRun(t, fileNotStarted), nil, Segment{FromID: "S01765", ToID: "S01066"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, absent := range []string{"platform", "programmedPlatform", "effectivePlatform", "actualDepartureMs", "actualArrivalMs", "lastDetection"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s present: %v", absent, m[absent])
		}
	}
	for _, present := range []string{"delayMinutes", "platformStatus", "cancelled", "departed", "arrived", "lastUpdated", "source"} {
		if _, ok := m[present]; !ok {
			t.Errorf("%s missing", present)
		}
	}
	stop := m["stops"].([]any)[3].(map[string]any)
	if _, ok := stop["actualArrivalMs"]; ok {
		t.Errorf("unreached stop has an actual arrival: %v", stop)
	}
	// Names fall back to the stop names when the request carried none.
	if s.From.Name != "COMO LAGO" || s.To.Name != "MILANO CADORNA" {
		t.Errorf("names %q %q", s.From.Name, s.To.Name)
	}
}

func TestNormalizeCancellationAndArrival(t *testing.T) {
	seg := Segment{FromID: "S01700", ToID: "S00035"}
	cancelled := loadRun(t, fileFR9600)
	cancelled.TipoTreno = "ST"
	s, _ := normalize(cancelled, nil, seg, testNow)
	if !s.Cancelled {
		t.Error("tipoTreno ST is not a cancellation")
	}
	stopGone := loadRun(t, fileFR9600)
	stopGone.FermateSoppresse = json.RawMessage(`["S01700"]`)
	s, _ = normalize(stopGone, nil, seg, testNow)
	if !s.Cancelled || !s.Stops[0].Cancelled {
		t.Error("a cancelled departure stop does not cancel the requested trip")
	}
	arrived := loadRun(t, fileFR9600)
	arrived.Fermate[2].ArrivoReale = flexInt{V: 1767513500000, Valid: true}
	s, _ = normalize(arrived, nil, seg, testNow)
	if !s.Arrived || s.RunArrived || s.EstimatedArrivalMs != 1767513500000 {
		t.Errorf("arrival at the requested destination: arrived %v runArrived %v eta %d", s.Arrived, s.RunArrived, s.EstimatedArrivalMs)
	}
	arrived.Arrivato = flexBool{V: true, Valid: true}
	if s, _ = normalize(arrived, nil, seg, testNow); !s.RunArrived {
		t.Error("run-level arrival not reported")
	}
}

func TestNormalizeSegmentErrors(t *testing.T) {
	run := loadRun(t, fileFR9600)
	for _, tc := range []struct {
		run  *rawRun
		seg  Segment
		want []string
	}{
		{run, Segment{FromID: "S99999", ToID: "S00219"}, []string{"train 9600 does not stop at", "(S99999)"}},
		{run, Segment{FromID: "S01700", ToID: "S99999"}, []string{"train 9600 does not reach", "(S99999) after"}},
		// The destination comes before the departure on this run.
		{run, Segment{FromID: "S00219", ToID: "S01700"}, []string{"train 9600 does not reach", "(S01700) after"}},
		{&rawRun{}, Segment{FromID: "S1", ToID: "S2"}, []string{"returned train 0 without stops"}},
	} {
		_, err := normalize(tc.run, nil, tc.seg, testNow)
		if err == nil {
			t.Errorf("segment %+v accepted", tc.seg)
			continue
		}
		var notOnRoute *ErrNotOnRoute
		if wantType := tc.run == run; errors.As(err, &notOnRoute) != wantType {
			t.Errorf("segment %+v: %T, want *ErrNotOnRoute: %v", tc.seg, err, wantType)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("segment %+v: %v, want %q", tc.seg, err, w)
			}
		}
	}
}

func TestBoardFallbacks(t *testing.T) {
	// A stop without platform data takes the departure board's.
	run := loadRun(t, fileNotStarted)
	prog := "3"
	board := &rawRun{BinProgPartenza: &prog, Ritardo: flexInt{V: 7, Valid: true}}
	run.Ritardo = flexInt{}
	s, err := normalize(run, board, Segment{FromID: "S01765", ToID: "S01066"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if s.Platform != "3" || s.PlatformStatus != PlatformScheduled || s.DelayMinutes != 7 {
		t.Errorf("board fallbacks: platform %q %s delay %d", s.Platform, s.PlatformStatus, s.DelayMinutes)
	}
}
