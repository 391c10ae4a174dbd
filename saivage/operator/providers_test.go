package operator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
)

func TestProvidersReportCredentialKindNeverSecrets(t *testing.T) {
	const profileToken = "tok-profile-secret-abcdef123456"
	s := startEdited(t, nil, func(dir, cfg string) string {
		profiles := filepath.Join(dir, config.AuthProfileDir)
		if err := os.MkdirAll(profiles, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(profiles, "work.json"), []byte(`{"type":"token","token":"`+profileToken+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return strings.Replace(cfg, "    apiKey: ${PROVIDER_KEY}\n",
			"    apiKey: ${PROVIDER_KEY}\n    accounts:\n      work: {authProfile: work}\n      spare: {}\n", 1)
	})
	code, _, body := s.raw("GET", "/api/providers", token, "")
	if code != 200 {
		t.Fatalf("providers = %d %s", code, body)
	}
	for _, secret := range []string{profileToken, "sk-provider", "127.0.0.1"} {
		if strings.Contains(body, secret) {
			t.Errorf("providers show %q: %s", secret, body)
		}
	}
	var out struct {
		Providers []struct {
			Name        string
			Auth        string
			HasAPIKey   bool              `json:"has_api_key"`
			AccountAuth map[string]string `json:"account_auth"`
		}
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Providers) != 1 {
		t.Fatalf("providers %s: %v", body, err)
	}
	p := out.Providers[0]
	if p.Auth != "api_key" || !p.HasAPIKey {
		t.Errorf("provider auth %q has_api_key %v", p.Auth, p.HasAPIKey)
	}
	// The profile account has credentials of its own; the bare account
	// sends the provider's key.
	if p.AccountAuth["work"] != "profile" || p.AccountAuth["spare"] != "api_key" || len(p.AccountAuth) != 2 {
		t.Errorf("account auth %v", p.AccountAuth)
	}
}
