package watch_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentstack/agentstack/steward/watch"
)

// A rule as the agent writes it: notify at the stop before the destination, once.
func ExampleRule() {
	var r watch.Rule
	json.Unmarshal([]byte(`{"id":"prepare","event":"train.stop_arrived","where":{"positionRelativeToDestination":-1},"once":true}`), &r)
	fmt.Println(r.ID, r.Event, r.Where["positionRelativeToDestination"], r.Once)
	// Output: prepare train.stop_arrived -1 true
}

func ExampleText_Pick() {
	var t watch.Text
	json.Unmarshal([]byte(`{"it":"Treno in arrivo","en":"Train arriving"}`), &t)
	fmt.Println(t.Pick("it"), "/", t.Pick("de"))
	// Output: Treno in arrivo / Train arriving
}
