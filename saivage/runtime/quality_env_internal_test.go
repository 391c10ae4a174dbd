package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/quality"
)

// TestQualityFromEnv: the code-quality runner is built from the node
// modules, or from a native Ruff alone (SAIVAGE_QUALITY_RUFF); a Ruff path
// that cannot run and a modules path that is not a directory stop start-up
// naming the variable; with neither the runner stays unset (the tools say
// they are unavailable).
func TestQualityFromEnv(t *testing.T) {
	dir := t.TempDir()
	ruff := filepath.Join(dir, "ruff")
	if err := os.WriteFile(ruff, []byte("#!/bin/sh\necho 'ruff 0.17.5'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+"-nothing-here") // no ruff found on PATH
	for _, c := range []struct {
		name    string
		env     map[string]string
		wantErr string // "" for success
		want    *quality.Runner
	}{
		{"neither", map[string]string{}, "", nil},
		{"native ruff alone", map[string]string{quality.EnvRuff: ruff}, "", &quality.Runner{Ruff: ruff}},
		{"modules and ruff", map[string]string{EnvQualityModules: dir, quality.EnvRuff: ruff}, "", &quality.Runner{NodeModules: dir, Ruff: ruff}},
		{"modules alone", map[string]string{EnvQualityModules: dir}, "", &quality.Runner{NodeModules: dir}},
		{"ruff not executable", map[string]string{quality.EnvRuff: plain}, quality.EnvRuff, nil},
		{"ruff relative", map[string]string{quality.EnvRuff: "bin/ruff"}, quality.EnvRuff, nil},
		{"modules not a directory", map[string]string{EnvQualityModules: plain}, EnvQualityModules, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o Options
			err := o.BackendsFromEnv(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch got, _ := o.Quality.(quality.Runner); {
			case c.want == nil && o.Quality != nil:
				t.Fatalf("Quality = %#v, want none", o.Quality)
			case c.want != nil && (got.Ruff != c.want.Ruff || got.NodeModules != c.want.NodeModules):
				t.Fatalf("Quality = %#v, want %#v", o.Quality, *c.want)
			}
		})
	}
}
