package actions

import (
	"strings"
	"testing"
)

// FuzzDecodeSettings feeds arbitrary POST bodies to /settings/actions'
// parser: it never panics, and what it accepts is a valid update.
func FuzzDecodeSettings(f *testing.F) {
	for _, s := range []string{`{"enabled":false}`, `{"textLanguage":"it","calendarEnabled":true}`, `{"textLanguage":"xx"}`,
		`{"enabledAt":1}`, `[]`, `{"enabled":"true"}`, `{}`, `null`, `{"enabled":true,"enabled":false}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		u, err := decodeUpdate(strings.NewReader(body))
		if err != nil {
			return
		}
		if u.TextLanguage != nil && !validLanguage(*u.TextLanguage) {
			t.Fatalf("accepted language %q", *u.TextLanguage)
		}
	})
}

// FuzzPlannerAnswer feeds arbitrary model answers to the planner's parsing
// and cleaning: no panic, and no read step or tool-less tool step survives.
func FuzzPlannerAnswer(f *testing.F) {
	for _, s := range []string{
		`{"alternatives":[{"summary":"a","confidence":0.5,"steps":[{"label":"x","type":"tool","tool":"mcp__mail__reply_email","args":{}}]}]}`,
		"```json\n{\"alternatives\":[{\"steps\":[{\"tool\":\"mcp__mail__search_mail\"},{\"label\":\"call\"}]}]}\n```",
		`Sure! {"alternatives": [{"steps": [{"type": "tool"}]}]} hope it helps`, `{`, `}{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var p Plan
		if decodeAnswer(text, &p) != nil {
			return
		}
		for _, a := range cleanAlternatives(p.Alternatives) {
			if len(a.Steps) == 0 {
				t.Fatal("an alternative without steps survived")
			}
			for _, s := range a.Steps {
				if _, read := ReadTools[s.Tool]; read || (s.Type == "tool" && s.Tool == "") {
					t.Fatalf("step %+v survived cleaning", s)
				}
			}
		}
	})
}
