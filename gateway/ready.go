package gateway

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
)

// Readiness says whether a public model name can be served: at least one
// target of its chain has the key it needs (or needs none).
type Readiness struct {
	Model string `json:"model"`
	Ready bool   `json:"ready"`
	// MissingKeys are the api_key_env variables that are unset, sorted.
	MissingKeys []string `json:"missingKeys,omitempty"`
	// Problem is a plain sentence when not ready.
	Problem string `json:"problem,omitempty"`
}

// Ready reports whether name can be served with the keys the gateway was
// started with. Keyless targets (a local server) count as ready: whether
// they answer is the health probe's business, not configuration's.
func (g *Gateway) Ready(name string) Readiness {
	r := Readiness{Model: name}
	chain, ok := g.chains[name]
	if !ok {
		r.Problem = fmt.Sprintf("no usable chat model: %s is not a model of the gateway (it has %s)", name, strings.Join(g.names, ", "))
		return r
	}
	missing := map[string]bool{}
	for _, t := range chain {
		if t.keyEnv == "" || t.apiKey != "" {
			r.Ready = true
			return r
		}
		missing[t.keyEnv] = true
	}
	for k := range missing {
		r.MissingKeys = append(r.MissingKeys, k)
	}
	sort.Strings(r.MissingKeys)
	r.Problem = fmt.Sprintf("no usable chat model: every provider of %s needs a key and %s is not set", name, strings.Join(r.MissingKeys, ", "))
	return r
}

// Switch serves the routes of whichever Gateway it currently holds, so that
// a new configuration takes effect without restarting the listener.
type Switch struct{ cur atomic.Pointer[Gateway] }

// NewSwitch returns a Switch serving g.
func NewSwitch(g *Gateway) *Switch {
	s := &Switch{}
	s.cur.Store(g)
	return s
}

// Current returns the Gateway in use.
func (s *Switch) Current() *Gateway { return s.cur.Load() }

// Swap puts g in use; requests already running finish on the old one.
func (s *Switch) Swap(g *Gateway) { s.cur.Store(g) }

// Handler routes every request to the current Gateway's handler.
func (s *Switch) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cur.Load().handler.ServeHTTP(w, r)
	})
}

// Rates returns the current Gateway's rates.
func (s *Switch) Rates() map[string]Rate { return s.Current().Rates() }

// ContextWindow returns the current Gateway's context window of a public
// model name (Config.ContextWindow).
func (s *Switch) ContextWindow(public string) int { return s.Current().ContextWindow(public) }
