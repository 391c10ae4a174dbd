package config

import (
	"fmt"
	"net/url"

	"go.yaml.in/yaml/v3"
)

// MarshalYAML writes promote in its source form: "current" or
// {latest_node: NAME}.
func (p Promote) MarshalYAML() (any, error) {
	if p.Current {
		return "current", nil
	}
	return map[string]string{"latest_node": p.LatestNode}, nil
}

// Redacted is the mask written in place of secret values.
const Redacted = "[redacted]"

// Redact returns the effective configuration as generic data safe to show
// an operator or a model: provider and account base URLs are omitted, API
// keys masked (the websearch key too), MCP environment and header values
// masked and MCP and websearch URLs reduced to scheme, host and path.
func Redact(cfg *Config) (map[string]any, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render configuration: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("render configuration: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	maskCreds := func(o map[string]any) {
		delete(o, "baseUrl")
		if _, ok := o["apiKey"]; ok {
			o["apiKey"] = Redacted
		}
	}
	for _, p := range asMap(m["providers"]) {
		pm := asMap(p)
		maskCreds(pm)
		for _, a := range asMap(pm["accounts"]) {
			maskCreds(asMap(a))
		}
	}
	for _, s := range asMap(m["mcpServers"]) {
		sm := asMap(s)
		for _, key := range []string{"env", "headers"} {
			for k := range asMap(sm[key]) {
				asMap(sm[key])[k] = Redacted
			}
		}
		if u, ok := sm["url"].(string); ok {
			sm["url"] = RedactURL(u)
		}
	}
	if ws := asMap(m["websearch"]); ws != nil {
		if _, ok := ws["apiKey"]; ok {
			ws["apiKey"] = Redacted
		}
		if u, ok := ws["url"].(string); ok {
			ws["url"] = RedactURL(u)
		}
	}
	return m, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// RedactURL removes userinfo, query and fragment from a URL.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Redacted
	}
	red := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	s := red.String()
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		s += "?" + Redacted
	}
	return s
}
