package trains_test

import (
	"fmt"

	"github.com/agentstack/agentstack/steward/connectors/trains"
)

func ExampleSimilarity() {
	// A dictated name against the real station name and a neighbour.
	fmt.Printf("%.2f %.2f\n", trains.Similarity("Milano rogo reddo", "MILANO ROGOREDO"), trains.Similarity("Milano rogo reddo", "MILANO ROMOLO"))
	// Output: 0.79 0.59
}

func ExampleEncodeRef() {
	ref := trains.EncodeRef(trains.Ref{Number: 9600, OriginID: "S01700", ServiceDayMs: 1767481200000,
		FromID: "S01700", FromName: "MILANO CENTRALE", ToID: "S00219", ToName: "TORINO PORTA NUOVA"})
	back, _ := trains.DecodeRef(ref)
	fmt.Println(ref[:4], back.Number, back.ToName)
	// Output: vt1_ 9600 TORINO PORTA NUOVA
}
