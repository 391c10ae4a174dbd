package rrule_test

import (
	"fmt"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
)

func Example() {
	r, err := rrule.Parse("RRULE:byday=WE,MO;freq=weekly;interval=1;COUNT=4")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Canonical(), r.Representable())

	rome, _ := time.LoadLocation("Europe/Rome")
	start := time.Date(2026, 3, 23, 9, 30, 0, 0, rome) // a Monday, before the switch to summer time
	occ, _ := r.Between(start, start.Add(-time.Second), start.AddDate(0, 1, 0), 100)
	for _, t := range occ {
		fmt.Println(t.Format("Mon 2006-01-02 15:04 MST"))
	}

	other, _ := rrule.Parse("FREQ=WEEKLY;BYDAY=MO;BYDAY=TU")
	fmt.Println(other.Representable(), other.Unrepresentable)
	// Output:
	// FREQ=WEEKLY;COUNT=4;BYDAY=MO,WE true
	// Mon 2026-03-23 09:30 CET
	// Wed 2026-03-25 09:30 CET
	// Mon 2026-03-30 09:30 CEST
	// Wed 2026-04-01 09:30 CEST
	// false [duplicate BYDAY]
}
