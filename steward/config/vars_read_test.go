package config_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/config"
)

// TestEverySettingIsRead keeps the settings table honest: a variable the
// table documents must be read by some non-test Go source of the module (a
// setting accepted but ignored is a defect), by its quoted name or through a
// prefix the table's comment names.
func TestEverySettingIsRead(t *testing.T) {
	root := filepath.Join("..", "..")
	var sources strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, filepath.Join("config", "vars.go")) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sources.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	src := sources.String()
	for _, v := range config.Vars {
		if strings.Contains(v.Name, "<JOB>") {
			continue // a family; steward/scheduler's settings-table test checks each job's row
		}
		if !strings.Contains(src, `"`+v.Name+`"`) {
			t.Errorf("%s is documented in vars.go but no Go source reads it: implement it, or remove the row", v.Name)
		}
	}
}
