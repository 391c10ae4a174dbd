package runtime

import (
	"encoding/json"
	"testing"

	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// appLogEvents returns p's app-log events in order, the ones of type typ
// only when typ is not empty.
func appLogEvents(t testing.TB, p *project.Project, typ string) []project.Event {
	t.Helper()
	var out []project.Event
	_, err := p.Publisher.ReadJSONL(p.AppLogPath(), state.ReadOptions{Versions: []int{project.AppLogVersion}, Tail: state.TailIgnore,
		Validate: func(_ int, env state.Envelope) error {
			for _, raw := range env.Rows {
				var ev project.Event
				if err := json.Unmarshal(raw, &ev); err != nil {
					return err
				}
				if typ == "" || ev.Type == typ {
					out = append(out, ev)
				}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// AppLogEvents is appLogEvents for the external tests (harness_test.go).
var AppLogEvents = appLogEvents
