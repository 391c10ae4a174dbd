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
	"github.com/agentstack/agentstack/llm"
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
	// Members are the gateway targets of the candidates (each account
	// serving one), in failover order: what request plans are built for.
	Members []RouteMember
}

// RouteMember is one target of a route, the structured candidate a request
// plan is built for: its account's gateway target, the capability snapshot
// taken at binding, the adapter (wire protocol and admission rules) and
// its own context budget.
type RouteMember struct {
	// Candidate is the route's candidate the target serves (provider/model).
	Candidate string
	Target    gateway.Target
	Caps      config.Capabilities
	Wire      llm.ModelWire
	// Budget is this member's own: usable input floor(U×C)−O, with O the
	// output limit its requests carry (Budget.MaxOutput; 0 sends none).
	Budget agent.Budget
}

// Models binds the configuration's routes to an in-process gateway.
type Models struct {
	router     *gateway.Router
	routes     map[string]RouteBinding
	summarizer string // public name used for compaction summaries
	// summary is the summarizer's binding (its members), when configured.
	summary    RouteBinding
	compaction config.Compaction
	// cacheSeed seeds Codex prompt cache keys (the project root).
	cacheSeed string
}

// ModelsOptions configures BindModels.
type ModelsOptions struct {
	// Upstream reaches the providers (default: the gateway's pooled
	// transport).
	Upstream http.RoundTripper
	Logger   *slog.Logger
	// Root is the project directory: auth profiles are read from
	// config.AuthProfileDir under it, and it seeds the Codex cache key.
	// Empty skips checking that profile files exist.
	Root string
	// FailedRequests, when set, receives every failed provider request.
	FailedRequests llm.FailureRecorder
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

// wireOf is what a provider transport needs of a candidate's capabilities.
func wireOf(caps config.Capabilities) llm.ModelWire {
	w := llm.ModelWire{
		Protocol:            llm.Protocol(caps.TransportProtocol),
		MaxOutputTokens:     caps.MaxOutputTokens,
		NoTools:             caps.ToolsMode == "none",
		NoImages:            caps.ImageInput != nil && !*caps.ImageInput,
		ExclusiveToolChoice: caps.ExclusiveToolChoiceSupport,
	}
	if caps.ResponsesReasoning != nil {
		w.ReasoningEffort = caps.ResponsesReasoning.Effort
	}
	return w
}

// outputLimit is the output limit a candidate's request carries when
// asked is wanted (0: none): asked within the model's maxOutputTokens, or
// that maximum (the limit the transport would impose anyway).
func outputLimit(caps config.Capabilities, asked int) int {
	if asked <= 0 || (caps.MaxOutputTokens > 0 && asked > caps.MaxOutputTokens) {
		return caps.MaxOutputTokens
	}
	return asked
}

// budgetOf is a candidate's context budget: usable input floor(window × U) − O,
// 0 when the window is unknown.
func budgetOf(caps config.Capabilities, comp config.Compaction, maxTokens int) agent.Budget {
	return agent.Budget{ContextWindow: caps.ContextWindowTokens, MaxOutput: outputLimit(caps, maxTokens),
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

// gatewayName is the in-process gateway's provider for an account
// ("provider" for the provider's own endpoint).
func gatewayName(provider, account string) string {
	if account == "" {
		return provider
	}
	return provider + ":" + account
}

// endpointsFor expands a candidate into the accounts that serve it, in
// failover order: a named account alone; otherwise the provider's own
// endpoint (when it has a baseUrl) and every account offering the model,
// highest priority first, then by name.
func endpointsFor(cfg *config.Config, c config.Candidate) []config.Candidate {
	if c.Account != "" {
		return []config.Candidate{c}
	}
	p := cfg.Providers[c.Provider]
	type ep struct {
		c        config.Candidate
		priority int
	}
	var eps []ep
	if p.BaseURL != "" {
		eps = append(eps, ep{c, p.Priority})
	}
	for _, an := range sortedKeys(p.Accounts) {
		a := p.Accounts[an]
		if len(a.Models) == 0 || slices.Contains(a.Models, c.Model) {
			eps = append(eps, ep{config.Candidate{Provider: c.Provider, Account: an, Model: c.Model}, a.Priority})
		}
	}
	slices.SortStableFunc(eps, func(a, b ep) int { return b.priority - a.priority })
	out := make([]config.Candidate, len(eps))
	for i, e := range eps {
		out[i] = e.c
	}
	return out
}

// credentialsFor returns an account's credentials, falling back to the
// provider's; nil when neither has any.
func credentialsFor(p config.Provider, account string, root string) (llm.Credentials, error) {
	key, profile := p.APIKey, p.AuthProfile
	if a, ok := p.Accounts[account]; ok && (a.APIKey != "" || a.AuthProfile != "") {
		key, profile = a.APIKey, a.AuthProfile
	}
	switch {
	case profile != "":
		path := config.AuthProfilePath(root, profile)
		if root != "" {
			if _, err := llm.LoadAuthProfile(path); err != nil {
				return nil, err
			}
		}
		return &llm.AuthProfile{Name: profile, Path: path}, nil
	case key != "":
		return llm.StaticKey(key), nil
	}
	return nil, nil
}

// providerHost is the placeholder host the gateway is given for account
// i; the provider transport maps it to the real endpoint, so neither the
// real URL's credentials nor tokens ever reach the gateway.
func providerHost(i int) string { return fmt.Sprintf("account-%d.provider.saivage.invalid", i) }

// providerRouter sends each gateway request to its account's transport.
type providerRouter map[string]*llm.ProviderTransport

func (r providerRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	t, ok := r[req.URL.Host]
	if !ok {
		req.Body.Close()
		return nil, fmt.Errorf("no provider account for %s", req.URL.Host)
	}
	return t.RoundTrip(req)
}

// BindModels builds the gateway configuration from the project's providers
// and routes: each route is one public name with its ordered candidates
// (only the first when models.failover is false), each candidate expanded
// into the accounts serving it. Every account is reached through an
// llm.ProviderTransport speaking its models' transportProtocol with its
// credentials; the gateway never sees keys, tokens or real base URLs.
func BindModels(cfg *config.Config, opts ModelsOptions) (*Models, error) {
	noEscalation := false
	gcfg := &gateway.Config{Providers: map[string]gateway.Provider{}, Models: map[string][]gateway.Candidate{}, Escalation: &noEscalation}
	router := providerRouter{}
	base := opts.Upstream
	if base == nil {
		base = gateway.NewTransport()
	}
	addAccount := func(pn, an, baseURL string) error {
		name := gatewayName(pn, an)
		p := cfg.Providers[pn]
		creds, err := credentialsFor(p, an, opts.Root)
		if err != nil {
			return fmt.Errorf("providers.%s: %w", name, err)
		}
		host := providerHost(len(router))
		router[host] = llm.NewProviderTransport(llm.ProviderTransportOptions{
			Name: name, BaseURL: baseURL, Credentials: creds, Base: base, Failures: opts.FailedRequests,
			Producer: llm.ProducerID(pn, an), CacheKeySeed: opts.Root,
			Models: func(model string) llm.ModelWire {
				return wireOf(capsFor(cfg, config.Candidate{Provider: pn, Account: an, Model: model}))
			},
		})
		gcfg.Providers[name] = gateway.Provider{BaseURL: "http://" + host + "/v1"}
		return nil
	}
	for _, pn := range sortedKeys(cfg.Providers) {
		p := cfg.Providers[pn]
		if p.BaseURL != "" {
			if err := addAccount(pn, "", p.BaseURL); err != nil {
				return nil, err
			}
		}
		for _, an := range sortedKeys(p.Accounts) {
			if err := addAccount(pn, an, cmpOr(p.Accounts[an].BaseURL, p.BaseURL)); err != nil {
				return nil, err
			}
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
	m := &Models{routes: map[string]RouteBinding{}, compaction: comp, cacheSeed: opts.Root}
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
				eps := endpointsFor(cfg, pc)
				if len(eps) == 0 {
					return nil, fmt.Errorf("models.routes.%s: no account of provider %s serves %s", rn, pc.Provider, pc.Model)
				}
				for _, ep := range eps {
					gp := gatewayName(ep.Provider, ep.Account)
					if _, ok := gcfg.Providers[gp]; !ok {
						return nil, fmt.Errorf("models.routes.%s: candidate %s has no base URL", rn, c)
					}
					gcfg.Models[rb.Public] = append(gcfg.Models[rb.Public], gateway.Candidate{Provider: gp, Model: ep.Model, Group: c})
					caps := capsFor(cfg, ep)
					b := budgetOf(caps, comp, r.MaxTokens)
					if b.UsableInput() > rb.UsableInput {
						rb.UsableInput, rb.Budget = b.UsableInput(), b
					}
					tg := gateway.Target{Provider: gp, Model: ep.Model}
					if !slices.ContainsFunc(rb.Members, func(m RouteMember) bool { return m.Target == tg }) {
						rb.Members = append(rb.Members, RouteMember{Candidate: c, Target: tg, Caps: caps, Wire: wireOf(caps), Budget: b})
					}
				}
			}
			m.routes[rn] = rb
		}
	}
	if s := comp.SummarizerCandidate; s != nil {
		m.summary = RouteBinding{Name: "summarizer", Public: summarizerRoute, MaxTokens: summaryMaxTokens}
		for _, ep := range endpointsFor(cfg, config.Candidate{Provider: s.Provider, Account: s.Account, Model: s.Model}) {
			gp := gatewayName(ep.Provider, ep.Account)
			gcfg.Models[summarizerRoute] = append(gcfg.Models[summarizerRoute], gateway.Candidate{Provider: gp, Model: ep.Model, Group: "summarizer"})
			caps := capsFor(cfg, ep)
			m.summary.Members = append(m.summary.Members, RouteMember{Candidate: "summarizer", Target: gateway.Target{Provider: gp, Model: ep.Model},
				Caps: caps, Wire: wireOf(caps), Budget: budgetOf(caps, comp, summaryMaxTokens)})
		}
		m.summarizer = summarizerRoute
	}
	if len(gcfg.Models) == 0 {
		return nil, errors.New("models.routes: no route is configured")
	}
	inactivity, limit := requestLimits(cfg.Models)
	gw, err := gateway.New(gateway.Options{
		Config: gcfg,
		// The absolute limit bounds the call as a whole and each attempt;
		// an attempt without data for the inactivity limit fails over.
		RequestTimeout: limit, AttemptTimeLimit: limit, StreamInactivity: inactivity,
		Logger:    opts.Logger,
		Transport: router,
	})
	if err != nil {
		return nil, fmt.Errorf("bind model routes: %w", err)
	}
	m.router = gw.Router()
	return m, nil
}

// requestLimits are the models section's time limits of a model call, or
// the defaults (120 s without data, 900 s in all).
func requestLimits(m *config.Models) (inactivity, limit time.Duration) {
	inactivity, limit = llm.DefaultStreamInactivity, llm.DefaultCallTimeLimit
	if m != nil && m.RequestInactivityMS > 0 {
		inactivity = time.Duration(m.RequestInactivityMS) * time.Millisecond
	}
	if m != nil && m.RequestLimitMS > 0 {
		limit = time.Duration(m.RequestLimitMS) * time.Millisecond
	}
	return inactivity, limit
}

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
