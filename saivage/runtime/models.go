package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/agentstack/agentstack/agent"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/saivage/config"
)

// routePrefix names a route's public model in Saivage's gateway (and in
// the exchange evidence): route:NAME. Escalation is off in that gateway, so
// each route only ever tries its own candidates whatever its name.
const routePrefix = "route:"

// summarizerRoute is the public name of compaction.summarizer_candidate.
const summarizerRoute = "saivage:summarizer"

// Default capacity figures used when the configuration omits them.
const (
	defaultUtilization = agent.DefaultUtilization
	defaultTrigger     = agent.DefaultTrigger
	defaultTail        = agent.DefaultTail
	summaryMaxTokens   = 2000
)

// RouteBinding is one models.routes entry bound to the gateway.
type RouteBinding struct {
	Name        string
	Public      string
	Candidates  []string
	MaxTokens   int
	Temperature *float64
	// UsableInput is the largest positive floor(window × utilisation) −
	// reserved output over the route's candidates; 0 when no candidate
	// declares a context window.
	UsableInput int
	// Budget is the context budget of the candidate that gives UsableInput.
	Budget agent.Budget
}

// Models binds the configuration's routes to an in-process gateway.
type Models struct {
	router     *gateway.Router
	routes     map[string]RouteBinding
	summarizer string // public name used for compaction summaries
	compaction config.Compaction
}

// ModelsOptions configures BindModels.
type ModelsOptions struct {
	// Upstream reaches the providers (default: the gateway's pooled
	// transport).
	Upstream http.RoundTripper
	Logger   *slog.Logger
}

// capsFor returns the effective capabilities of a candidate: model
// capabilities, else the account's, else the provider's.
func capsFor(cfg *config.Config, c config.Candidate) config.Capabilities {
	p := cfg.Providers[c.Provider]
	if mc, ok := p.ModelCapabilities[c.Model]; ok {
		return mc
	}
	if a, ok := p.Accounts[c.Account]; ok && a.Capabilities != nil {
		return *a.Capabilities
	}
	if p.Capabilities != nil {
		return *p.Capabilities
	}
	return config.Capabilities{}
}

// budgetOf is a candidate's context budget: usable input floor(window × U) − O,
// 0 when the window is unknown.
func budgetOf(caps config.Capabilities, comp config.Compaction, maxTokens int) agent.Budget {
	out := maxTokens
	if out <= 0 {
		out = caps.MaxOutputTokens
	}
	return agent.Budget{ContextWindow: caps.ContextWindowTokens, MaxOutput: out,
		Utilization: comp.ContextUtilizationFraction, Trigger: comp.TriggerFraction}
}

// orderCandidates applies a route profile: allowed filters by model name
// and preferred models move to the front, keeping route order otherwise.
func orderCandidates(cands []string, prof *config.Profile) []string {
	if prof == nil {
		return cands
	}
	var out []string
	for _, c := range cands {
		pc, _ := config.ParseCandidate(c)
		if len(prof.Allowed) == 0 || slices.Contains(prof.Allowed, pc.Model) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		pa, _ := config.ParseCandidate(a)
		pb, _ := config.ParseCandidate(b)
		ia, ib := slices.Index(prof.Preferred, pa.Model), slices.Index(prof.Preferred, pb.Model)
		if ia < 0 {
			ia = len(prof.Preferred)
		}
		if ib < 0 {
			ib = len(prof.Preferred)
		}
		return ia - ib
	})
	return out
}

// BindModels builds the gateway configuration from the project's providers
// and routes: each route is one public name with its ordered candidates
// (only the first when models.failover is false). Provider keys never leave
// the gateway; they are handed to it through a private lookup.
func BindModels(cfg *config.Config, opts ModelsOptions) (*Models, error) {
	noEscalation := false
	gcfg := &gateway.Config{Providers: map[string]gateway.Provider{}, Models: map[string][]gateway.Candidate{}, Escalation: &noEscalation}
	keys := map[string]string{}
	addProvider := func(name, baseURL, key string) {
		p := gateway.Provider{BaseURL: baseURL}
		if key != "" {
			env := fmt.Sprintf("SAIVAGE_KEY_%d", len(keys))
			keys[env], p.APIKeyEnv = key, env
		}
		gcfg.Providers[name] = p
	}
	for _, pn := range sortedKeys(cfg.Providers) {
		p := cfg.Providers[pn]
		if p.BaseURL != "" {
			addProvider(pn, p.BaseURL, p.APIKey)
		}
		for _, an := range sortedKeys(p.Accounts) {
			a := p.Accounts[an]
			addProvider(pn+":"+an, cmpOr(a.BaseURL, p.BaseURL), cmpOr(a.APIKey, p.APIKey))
		}
	}
	comp := config.Compaction{}
	if cfg.Compaction != nil {
		comp = *cfg.Compaction
	}
	if comp.ContextUtilizationFraction == 0 {
		comp.ContextUtilizationFraction = defaultUtilization
	}
	if comp.TriggerFraction == 0 {
		comp.TriggerFraction = defaultTrigger
	}
	if comp.TailFraction == 0 {
		comp.TailFraction = defaultTail
	}
	m := &Models{routes: map[string]RouteBinding{}, compaction: comp}
	failover := cfg.Models == nil || cfg.Models.Failover == nil || *cfg.Models.Failover
	if cfg.Models != nil {
		for _, rn := range sortedKeys(cfg.Models.Routes) {
			r := cfg.Models.Routes[rn]
			var prof *config.Profile
			if p, ok := cfg.Models.Profiles[r.Profile]; ok {
				prof = &p
			}
			cands := orderCandidates(r.Candidates, prof)
			if len(cands) == 0 {
				return nil, fmt.Errorf("models.routes.%s: the profile %s leaves no candidate", rn, r.Profile)
			}
			if !failover {
				cands = cands[:1]
			}
			rb := RouteBinding{Name: rn, Public: routePrefix + rn, Candidates: cands, MaxTokens: r.MaxTokens, Temperature: r.Temperature}
			for _, c := range cands {
				pc, err := config.ParseCandidate(c)
				if err != nil {
					return nil, fmt.Errorf("models.routes.%s: %w", rn, err)
				}
				gp := pc.Provider
				if pc.Account != "" {
					gp += ":" + pc.Account
				}
				if _, ok := gcfg.Providers[gp]; !ok {
					return nil, fmt.Errorf("models.routes.%s: candidate %s has no base URL", rn, c)
				}
				gcfg.Models[rb.Public] = append(gcfg.Models[rb.Public], gateway.Candidate{Provider: gp, Model: pc.Model})
				if b := budgetOf(capsFor(cfg, pc), comp, r.MaxTokens); b.UsableInput() > rb.UsableInput {
					rb.UsableInput, rb.Budget = b.UsableInput(), b
				}
			}
			m.routes[rn] = rb
		}
	}
	if s := comp.SummarizerCandidate; s != nil {
		gp := s.Provider
		if s.Account != "" {
			gp += ":" + s.Account
		}
		gcfg.Models[summarizerRoute] = []gateway.Candidate{{Provider: gp, Model: s.Model}}
		m.summarizer = summarizerRoute
	}
	if len(gcfg.Models) == 0 {
		return nil, errors.New("models.routes: no route is configured")
	}
	gw, err := gateway.New(gateway.Options{
		Config:         gcfg,
		LookupEnv:      func(k string) (string, bool) { v, ok := keys[k]; return v, ok },
		RequestTimeout: absoluteRequestTimeout,
		Logger:         opts.Logger,
		Transport:      opts.Upstream,
	})
	if err != nil {
		return nil, fmt.Errorf("bind model routes: %w", err)
	}
	m.router = gw.Router()
	return m, nil
}

// absoluteRequestTimeout bounds one provider request, stream included.
const absoluteRequestTimeout = 900 * time.Second

// Route returns a bound route.
func (m *Models) Route(name string) (RouteBinding, bool) {
	r, ok := m.routes[name]
	return r, ok
}

// Routes returns the bound routes by name.
func (m *Models) Routes() []RouteBinding {
	out := make([]RouteBinding, 0, len(m.routes))
	for _, n := range sortedKeys(m.routes) {
		out = append(out, m.routes[n])
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// classify classifies a failed model call with the shared rules, looking
// at the statuses of the gateway's attempts for a 502 that ended a chain.
func classify(err error, attempts []gateway.AttemptRecord) agent.ErrorClass {
	statuses := make([]int, len(attempts))
	for i, a := range attempts {
		statuses[i] = a.Status
	}
	return agent.Classify(err, statuses...)
}
