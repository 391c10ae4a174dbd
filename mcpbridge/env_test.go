package mcpbridge

import (
	"slices"
	"strings"
	"testing"
)

func TestAllowedEnvAndChildEnv(t *testing.T) {
	host := []string{"PATH=/bin", "HOME=/home/u", "STEWARD_AUTH_TOKEN=t", "DEEPSEEK_API_KEY=k", "LANG=en_US.UTF-8", "MALFORMED"}
	base := AllowedEnv(host, DefaultEnvAllowList())
	if want := []string{"PATH=/bin", "HOME=/home/u", "LANG=en_US.UTF-8"}; !slices.Equal(base, want) {
		t.Errorf("AllowedEnv = %v, want %v", base, want)
	}
	got := childEnv(base, map[string]string{"LANG": "C", "API_KEY": "mine"})
	if want := []string{"PATH=/bin", "HOME=/home/u", "API_KEY=mine", "LANG=C"}; !slices.Equal(got, want) {
		t.Errorf("childEnv = %v, want %v", got, want)
	}
	if env := childEnv(nil, nil); env == nil {
		t.Error("childEnv(nil, nil) is nil, which exec reads as the host's whole environment")
	}
}

func TestSecretMasker(t *testing.T) {
	mask := secretMasker(ServerConfig{
		Name: "s",
		Env:  map[string]string{"TOKEN": "tok-abcdefgh", "DEBUG": "1", "ROOT": "/srv/data/files"},
	})
	in := "token tok-abcdefgh debug 1 root /srv/data/files"
	if got, want := mask(in), "token [redacted] debug 1 root /srv/data/files"; got != want {
		t.Errorf("mask(%q) = %q, want %q", in, got, want)
	}
	remote := secretMasker(ServerConfig{
		Name: "r", URL: "https://h/mcp?api_key=query-secret-1",
		Headers: map[string]string{"Authorization": "Bearer header-secret-2"},
	})
	out := remote("sent Bearer header-secret-2; token header-secret-2 alone; url https://h/mcp?api_key=query-secret-1")
	if strings.Contains(out, "secret-") {
		t.Errorf("secret survived: %q", out)
	}
	if none := secretMasker(ServerConfig{Name: "n", Command: "x"}); none("unchanged text") != "unchanged text" {
		t.Error("masker without secrets changed text")
	}
}
