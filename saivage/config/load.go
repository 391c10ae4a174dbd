package config

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// RootCardType is the card type of every project's root card.
const RootCardType = "project"

// LoadOptions configures Load.
type LoadOptions struct {
	// Path is the configuration file to read.
	Path string
	// LookupEnv resolves ${NAME}; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// DefaultCardTypes returns the complete built-in card type map used when
	// the file omits card_types (no per-key merge). Required.
	DefaultCardTypes func() map[string]CardType
}

// Load reads, interpolates and strictly decodes a configuration file, resolves
// an omitted card_types to the complete default map and validates the shape
// of every section. Cross references between agents, tools, models, prompts
// and workflow nodes are checked by the workflow compiler.
func Load(opts LoadOptions) (*Config, error) {
	f, err := os.Open(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", opts.Path, err)
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	cfg, err := Decode(data, DecodeOptions{File: opts.Path, LookupEnv: lookup})
	if err != nil {
		return nil, err
	}
	if cfg.CardTypes == nil {
		if opts.DefaultCardTypes == nil {
			return nil, &Error{File: opts.Path, Path: "card_types", Msg: "omitted and no default card types were supplied"}
		}
		cfg.CardTypes = opts.DefaultCardTypes()
	}
	if err := Validate(cfg); err != nil {
		if e, ok := err.(*Error); ok {
			e.File = opts.Path
		}
		return nil, err
	}
	return cfg, nil
}

// Validate checks the shape of each section: required fields, enumerations,
// ranges, union variants and references inside the models section. It
// returns the first problem as an *Error naming its key path.
func Validate(cfg *Config) error {
	v := validator{}
	v.server(cfg.Server)
	v.providers(cfg.Providers)
	v.models(cfg.Models, cfg.Providers)
	v.agents(cfg)
	v.oversight(cfg)
	v.compaction(cfg.Compaction, cfg.Providers)
	v.mcp(cfg.MCPServers)
	v.git(cfg)
	v.cardTypes(cfg.CardTypes)
	v.websearch(cfg.WebSearch)
	return v.err
}

type validator struct{ err error }

func (v *validator) fail(path, format string, args ...any) {
	if v.err == nil {
		v.err = &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

func (v *validator) server(s *Server) {
	if s == nil {
		return
	}
	if s.Port != 0 && (s.Port < 1 || s.Port > 65535) {
		v.fail("server.port", "port %d is outside 1..65535", s.Port)
	}
}

func (v *validator) providers(ps map[string]Provider) {
	for _, name := range sortedKeys(ps) {
		p := ps[name]
		path := "providers." + name
		if strings.ContainsAny(name, "/:") {
			v.fail(path, "provider names cannot contain '/' or ':'")
		}
		if p.BaseURL == "" && len(p.Accounts) == 0 {
			v.fail(path+".baseUrl", "required (or declare accounts with their own baseUrl)")
		}
		v.credentials(path, p.APIKey, p.AuthProfile, p.Priority)
		v.capabilities(path+".capabilities", p.Capabilities)
		for _, m := range sortedKeys(p.ModelCapabilities) {
			c := p.ModelCapabilities[m]
			v.capabilities(path+".modelCapabilities."+m, &c)
			if len(p.Models) > 0 && !slices.Contains(p.Models, m) {
				v.fail(path+".modelCapabilities."+m, "the provider does not list model %q", m)
			}
		}
		for _, an := range sortedKeys(p.Accounts) {
			a := p.Accounts[an]
			ap := path + ".accounts." + an
			if strings.ContainsAny(an, "/:") {
				v.fail(ap, "account names cannot contain '/' or ':'")
			}
			if a.BaseURL == "" && p.BaseURL == "" {
				v.fail(ap+".baseUrl", "required when the provider has no baseUrl")
			}
			v.credentials(ap, a.APIKey, a.AuthProfile, a.Priority)
			v.capabilities(ap+".capabilities", a.Capabilities)
			if len(p.Models) > 0 {
				for _, m := range a.Models {
					if !slices.Contains(p.Models, m) {
						v.fail(ap+".models", "model %q is not one of the provider's models", m)
					}
				}
			}
		}
	}
}

// authProfileName is the file-name stem an authProfile may use.
var authProfileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (v *validator) credentials(path, apiKey, profile string, priority int) {
	if priority < 0 {
		v.fail(path+".priority", "must not be negative")
	}
	if profile == "" {
		return
	}
	if apiKey != "" {
		v.fail(path+".authProfile", "set apiKey or authProfile, not both")
	}
	if !authProfileName.MatchString(profile) || strings.Contains(profile, "..") {
		v.fail(path+".authProfile", "%q is not a profile name (letters, digits, '.', '_', '-'; it names %s/NAME.json)", profile, AuthProfileDir)
	}
}

// Transport protocols a provider capability may name.
var transportProtocols = []string{"chat_completions", "responses", "codex"}

func (v *validator) capabilities(path string, c *Capabilities) {
	if c == nil {
		return
	}
	if c.ContextWindowTokens < 0 {
		v.fail(path+".contextWindowTokens", "must not be negative")
	}
	if c.MaxOutputTokens < 0 {
		v.fail(path+".maxOutputTokens", "must not be negative")
	}
	if c.ContextWindowTokens > 0 && c.MaxOutputTokens >= c.ContextWindowTokens {
		v.fail(path+".maxOutputTokens", "must be smaller than contextWindowTokens (%d)", c.ContextWindowTokens)
	}
	if c.ToolsMode != "" && !slices.Contains([]string{"native", "none"}, c.ToolsMode) {
		v.fail(path+".toolsMode", "must be native or none, not %q", c.ToolsMode)
	}
	if c.TransportProtocol != "" && !slices.Contains(transportProtocols, c.TransportProtocol) {
		v.fail(path+".transportProtocol", "must be chat_completions, responses or codex, not %q", c.TransportProtocol)
	}
	if c.ResponsesReasoning != nil {
		if !slices.Contains([]string{"low", "medium", "high"}, c.ResponsesReasoning.Effort) {
			v.fail(path+".responsesReasoning.effort", "must be low, medium or high")
		}
		if c.TransportProtocol != "responses" && c.TransportProtocol != "codex" {
			v.fail(path+".responsesReasoning", "applies only with transportProtocol responses or codex in the same capabilities")
		}
	}
	// This build knows no provider quirks; naming one would be accepted
	// and do nothing.
	for _, q := range c.Quirks {
		v.fail(path+".quirks", "unknown quirk %q: this build implements no provider quirks", q)
	}
}

// Candidate is a parsed route candidate.
type Candidate struct {
	Provider, Account, Model string
}

// ParseCandidate parses "provider/model" or "provider:account/model".
func ParseCandidate(s string) (Candidate, error) {
	head, model, ok := strings.Cut(s, "/")
	if !ok || head == "" || model == "" {
		return Candidate{}, fmt.Errorf("candidate %q is not provider/model or provider:account/model", s)
	}
	prov, acct, hasAcct := strings.Cut(head, ":")
	if prov == "" || (hasAcct && acct == "") {
		return Candidate{}, fmt.Errorf("candidate %q has an empty provider or account", s)
	}
	return Candidate{Provider: prov, Account: acct, Model: model}, nil
}

func (v *validator) candidate(path, s string, ps map[string]Provider) {
	c, err := ParseCandidate(s)
	if err != nil {
		v.fail(path, "%v", err)
		return
	}
	p, ok := ps[c.Provider]
	if !ok {
		v.fail(path, "unknown provider %q", c.Provider)
		return
	}
	models := p.Models
	if c.Account != "" {
		a, ok := p.Accounts[c.Account]
		if !ok {
			v.fail(path, "provider %q has no account %q", c.Provider, c.Account)
			return
		}
		if len(a.Models) > 0 {
			models = a.Models
		}
	}
	if len(models) > 0 && !slices.Contains(models, c.Model) {
		v.fail(path, "provider %q does not list model %q", c.Provider, c.Model)
	}
}

func (v *validator) models(m *Models, ps map[string]Provider) {
	if m == nil {
		return
	}
	for _, name := range sortedKeys(m.Routes) {
		r := m.Routes[name]
		path := "models.routes." + name
		if len(r.Candidates) == 0 {
			v.fail(path+".candidates", "at least one candidate is required")
		}
		for i, c := range r.Candidates {
			v.candidate(fmt.Sprintf("%s.candidates[%d]", path, i), c, ps)
		}
		if r.Profile != "" {
			if _, ok := m.Profiles[r.Profile]; !ok {
				v.fail(path+".profile", "unknown profile %q", r.Profile)
			}
		}
		if r.MaxTokens < 0 {
			v.fail(path+".max_tokens", "must not be negative")
		}
		if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 2) {
			v.fail(path+".temperature", "must be within 0..2")
		}
	}
	v.requestTime("models.request_inactivity_ms", m.RequestInactivityMS)
	v.requestTime("models.request_limit_ms", m.RequestLimitMS)
	for _, name := range sortedKeys(m.Equivalents) {
		if len(m.Equivalents[name]) == 0 {
			v.fail("models.equivalents."+name, "list at least one equivalent model")
		}
	}
}

func (v *validator) requestTime(path string, ms int) {
	if ms != 0 && (ms < MinRequestTimeMS || ms > MaxRequestTimeMS) {
		v.fail(path, "must be within %d..%d milliseconds (1 s to 24 h), not %d", MinRequestTimeMS, MaxRequestTimeMS, ms)
	}
}

func (v *validator) agents(cfg *Config) {
	for _, name := range sortedKeys(cfg.Agents) {
		a := cfg.Agents[name]
		path := "agents." + name
		if a.Session != "card" && a.Session != "global" {
			v.fail(path+".session", `must be "card" or "global", not %q`, a.Session)
		}
		if a.Prompt == nil || a.Prompt.Reference == "" {
			v.fail(path+".prompt.reference", "required")
		}
		if a.ModelRoute == "" {
			v.fail(path+".model_route", "required")
		} else if cfg.Models == nil || cfg.Models.Routes[a.ModelRoute].Candidates == nil {
			v.fail(path+".model_route", "unknown route %q (declare it under models.routes)", a.ModelRoute)
		}
		for i, g := range a.RecordWrites {
			if g == "" {
				v.fail(fmt.Sprintf("%s.record_writes[%d]", path, i), "empty glob")
			}
		}
	}
	if cfg.AnalystAgent == "" {
		v.fail("analyst_agent", "required")
	} else if a, ok := cfg.Agents[cfg.AnalystAgent]; !ok {
		v.fail("analyst_agent", "unknown agent %q", cfg.AnalystAgent)
	} else if a.Session != "global" {
		v.fail("analyst_agent", "agent %q must have session: global", cfg.AnalystAgent)
	}
}

func (v *validator) oversight(cfg *Config) {
	o := cfg.Oversight
	if o == nil {
		return
	}
	if o.Agent == "" {
		v.fail("oversight.agent", "required")
	} else if a, ok := cfg.Agents[o.Agent]; !ok {
		v.fail("oversight.agent", "unknown agent %q", o.Agent)
	} else if a.Session != "global" {
		v.fail("oversight.agent", "agent %q must have session: global", o.Agent)
	}
	if o.IntervalSeconds < 1 {
		v.fail("oversight.interval_seconds", "must be at least 1")
	}
}

func (v *validator) compaction(c *Compaction, ps map[string]Provider) {
	if c == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"context_utilization_fraction", c.ContextUtilizationFraction}, {"tail_fraction", c.TailFraction}, {"trigger_fraction", c.TriggerFraction}} {
		if f.v <= 0 || f.v > 1 {
			v.fail("compaction."+f.name, "must be within (0, 1]")
		}
	}
	if s := c.SummarizerCandidate; s != nil {
		name := s.Provider
		if s.Account != "" {
			name += ":" + s.Account
		}
		v.candidate("compaction.summarizer_candidate", name+"/"+s.Model, ps)
	}
}

func (v *validator) mcp(ms map[string]MCPServer) {
	for _, name := range sortedKeys(ms) {
		m := ms[name]
		path := "mcpServers." + name
		switch m.Transport {
		case "", "stdio":
			if m.Command == "" {
				v.fail(path+".command", "required for stdio transport")
			}
			if m.URL != "" || m.Headers != nil {
				v.fail(path+".url", "url/headers belong to the http transport")
			}
		case "http":
			if m.URL == "" {
				v.fail(path+".url", "required for http transport")
			}
			if m.Command != "" || m.Args != nil || m.Env != nil {
				v.fail(path+".command", "command/args/env belong to the stdio transport")
			}
		default:
			v.fail(path+".transport", `must be "stdio" or "http", not %q`, m.Transport)
		}
	}
}

func (v *validator) cardTypes(cts map[string]CardType) {
	if len(cts) == 0 {
		v.fail("card_types", "at least one card type is required")
		return
	}
	if _, ok := cts[RootCardType]; !ok {
		v.fail("card_types", "the root card type %q is required", RootCardType)
	}
	for _, name := range sortedKeys(cts) {
		if !validName(name) {
			v.fail("card_types."+name, "card type names use a-z, 0-9, '_' and '-'")
		}
		for _, rn := range sortedKeys(cts[name].Records) {
			r := cts[name].Records[rn]
			path := "card_types." + name + ".records." + rn
			if !validName(rn) {
				v.fail(path, "record names use a-z, 0-9, '_' and '-'")
			}
			if r.Format != "markdown" && r.Format != "json" {
				v.fail(path+".format", `must be "markdown" or "json", not %q`, r.Format)
			}
			if r.Schema != nil && r.Format != "json" {
				v.fail(path+".schema", "only json records carry a schema")
			}
			if i := r.Initialization; i != nil {
				if i.FormatVersion != 1 {
					v.fail(path+".initialization.format_version", "must be 1")
				}
				if i.Template == "" {
					v.fail(path+".initialization.template", "required")
				}
			}
		}
	}
}

// validName reports whether s is a lower-case identifier usable as a file
// name component.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ValidName reports whether s is usable as a card type, record or agent name.
func ValidName(s string) bool { return validName(s) }

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
