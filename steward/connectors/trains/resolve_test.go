package trains

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestResolveRealStations resolves dictated names against the real station
// dumps served like the live autocomplete (prefix on the full name only).
func TestResolveRealStations(t *testing.T) {
	l := newLiveLike(t)
	r := NewResolver(l.client())
	tests := []struct {
		query, status, id, match string
		broadened                bool // the exact request returned nothing
	}{
		{"Milano rogo redo", StatusResolved, "S01820", MatchCanonical, true}, // dictation split the word
		{"milanorogoredo", StatusResolved, "S01820", MatchCanonical, true},
		{"bologna centrale", StatusResolved, "S05043", MatchCanonical, false},
		{"Forli", StatusResolved, "S05059", MatchCanonical, false}, // FORLI' without the accent
		{"Forlì", StatusResolved, "S05059", MatchCanonical, true},  // the service does not fold accents
		{"Cantù", StatusResolved, "S01451", MatchCanonical, true},  // the service does not fold accents
		{"Monza", StatusResolved, "S01322", MatchCanonical, false}, // canonical beats three "Monza" labels
		{"Modena", StatusResolved, "S05032", MatchCanonical, false},
		{"Peschiera", StatusResolved, "S02088", MatchLabel, false},
		{"Milano Rogoreddo", StatusResolved, "S01820", MatchRanked, true},
		{"Desenzano del garda", StatusResolved, "S02084", MatchRanked, false}, // sole candidate ≥ 0.68
		{"Torino", StatusAmbiguous, "", "", false},
		{"Milano", StatusAmbiguous, "", "", false},
		{"Bologna Centrale AV", StatusAmbiguous, "", "", true}, // best 0.85 < 0.86
		{"zzzz", StatusNotFound, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			before := len(l.served("/cercaStazione/"))
			res, err := r.Resolve(context.Background(), tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status {
				t.Fatalf("status %s, want %s (%+v)", res.Status, tc.status, res)
			}
			if tc.id != "" && (res.Station == nil || res.Station.ID != tc.id || res.Match != tc.match) {
				t.Fatalf("resolved %+v via %s, want %s via %s", res.Station, res.Match, tc.id, tc.match)
			}
			reqs := l.served("/cercaStazione/")[before:]
			if reqs[0] != "/cercaStazione/"+tc.query {
				t.Errorf("first request %q, want the exact utterance", reqs[0])
			}
			if got := len(reqs) > 1; got != tc.broadened {
				t.Errorf("broadened = %v (%v), want %v", got, reqs, tc.broadened)
			}
			if res.Status == StatusAmbiguous {
				if len(res.Candidates) == 0 || len(res.Candidates) > MaxAmbiguous {
					t.Errorf("%d candidates", len(res.Candidates))
				}
				for i := 1; i < len(res.Candidates); i++ {
					if res.Candidates[i].Score > res.Candidates[i-1].Score {
						t.Errorf("candidates not sorted by score: %+v", res.Candidates)
					}
				}
			}
		})
	}
	// Broadening queried each token of three or more characters and its prefix.
	before := len(l.served("/cercaStazione/"))
	r.Resolve(context.Background(), "Milano rogo di redo")
	got := strings.Join(l.served("/cercaStazione/")[before:], " ")
	for _, want := range []string{"/milano", "/mil", "/rogo", "/rog", "/redo", "/red"} {
		if !strings.Contains(got+" ", "/cercaStazione"+want+" ") {
			t.Errorf("broadening did not query %s: %s", want, got)
		}
	}
	if strings.Contains(got, "/cercaStazione/di ") {
		t.Errorf("a two-letter token was queried: %s", got)
	}
}

// TestResolvePipeForm resolves through autocompletaStazione's NAME|ID form
// when cercaStazione fails.
func TestResolvePipeForm(t *testing.T) {
	l := newLiveLike(t)
	l.setFail("/cercaStazione/", 404)
	res, err := NewResolver(l.client()).Resolve(context.Background(), "Milano rogo redo")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusResolved || res.Station.ID != "S01820" || res.Station.Name != "MILANO ROGOREDO" {
		t.Fatalf("%+v", res)
	}
	if len(l.served("/autocompletaStazione/")) == 0 {
		t.Fatal("the pipe-separated endpoint was not used")
	}
}

func TestResolveErrors(t *testing.T) {
	l := newLiveLike(t)
	r := NewResolver(l.client())
	for _, q := range []string{"", "   ", strings.Repeat("a", 121)} {
		if _, err := r.Resolve(context.Background(), q); err == nil {
			t.Errorf("Resolve(%q) accepted", q)
		}
	}
	l.setFail("/", 503)
	if _, err := r.Resolve(context.Background(), "Monza"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("service down: err = %v", err)
	}
	if n := len(l.served("/cercaStazione/Monza")); n != 2 {
		t.Errorf("503 was tried %d times, want 2 attempts", n)
	}
}

// TestDecideThresholds pins the acceptance rules with constructed candidates.
func TestDecideThresholds(t *testing.T) {
	st := func(id, name string) Station { return Station{ID: id, Name: name} }
	tests := []struct {
		name  string
		query string
		cands []Station
		want  string
	}{
		{"sole above 0.68", "Desenzano del garda", []Station{st("S1", "DESENZANO DEL GARDA-SIRMIONE")}, StatusResolved},
		{"sole below 0.68", "Rogoredo", []Station{st("S1", "ROGOLO")}, StatusAmbiguous},
		{"best high, clear lead", "Milano Rogoreddo", []Station{st("S1", "MILANO ROGOREDO"), st("S2", "MILANO ROMOLO")}, StatusResolved},
		{"best high, no lead", "Sesto S Giovanni", []Station{st("S1", "SESTO S GIOVANNA"), st("S2", "SESTO S GIOVANNI X")}, StatusAmbiguous},
		{"duplicate canonical names", "Acerra", []Station{st("S1", "ACERRA"), st("S2", "ACERRA")}, StatusAmbiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.query, tc.cands); got.Status != tc.want {
				t.Errorf("%s: %+v", got.Status, got)
			}
		})
	}
	many := make([]Station, 12)
	for i := range many {
		many[i] = Station{ID: string(rune('A' + i)), Name: "TORINO X" + string(rune('A'+i)), Label: "Torino"}
	}
	if got := decide("Torino", many); got.Status != StatusAmbiguous || len(got.Candidates) != MaxAmbiguous {
		t.Errorf("12 equal labels: %s with %d candidates", got.Status, len(got.Candidates))
	}
}

func TestSimilarity(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if s := Similarity("Milano Centrale", "MILANO CENTRALE"); !near(s, 1) {
		t.Errorf("identical = %v", s)
	}
	// Containment: "monza" inside "monzasobborghi" → 0.92 · 5/14.
	if s := Similarity("Monza", "MONZA SOBBORGHI"); s < 0.92*5/14-1e-9 {
		t.Errorf("containment floor: %v", s)
	}
	if s := Similarity("xyz", "MILANO"); s > 0.2 {
		t.Errorf("unrelated = %v", s)
	}
	if a, b := Similarity("milano rogoreddo", "MILANO ROGOREDO"), Similarity("milano rogoreddo", "MILANO ROMOLO"); a <= b+MultiLeadMin {
		t.Errorf("typo %v not clearly above neighbour %v", a, b)
	}
	if compact("Cà di David") != "cadidavid" || normal("S.Maria-Novella") != "s maria novella" {
		t.Errorf("normalisation: %q %q", compact("Cà di David"), normal("S.Maria-Novella"))
	}
}
