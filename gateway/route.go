package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// target is one concrete upstream: a provider model with its resolved key.
type target struct {
	provider string
	model    string
	baseURL  string
	apiKey   string
	keyEnv   string
	headers  map[string]string
	stream   bool
	group    string // Candidate.Group
	// identity collapses aliases: the same base URL, model, key and headers
	// are one target however many provider names point at them.
	identity string
}

func (t *target) String() string { return t.provider + "/" + t.model }

func newTarget(name string, p Provider, model string, lookup func(string) (string, bool)) *target {
	t := &target{provider: name, model: model, baseURL: strings.TrimRight(p.BaseURL, "/"), keyEnv: p.APIKeyEnv,
		headers: p.Headers, stream: p.Stream == nil || *p.Stream}
	if p.APIKeyEnv != "" {
		if v, ok := lookup(p.APIKeyEnv); ok {
			t.apiKey = strings.TrimSpace(v)
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", t.baseURL, model, t.apiKey)
	hk := make([]string, 0, len(p.Headers))
	for k, v := range p.Headers {
		hk = append(hk, strings.ToLower(k)+"="+v)
	}
	sort.Strings(hk)
	for _, kv := range hk {
		fmt.Fprintf(h, "\x00%s", kv)
	}
	t.identity = hex.EncodeToString(h.Sum(nil))
	return t
}

// buildChains computes, for every public name, the ordered and de-duplicated
// targets a request tries: the name's own candidates; for tier-N, then the
// higher tiers N+1… in order (escalation), then the lower paid tiers N-1…2
// (the sweep; tier-1 is the local rung and is not part of it), unless the
// configuration turns escalation off.
func buildChains(cfg *Config, lookup func(string) (string, bool)) map[string][]*target {
	own := map[string][]*target{}
	for name, cands := range cfg.Models {
		for _, c := range cands {
			t := newTarget(c.Provider, cfg.Providers[c.Provider], c.Model, lookup)
			t.group = c.Group
			own[name] = append(own[name], t)
		}
	}
	maxTier := 0
	for name := range cfg.Models {
		if n, ok := tierNumber(name); ok && n > maxTier {
			maxTier = n
		}
	}
	chains := map[string][]*target{}
	for name := range cfg.Models {
		order := []string{name}
		if n, ok := tierNumber(name); ok && (cfg.Escalation == nil || *cfg.Escalation) {
			for up := n + 1; up <= maxTier; up++ {
				order = append(order, fmt.Sprintf("tier-%d", up))
			}
			for down := n - 1; down >= 2; down-- {
				order = append(order, fmt.Sprintf("tier-%d", down))
			}
		}
		seen := map[string]bool{}
		for _, rung := range order {
			for _, t := range own[rung] {
				if !seen[t.identity] {
					seen[t.identity] = true
					chains[name] = append(chains[name], t)
				}
			}
		}
	}
	return chains
}
