package voice

import (
	"reflect"
	"strings"
	"testing"
)

// Every text exists in every language, with the placeholders its caller fills.
func TestVocabularyComplete(t *testing.T) {
	for lang, w := range vocab {
		v := reflect.ValueOf(w)
		for i := 0; i < v.NumField(); i++ {
			if strings.TrimSpace(v.Field(i).String()) == "" {
				t.Errorf("%s: %s is empty", lang, v.Type().Field(i).Name)
			}
		}
		for name, want := range map[string]int{"control": 4, "recovery": 3, "redial": 3, "prompt": 2} {
			if got := strings.Count(v.FieldByName(name).String(), "%s"); got != want {
				t.Errorf("%s: %s has %d placeholders, want %d", lang, name, got, want)
			}
		}
	}
}
