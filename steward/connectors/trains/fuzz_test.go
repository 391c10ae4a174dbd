package trains

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzNormalize feeds arbitrary andamentoTreno bodies through decoding and
// normalisation: they must fail cleanly or yield a consistent snapshot.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"numeroTreno":1,"fermate":[{"id":"S1","partenza_teorica":1},{"id":"S2","arrivo_teorico":2}]}`))
	f.Add([]byte(`{"numeroTreno":"7","ritardo":"3.5","fermate":[{"id":"S1"},{"id":"S2","arrivoReale":"x"}],"fermateSoppresse":[{"id":"S1"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var run rawRun
		if json.Unmarshal(body, &run) != nil || len(run.Fermate) < 2 {
			return
		}
		first, last := run.Fermate[0].ID, run.Fermate[len(run.Fermate)-1].ID
		s, err := normalize(&run, nil, Segment{FromID: first, ToID: last}, testNow)
		if err != nil {
			return
		}
		if s.To.Index <= s.From.Index || len(s.Stops) != len(run.Fermate) {
			t.Fatalf("inconsistent snapshot: from %d to %d stops %d", s.From.Index, s.To.Index, len(s.Stops))
		}
		if _, err := json.Marshal(s); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParseStations: either form, any bytes, never a panic or an empty id.
func FuzzParseStations(f *testing.F) {
	f.Add([]byte("MILANO CENTRALE|S01700\nMONZA|S01322\n"))
	f.Add([]byte(`[{"id":"S01700","nomeLungo":"MILANO CENTRALE","nomeBreve":null,"label":"Milano"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := parseStations(body)
		if err != nil {
			return
		}
		for _, s := range st {
			if s.ID == "" {
				t.Fatalf("station without id from %q", body)
			}
		}
	})
}

// FuzzDecodeRef: a trainRef from the model is untrusted input.
func FuzzDecodeRef(f *testing.F) {
	f.Add(EncodeRef(Ref{Number: 9600, OriginID: "S01700", ServiceDayMs: serviceDay, FromID: "S01700", ToID: "S00219"}))
	f.Add("vt1_e30")
	f.Fuzz(func(t *testing.T, ref string) {
		r, err := DecodeRef(ref)
		if err != nil {
			return
		}
		if r.Number <= 0 || strings.ContainsAny(r.OriginID+r.FromID+r.ToID, "/.% ") {
			t.Fatalf("accepted %+v", r)
		}
	})
}
