package templates_test

import (
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/templates"
)

func TestMaterializeWritesConfigLast(t *testing.T) {
	tpl, err := templates.Lookup("classic")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	if err := tpl.Materialize(func(rel string, data []byte) error {
		if len(data) == 0 {
			t.Errorf("%s is empty", rel)
		}
		order = append(order, rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if order[len(order)-1] != templates.ConfigFile {
		t.Fatalf("config.yaml not last: %v", order)
	}
	cfg, err := tpl.Config()
	if err != nil {
		t.Fatal(err)
	}
	// Every prompt the config references is part of the written closure.
	written := strings.Join(order, "\n")
	for name, a := range cfg.Agents {
		if !strings.Contains(written, a.Prompt.Reference) {
			t.Errorf("agent %s prompt %s not written", name, a.Prompt.Reference)
		}
	}
	if _, err := templates.Lookup("paad"); err == nil || !strings.Contains(err.Error(), "classic") {
		t.Fatalf("unknown template error: %v", err)
	}
}

func TestClassicCardTypesAreFreshCopies(t *testing.T) {
	a := templates.ClassicCardTypes()
	delete(a, "task")
	if _, ok := templates.ClassicCardTypes()["task"]; !ok {
		t.Fatal("default card types shared between callers")
	}
}
