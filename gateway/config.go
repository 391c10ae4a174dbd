package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/yamlstrict"
)

// Config maps public model names to ordered provider candidates and prices
// them. Its YAML shape is documented in the README.
type Config struct {
	Providers map[string]Provider    `yaml:"providers"`
	Models    map[string][]Candidate `yaml:"models"`
	// Rates are USD per million tokens, keyed "provider/model".
	Rates map[string]Rate `yaml:"rates"`
	// Escalation: false keeps every public name to its own candidates.
	// By default (true) a tier-N name falls back to the higher tiers, then
	// the lower paid ones.
	Escalation *bool `yaml:"escalation,omitempty"`
}

// Provider is one OpenAI-compatible upstream.
type Provider struct {
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the key; the key
	// itself never appears in the file.
	APIKeyEnv string            `yaml:"api_key_env,omitempty"`
	Headers   map[string]string `yaml:"headers,omitempty"`
	// Stream: false marks a provider that cannot stream; streamed requests
	// are then asked non-streaming and re-emitted as SSE.
	Stream *bool `yaml:"stream,omitempty"`
}

// Candidate is one provider model that can serve a public name.
type Candidate struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	// ContextWindow is the model's context in tokens (0: not declared).
	// Clients size their conversations by it (ContextWindow).
	ContextWindow int `yaml:"context_window,omitempty"`
	// Group names candidates that are accounts of one logical candidate
	// (set by Saivage, which binds one gateway provider per account): a 401
	// that survived the account's own token refresh moves on to the next
	// candidate only when it is of the same group.
	Group string `yaml:"-"`
}

// ContextWindow returns the context, in tokens, that every candidate of the
// public model name can hold: the smallest declared window, since a
// fallback may land on any of them; 0 when a candidate declares none (or the
// name is unknown), and a conversation is then only compacted when a
// provider rejects it.
func (c *Config) ContextWindow(public string) int {
	cands := c.Models[public]
	if len(cands) == 0 {
		return 0
	}
	w := cands[0].ContextWindow
	for _, cand := range cands[1:] {
		w = min(w, cand.ContextWindow)
	}
	return max(w, 0)
}

// Rate prices one provider model, USD per million tokens.
type Rate struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheRead  float64 `yaml:"cache_read,omitempty" json:"cache_read"`
	CacheWrite float64 `yaml:"cache_write,omitempty" json:"cache_write"`
}

// Default upstreams of the built-in configuration.
const (
	DefaultOllamaURL   = "http://127.0.0.1:11434/v1"
	DefaultDeepSeekURL = "https://api.deepseek.com/v1"
)

// DefaultConfig is used when no gateway.yaml exists: tier-1 and local-embed
// on a local Ollama, tier-2…tier-5 on DeepSeek V4 Flash and tier-6 on
// DeepSeek V4 Pro.
func DefaultConfig() *Config {
	flash := []Candidate{{Provider: "deepseek", Model: "deepseek-v4-flash"}}
	return &Config{
		Providers: map[string]Provider{
			"ollama":   {BaseURL: DefaultOllamaURL},
			"deepseek": {BaseURL: DefaultDeepSeekURL, APIKeyEnv: "DEEPSEEK_API_KEY"},
		},
		Models: map[string][]Candidate{
			"tier-1":      {{Provider: "ollama", Model: "llama3.2:1b"}},
			"tier-2":      flash,
			"tier-3":      flash,
			"tier-4":      flash,
			"tier-5":      flash,
			"tier-6":      {{Provider: "deepseek", Model: "deepseek-v4-pro"}},
			"local-embed": {{Provider: "ollama", Model: "bge-m3"}},
		},
		Rates: map[string]Rate{
			"deepseek/deepseek-v4-flash": {Input: 0.27, Output: 1.10, CacheRead: 0.07, CacheWrite: 0.27},
			"deepseek/deepseek-v4-pro":   {Input: 0.55, Output: 2.19, CacheRead: 0.14, CacheWrite: 0.55},
			"ollama/llama3.2:1b":         {},
			"ollama/bge-m3":              {},
		},
	}
}

// LoadConfig reads path strictly (unknown keys are errors naming their line).
// A missing file gives DefaultConfig and found=false.
func LoadConfig(path string) (cfg *Config, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read gateway config %s: %w", path, err)
	}
	cfg, err = ParseConfig(b)
	if err != nil {
		return nil, true, fmt.Errorf("gateway config %s: %w", path, err)
	}
	return cfg, true, nil
}

// ParseConfig decodes and validates a gateway.yaml document.
func ParseConfig(b []byte) (*Config, error) {
	var cfg Config
	if err := yamlstrict.Decode(b, &cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// Validate checks that every name the file uses resolves, reporting all
// problems at once with the key that holds them.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Providers) == 0 {
		errs = append(errs, errors.New("providers: at least one provider is required"))
	}
	for _, name := range sortedKeys(c.Providers) {
		p := c.Providers[name]
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("providers.%s.base_url: %q is not an absolute http(s) URL", name, p.BaseURL))
		} else if u.User != nil {
			errs = append(errs, fmt.Errorf("providers.%s.base_url: credentials in the URL are not allowed; use api_key_env", name))
		}
		if p.APIKeyEnv != "" && !envName().MatchString(p.APIKeyEnv) {
			// The value is not echoed: a user who pasted the key itself here
			// must not find it in a log.
			errs = append(errs, fmt.Errorf("providers.%s.api_key_env: not an environment variable name (put the variable's name here, never the key)", name))
		}
		for h := range p.Headers {
			if strings.EqualFold(h, "Authorization") {
				errs = append(errs, fmt.Errorf("providers.%s.headers.%s: set the key through api_key_env, never in the file", name, h))
			}
		}
	}
	if len(c.Models) == 0 {
		errs = append(errs, errors.New("models: at least one public model is required"))
	}
	for _, name := range sortedKeys(c.Models) {
		if len(c.Models[name]) == 0 {
			errs = append(errs, fmt.Errorf("models.%s: no candidates", name))
		}
		for i, cand := range c.Models[name] {
			if _, ok := c.Providers[cand.Provider]; !ok {
				errs = append(errs, fmt.Errorf("models.%s[%d].provider: unknown provider %q", name, i, cand.Provider))
			}
			if cand.Model == "" {
				errs = append(errs, fmt.Errorf("models.%s[%d].model: empty", name, i))
			}
			if cand.ContextWindow < 0 {
				errs = append(errs, fmt.Errorf("models.%s[%d].context_window: %d tokens cannot be negative", name, i, cand.ContextWindow))
			}
		}
	}
	for _, key := range sortedKeys(c.Rates) {
		prov, _, ok := strings.Cut(key, "/")
		if !ok {
			errs = append(errs, fmt.Errorf("rates.%s: key must be provider/model", key))
		} else if _, known := c.Providers[prov]; !known {
			errs = append(errs, fmt.Errorf("rates.%s: unknown provider %q", key, prov))
		}
		r := c.Rates[key]
		if r.Input < 0 || r.Output < 0 || r.CacheRead < 0 || r.CacheWrite < 0 {
			errs = append(errs, fmt.Errorf("rates.%s: rates cannot be negative", key))
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tierNumber returns N for a public name "tier-N".
func tierNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "tier-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
