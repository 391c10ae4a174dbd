// Package modelsetup is the first-run model set-up shared by the web app's
// first-run screen and `steward setup`: it checks one OpenAI-compatible
// provider with a real request, then writes gateway.yaml and the provider's
// key into config.env (mode 0600).
package modelsetup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/steward/config"
)

// Tiers are the public model names set-up assigns, cheapest first.
var Tiers = []string{"tier-1", "tier-2", "tier-3", "tier-4", "tier-5", "tier-6"}

// KeyVar is the config.env variable that holds the provider key; gateway.yaml
// names it (the key itself never goes into gateway.yaml).
const KeyVar = "MODEL_API_KEY"

// providerName is the provider's name in the written gateway.yaml.
const providerName = "provider"

// Choice is what the user picked.
type Choice struct {
	BaseURL string `json:"baseUrl"`
	APIKey  string `json:"apiKey"`
	// Models maps a tier to the provider's model name; tiers left empty take
	// the chat tier's model.
	Models map[string]string `json:"models"`
}

// Normalize checks c and fills every tier, returning a plain error for the
// first problem.
func (c Choice) Normalize(chatTier string) (Choice, error) {
	c.BaseURL = strings.TrimRight(strings.TrimSpace(c.BaseURL), "/")
	c.APIKey = strings.TrimSpace(c.APIKey)
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("the base URL %q is not an http(s) URL such as https://api.openai.com/v1", c.BaseURL)
	}
	if strings.ContainsAny(c.APIKey, "'\r\n") {
		return c, errors.New("the key contains a quote or a line break; paste only the key")
	}
	if u.User != nil {
		return c, errors.New("put the key in the key field, not in the base URL")
	}
	chat := strings.TrimSpace(c.Models[chatTier])
	if chat == "" {
		return c, fmt.Errorf("name the model for %s (the one chats use)", chatTier)
	}
	models := map[string]string{}
	for _, t := range Tiers {
		if m := strings.TrimSpace(c.Models[t]); m != "" {
			models[t] = m
		} else {
			models[t] = chat
		}
	}
	for t := range c.Models {
		if _, ok := models[t]; !ok {
			return c, fmt.Errorf("unknown tier %q: the tiers are %s", t, strings.Join(Tiers, ", "))
		}
	}
	c.Models = models
	return c, nil
}

// Test sends one real chat request for the chat tier's model and returns a
// plain-language error when the provider does not answer with a completion.
func Test(ctx context.Context, client *http.Client, c Choice, chatTier string) error {
	if client == nil {
		client = &http.Client{}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model":      c.Models[chatTier],
		"messages":   []map[string]string{{"role": "user", "content": "Reply with the word OK."}},
		"max_tokens": 8,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build the test request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	res, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not answer within 60 s", c.BaseURL)
		}
		return fmt.Errorf("could not reach %s: is the base URL right and the server running?", c.BaseURL)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var out struct {
		Choices []json.RawMessage `json:"choices"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &out)
	msg := scrub(out.Error.Message, c.APIKey)
	switch {
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		return fmt.Errorf("the provider refused the key (%s)%s", res.Status, suffix(msg))
	case res.StatusCode == http.StatusNotFound:
		return fmt.Errorf("the provider does not know model %q or the base URL is wrong (%s)%s", c.Models[chatTier], res.Status, suffix(msg))
	case res.StatusCode/100 != 2:
		return fmt.Errorf("the provider answered %s%s", res.Status, suffix(msg))
	case len(out.Choices) == 0:
		return fmt.Errorf("the provider answered but not with a chat completion: is %s an OpenAI-compatible base URL (ending in /v1)?", c.BaseURL)
	}
	return nil
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[key]")
}

// GatewayConfig is the gateway.yaml that c stands for.
func GatewayConfig(c Choice) *gateway.Config {
	p := gateway.Provider{BaseURL: c.BaseURL}
	if c.APIKey != "" {
		p.APIKeyEnv = KeyVar
	}
	cfg := &gateway.Config{Providers: map[string]gateway.Provider{providerName: p},
		Models: map[string][]gateway.Candidate{}, Rates: map[string]gateway.Rate{}}
	for t, m := range c.Models {
		cfg.Models[t] = []gateway.Candidate{{Provider: providerName, Model: m}}
		cfg.Rates[providerName+"/"+m] = gateway.Rate{}
	}
	return cfg
}

// Save writes gateway.yaml (the previous one, if any, is kept as
// gateway.yaml.bak) and sets KeyVar in home's config.env, both mode 0600.
func Save(home, gatewayPath string, c Choice) error {
	cfg := GatewayConfig(c)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("the gateway configuration would be invalid: %w", err)
	}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode gateway.yaml: %w", err)
	}
	y = append([]byte("# Written by Steward's set-up. Rates are 0 until you fill in the provider's prices\n# (USD per million tokens) to see costs on the Usage page.\n"), y...)
	if _, err := os.Stat(gatewayPath); err == nil {
		if err := os.Rename(gatewayPath, gatewayPath+".bak"); err != nil {
			return fmt.Errorf("keep the previous %s: %w", gatewayPath, err)
		}
	}
	if err := writeFile(gatewayPath, y); err != nil {
		return err
	}
	if c.APIKey != "" {
		if err := setEnv(filepath.Join(home, config.EnvFileName), KeyVar, c.APIKey); err != nil {
			return err
		}
	}
	return nil
}

// setEnv replaces or appends name=value in a config.env file, keeping every
// other line as it was.
func setEnv(path, name, value string) error {
	var lines []string
	if b, err := os.ReadFile(path); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			k, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
			if ok && strings.TrimSpace(k) == name {
				continue
			}
			lines = append(lines, line)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	lines = append(lines, name+"="+quote(value))
	return writeFile(path, []byte(strings.Join(lines, "\n")+"\n"))
}

func quote(v string) string {
	if strings.ContainsAny(v, " \t#\"'\\") {
		return "'" + v + "'"
	}
	return v
}

// writeFile replaces path atomically with mode 0600.
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
