package modelsetup

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentstack/agentstack/gateway"
)

// Options configures the set-up routes.
type Options struct {
	Home          string
	GatewayConfig string // path of gateway.yaml
	ChatTier      string // the public name chats use (HOST_TIER)
	Client        *http.Client
	// Status says whether the chat tier can be served now.
	Status func() gateway.Readiness
	// Apply makes the saved files take effect (reloads the gateway); nil
	// when the gateway runs elsewhere and must be restarted.
	Apply func(ctx context.Context) error
}

// Mount adds GET /setup (is a chat model usable?) and POST /setup (test,
// save and apply a Choice) through handle, which puts them behind the host
// token.
func Mount(handle func(pattern string, h http.Handler), opts Options) {
	handle("GET /setup", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": opts.Status(), "tiers": Tiers, "chatTier": opts.ChatTier})
	}))
	handle("POST /setup", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c Choice
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&c); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the set-up request is not valid JSON"})
			return
		}
		c, err := c.Normalize(opts.ChatTier)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if err := Test(r.Context(), opts.Client, c, opts.ChatTier); err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": "The test request failed: " + err.Error()})
			return
		}
		if err := Save(opts.Home, opts.GatewayConfig, c); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		if opts.Apply == nil {
			writeJSON(w, http.StatusOK, map[string]any{"saved": true, "note": "saved; restart the gateway that GATEWAY_BASE_URL names to use it"})
			return
		}
		if err := opts.Apply(r.Context()); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "saved, but the gateway could not load it: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"saved": true, "status": opts.Status()})
	}))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
