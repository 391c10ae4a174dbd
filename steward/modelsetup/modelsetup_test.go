package modelsetup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
)

func TestSaveKeepsOtherSettingsAndTheOldGatewayFile(t *testing.T) {
	home := t.TempDir()
	env := filepath.Join(home, "config.env")
	os.WriteFile(env, []byte("HOST_PORT=5000\nMODEL_API_KEY=old\n"), 0o644)
	gw := filepath.Join(home, "gateway.yaml")
	os.WriteFile(gw, []byte("old: file\n"), 0o600)
	c, err := Choice{BaseURL: "http://127.0.0.1:9/v1/", APIKey: "sk new#1", Models: map[string]string{"tier-5": "m5", "tier-1": "small"}}.Normalize("tier-5")
	if err != nil {
		t.Fatal(err)
	}
	if err := Save(home, gw, c); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(env)
	if string(b) != "HOST_PORT=5000\nMODEL_API_KEY='sk new#1'\n" {
		t.Errorf("config.env = %q", b)
	}
	if st, _ := os.Stat(env); st.Mode().Perm() != 0o600 {
		t.Errorf("config.env mode %v", st.Mode().Perm())
	}
	if old, _ := os.ReadFile(gw + ".bak"); string(old) != "old: file\n" {
		t.Errorf("backup = %q", old)
	}
	cfg, _, err := gateway.LoadConfig(gw)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Models["tier-1"][0].Model != "small" || cfg.Models["tier-6"][0].Model != "m5" || cfg.Providers["provider"].BaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("gateway.yaml = %+v", cfg)
	}
}

func TestNormalizeRefuses(t *testing.T) {
	for _, tc := range []struct {
		c    Choice
		want string
	}{
		{Choice{BaseURL: "api.openai.com", Models: map[string]string{"tier-5": "m"}}, "not an http(s) URL"},
		{Choice{BaseURL: "https://x/v1", Models: map[string]string{}}, "name the model for tier-5"},
		{Choice{BaseURL: "https://x/v1", Models: map[string]string{"tier-5": "m", "tier-9": "m"}}, `unknown tier "tier-9"`},
		{Choice{BaseURL: "https://x/v1", APIKey: "a'b", Models: map[string]string{"tier-5": "m"}}, "quote"},
	} {
		if _, err := tc.c.Normalize("tier-5"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.c, err, tc.want)
		}
	}
}
