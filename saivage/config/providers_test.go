package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
)

// providersBlock is the classic template's providers section, which the
// rows below replace.
const providersBlock = `providers:
  gateway:
    baseUrl: http://127.0.0.1:4000/v1
    models: [tier-5, tier-3]
    capabilities:
      contextWindowTokens: 128000
      maxOutputTokens: 8192
      toolsMode: native
      transportProtocol: chat_completions
`

func TestValidateProviders(t *testing.T) {
	tests := []struct {
		name, providers, wantPath, wantMsg string // wantPath "" = valid
	}{
		{"responses with reasoning", `providers:
  gateway:
    baseUrl: https://api.openai.com/v1
    apiKey: sk-x
    models: [tier-5, tier-3]
    capabilities: {transportProtocol: responses, responsesReasoning: {effort: high}, imageInput: false}
`, "", ""},
		{"codex account with an auth profile", `providers:
  gateway:
    baseUrl: https://chatgpt.com/backend-api/codex
    models: [tier-5, tier-3]
    accounts:
      work: {authProfile: codex-work, priority: 2, capabilities: {transportProtocol: codex}}
      home: {authProfile: codex.home, priority: 1, models: [tier-3]}
`, "", ""},
		{"unknown protocol", strings.Replace(providersBlock, "chat_completions", "grpc", 1), "providers.gateway.capabilities.transportProtocol", "chat_completions, responses or codex"},
		{"reasoning on chat completions", strings.Replace(providersBlock, "toolsMode: native", "toolsMode: native\n      responsesReasoning: {effort: low}", 1), "providers.gateway.capabilities.responsesReasoning", "only with transportProtocol responses or codex"},
		{"bad effort", `providers:
  gateway:
    baseUrl: https://a/v1
    capabilities: {transportProtocol: responses, responsesReasoning: {effort: max}}
`, "providers.gateway.capabilities.responsesReasoning.effort", "low, medium or high"},
		{"quirks are refused", strings.Replace(providersBlock, "toolsMode: native", "toolsMode: native\n      quirks: [no_system_role]", 1), "providers.gateway.capabilities.quirks", "implements no provider quirks"},
		{"key and profile", strings.Replace(providersBlock, "models: [tier-5, tier-3]", "models: [tier-5, tier-3]\n    apiKey: k\n    authProfile: p", 1), "providers.gateway.authProfile", "not both"},
		{"profile path escape", strings.Replace(providersBlock, "models: [tier-5, tier-3]", "models: [tier-5, tier-3]\n    authProfile: ../x", 1), "providers.gateway.authProfile", "not a profile name"},
		{"output not below window", strings.Replace(providersBlock, "maxOutputTokens: 8192", "maxOutputTokens: 128000", 1), "providers.gateway.capabilities.maxOutputTokens", "smaller than contextWindowTokens"},
		{"capabilities of an unlisted model", strings.Replace(providersBlock, "models: [tier-5, tier-3]", "models: [tier-5, tier-3]\n    modelCapabilities:\n      tier-9: {imageInput: true}", 1), "providers.gateway.modelCapabilities.tier-9", "does not list model"},
		{"account model outside the provider's", `providers:
  gateway:
    baseUrl: https://a/v1
    models: [tier-5, tier-3]
    accounts:
      a: {apiKey: k, models: [tier-9]}
`, "providers.gateway.accounts.a.models", "not one of the provider's models"},
		{"negative account priority", `providers:
  gateway:
    baseUrl: https://a/v1
    accounts:
      a: {apiKey: k, priority: -1}
`, "providers.gateway.accounts.a.priority", "negative"},
	}
	base := classicYAML(t)
	if !strings.Contains(base, providersBlock) {
		t.Fatal("the classic template's providers block changed; update providersBlock")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(base, providersBlock, tt.providers, 1)
			_, err := config.Load(config.LoadOptions{Path: writeConfig(t, y), LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
			if tt.wantPath == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath || !strings.Contains(ce.Msg, tt.wantMsg) {
				t.Fatalf("err = %v, want path %q with %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}
