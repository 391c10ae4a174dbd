package gateway_test

import (
	"fmt"

	"github.com/agentstack/agentstack/gateway"
)

func ExampleParseConfig() {
	_, err := gateway.ParseConfig([]byte(`
providers:
  openai: { base_url: https://api.openai.com/v1, api_key_env: sk-pasted-key }
models:
  tier-5: [ { provider: opena, model: gpt-4.1-mini } ]
`))
	fmt.Println(err)
	// Output:
	// providers.openai.api_key_env: not an environment variable name (put the variable's name here, never the key)
	// models.tier-5[0].provider: unknown provider "opena"
}
