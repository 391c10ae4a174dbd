package trains

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

const serviceDay = 1767481200000 // 2026-01-04 in Europe/Rome

// boardRow is a partenze row with the fields the connector reads (shape from
// the recorded partenze JSON schema).
func boardRow(number int, origin string, depMs int64, prog string) map[string]any {
	return map[string]any{"numeroTreno": number, "codOrigine": origin, "dataPartenzaTreno": serviceDay,
		"millisDataPartenza": fmt.Sprint(serviceDay), "orarioPartenza": depMs, "categoria": "REG",
		"compNumeroTreno": fmt.Sprintf("REG %d", number), "binarioProgrammatoPartenzaDescrizione": prog,
		"binarioEffettivoPartenzaDescrizione": nil, "ritardo": 0, "nonPartito": true, "circolante": true}
}

// shifted returns a recorded run renumbered and moved in time.
func shifted(t *testing.T, rel string, number int, by time.Duration) []byte {
	var m map[string]any
	if err := json.Unmarshal(fixture(t, rel), &m); err != nil {
		t.Fatal(err)
	}
	shift := func(obj map[string]any, keys ...string) {
		for _, k := range keys {
			if v, ok := obj[k].(float64); ok {
				obj[k] = v + float64(by.Milliseconds())
			}
		}
	}
	m["numeroTreno"] = number
	shift(m, "orarioPartenza", "orarioArrivo", "oraUltimoRilevamento")
	for _, f := range m["fermate"].([]any) {
		shift(f.(map[string]any), "programmata", "partenza_teorica", "arrivo_teorico", "partenzaReale", "arrivoReale", "effettiva")
	}
	b, _ := json.Marshal(m)
	return b
}

func setBoard(l *liveLike, station string, rows ...map[string]any) {
	b, _ := json.Marshal(rows)
	l.mu.Lock()
	l.boards[station] = b
	l.mu.Unlock()
}

func newTestService(l *liveLike, now time.Time) *Service {
	return NewService(Options{Client: l.client(), Now: func() time.Time { return now }})
}

func TestFindNextTrainDirectOnly(t *testing.T) {
	l := newLiveLike(t)
	after := time.Date(2026, 1, 4, 7, 45, 0, 0, rome)
	at := func(hhmm string) int64 {
		tm, _ := time.ParseInLocation("2006-01-02 15:04", "2026-01-04 "+hhmm, rome)
		return tm.UnixMilli()
	}
	setBoard(l, "S01700",
		boardRow(9602, "S01700", at("08:53"), "6"), // direct, later
		boardRow(9999, "S01700", at("07:40"), "1"), // older than two minutes: dropped
		boardRow(18, "S01700", at("07:50"), "9"),   // to Chiasso: not direct
		boardRow(9600, "S01700", at("07:53"), "6"), // direct, earliest
	)
	l.setRun(fmt.Sprintf("S01700/18/%d", serviceDay), fixture(t, fileEC18))
	l.setRun(fmt.Sprintf("S01700/9600/%d", serviceDay), fixture(t, fileFR9600))
	l.setRun(fmt.Sprintf("S01700/9602/%d", serviceDay), shifted(t, fileFR9600, 9602, time.Hour))
	svc := newTestService(l, after)

	res, err := svc.FindNextTrain(context.Background(), "milano centrale", "torino porta nuova", after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusFound || res.Train.Train.Number != 9600 || res.Checked != 3 {
		t.Fatalf("status %s checked %d train %+v", res.Status, res.Checked, res.Train)
	}
	if n := len(l.served("/andamentoTreno/S01700/9999")); n != 0 {
		t.Errorf("the stale row was checked %d times", n)
	}
	if !strings.Contains(res.Message, "platform 7 (confirmed)") {
		t.Errorf("message %q", res.Message)
	}
	ref, err := DecodeRef(res.Train.TrainRef)
	if err != nil {
		t.Fatal(err)
	}
	if ref != (Ref{V: 1, Number: 9600, OriginID: "S01700", ServiceDayMs: serviceDay, FromID: "S01700", FromName: "MILANO CENTRALE", ToID: "S00219", ToName: "TORINO PORTA NUOVA"}) {
		t.Errorf("trainRef content %+v", ref)
	}

	// train_status refreshes the same run and segment through the trainRef.
	snap, err := svc.Status(context.Background(), res.Train.TrainRef)
	if err != nil {
		t.Fatal(err)
	}
	if snap.From.ID != "S01700" || snap.To.Index != 3 || snap.TrainRef != res.Train.TrainRef || snap.Platform != "7" {
		t.Errorf("status %+v", snap)
	}

	// The three-component form falls back to today's two-component form on 204.
	l.setRun(fmt.Sprintf("S01700/9600/%d", serviceDay), nil)
	l.mu.Lock()
	delete(l.runs, fmt.Sprintf("S01700/9600/%d", serviceDay))
	l.runs["S01700/9600"] = fixture(t, fileFR9600)
	l.mu.Unlock()
	if snap, err = svc.Status(context.Background(), res.Train.TrainRef); err != nil || snap.Train.Number != 9600 {
		t.Fatalf("two-component fallback: %v %+v", err, snap)
	}
}

func TestFindNextTrainNoMatchAndLimits(t *testing.T) {
	l := newLiveLike(t)
	after := time.Date(2026, 1, 4, 7, 0, 0, 0, rome)
	var rows []map[string]any
	for i := range 11 {
		n := 100 + i
		rows = append(rows, boardRow(n, "S01700", after.Add(time.Duration(i+1)*time.Minute).UnixMilli(), ""))
		body := fixture(t, fileEC18)
		if i == 10 {
			body = fixture(t, fileFR9600) // direct, but the eleventh
		}
		l.setRun(fmt.Sprintf("S01700/%d/%d", n, serviceDay), body)
	}
	setBoard(l, "S01700", rows...)
	svc := newTestService(l, after)
	res, err := svc.FindNextTrain(context.Background(), "Milano Centrale", "Torino Porta Nuova", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusNoDirectTrain || res.Checked != 10 || res.Train != nil {
		t.Fatalf("%+v", res)
	}
	if n := len(l.served("/andamentoTreno/S01700/110/")); n != 0 {
		t.Errorf("an eleventh candidate was checked")
	}
	if !strings.Contains(res.Message, "does not plan journeys with changes") {
		t.Errorf("message %q", res.Message)
	}
}

func TestFindNextTrainExplicitFailures(t *testing.T) {
	l := newLiveLike(t)
	svc := newTestService(l, testNow)
	ctx := context.Background()

	res, err := svc.FindNextTrain(ctx, "Torino", "Milano Centrale", time.Time{})
	if err != nil || res.Status != StatusAmbiguous || res.Field != "from" || len(res.Candidates) < 2 {
		t.Fatalf("ambiguous: %v %+v", err, res)
	}
	res, err = svc.FindNextTrain(ctx, "Milano Centrale", "zzzz", time.Time{})
	if err != nil || res.Status != StatusNotFound || res.Field != "to" {
		t.Fatalf("not found: %v %+v", err, res)
	}
	// No live board (204) is an explicit error, not an empty success.
	if _, err = svc.FindNextTrain(ctx, "Milano Centrale", "Monza", time.Time{}); err == nil || !strings.Contains(err.Error(), "no live departure board") {
		t.Fatalf("no board: %v", err)
	}
	if _, err = svc.FindNextTrain(ctx, "Monza", "monza", time.Time{}); err == nil {
		t.Fatal("same station accepted")
	}
	if _, err := svc.Status(ctx, EncodeRef(Ref{Number: 5, OriginID: "S01700", ServiceDayMs: serviceDay, FromID: "S01700", ToID: "S00219"})); err == nil ||
		!strings.Contains(err.Error(), "no live data") {
		t.Fatalf("unknown train: %v", err)
	}
}

func TestTrainRef(t *testing.T) {
	r := Ref{Number: 9600, OriginID: "S01700", ServiceDayMs: serviceDay, FromID: "S01700", FromName: "MILANO CENTRALE", ToID: "S00219", ToName: "TORINO P.N."}
	enc := EncodeRef(r)
	if !strings.HasPrefix(enc, "vt1_") || strings.ContainsAny(enc, "+/=") {
		t.Fatalf("trainRef %q", enc)
	}
	got, err := DecodeRef(enc)
	r.V = 1
	if err != nil || got != r {
		t.Fatalf("round trip %+v %v", got, err)
	}
	for _, bad := range []string{"", "vt2_abc", "vt1_!!!", "vt1_" + strings.Repeat("A", 3000),
		"vt1_eyJ2IjoxfQ", // {"v":1}: incomplete
		EncodeRef(Ref{Number: 1, OriginID: "../x", ServiceDayMs: 1, FromID: "S1", ToID: "S2"}),
	} {
		if _, err := DecodeRef(bad); err == nil {
			t.Errorf("DecodeRef(%q) accepted", bad)
		}
	}
}

func TestParseDepartureAfter(t *testing.T) {
	tm, err := ParseDepartureAfter("2026-01-04T07:45")
	if err != nil || !tm.Equal(time.Date(2026, 1, 4, 6, 45, 0, 0, time.UTC)) {
		t.Errorf("local form: %v %v", tm, err)
	}
	tm, err = ParseDepartureAfter("2026-01-04T07:45:00Z")
	if err != nil || tm.Hour() != 7 {
		t.Errorf("UTC form: %v %v", tm, err)
	}
	if _, err := ParseDepartureAfter("tomorrow"); err == nil {
		t.Error("free text accepted")
	}
	if got := boardTime(time.Date(2026, 1, 4, 6, 45, 0, 0, time.UTC)); got != "Sun Jan 04 2026 07:45:00 GMT+0100" {
		t.Errorf("board time %q", got)
	}
}

// TestMCPServer drives both tools through the official SDK's in-memory transport.
func TestMCPServer(t *testing.T) {
	l := newLiveLike(t)
	after := time.Date(2026, 1, 4, 7, 45, 0, 0, rome)
	setBoard(l, "S01700", boardRow(9600, "S01700", 1767509580000, "6"))
	l.setRun(fmt.Sprintf("S01700/9600/%d", serviceDay), fixture(t, fileFR9600))
	ctx := context.Background()
	cs := mcptooltest.Connect(t, NewServer(newTestService(l, after), "test"))
	hints := mcptooltest.ReadOnlyHints(t, cs, "")
	for name, ro := range hints {
		if !ro {
			t.Errorf("%s is not read-only", name)
		}
	}
	if len(hints) == 0 {
		t.Error("no tools listed")
	}
	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if out != nil && !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, out)
		}
		return res
	}
	var found FindResult
	call("find_next_train", map[string]any{"from": "Milano Centrale", "to": "Torino Porta Nuova", "departureAfter": "2026-01-04T07:45:00+01:00"}, &found)
	if found.Kind != "train" || found.Status != StatusFound || found.Train.PlatformStatus != PlatformConfirmed {
		t.Fatalf("%+v", found)
	}
	var snap Snapshot
	call("train_status", map[string]any{"trainRef": found.Train.TrainRef}, &snap)
	if snap.Train.Number != 9600 || snap.Source != "ViaggiaTreno" || len(snap.Stops) != 4 {
		t.Fatalf("%+v", snap)
	}
	if res := call("train_status", map[string]any{"trainRef": "nonsense"}, nil); !res.IsError {
		t.Error("a bad trainRef was not an error")
	}
	if res := call("find_next_train", map[string]any{"from": "Milano Centrale", "to": "Torino", "departureAfter": "soon"}, nil); !res.IsError {
		t.Error("a bad departureAfter was not an error")
	}
}
