package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/policy"
)

// ServiceStatus is one service's state on the System page.
type ServiceStatus struct {
	Name   string `json:"name"`
	State  string `json:"state"` // ok, warning, error, unknown
	Detail string `json:"detail,omitempty"`
}

// Service states.
const (
	StateOK      = "ok"
	StateWarning = "warning"
	StateError   = "error"
	StateUnknown = "unknown"
)

// ToolInfo names a tool and where it comes from (a connector's name, or
// "host" for the host's own tools).
type ToolInfo struct {
	Name   string
	Source string
	// Scope is where the tool can be used: chat, call, watch or all
	// (default chat).
	Scope string
}

// SystemInfo is what Options.System adds to the host's own status: the
// gateway and connectors, and tools known from manifests, so that a
// connector that is down keeps its tools visible.
type SystemInfo struct {
	Services []ServiceStatus
	Tools    []ToolInfo
	systemSections
}

// ToolStatus is one row of the tool inventory.
type ToolStatus struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Scope  string `json:"scope"`
	// Available is false for a tool known from the bundled manifest whose
	// connector is down: it stays listed, with its policy and history.
	Available bool       `json:"available"`
	Decision  string     `json:"decision"` // allow, gate, deny: the policy now
	Calls     int        `json:"calls"`
	Errors    int        `json:"errors"`
	LastAt    *time.Time `json:"lastAt,omitempty"`
	LastOK    bool       `json:"lastOk"`
	LastError string     `json:"lastError,omitempty"`
}

// SystemStatus is the answer of GET /system/status.
type SystemStatus struct {
	GeneratedAt time.Time       `json:"generatedAt"`
	Host        ServiceStatus   `json:"host"`
	Services    []ServiceStatus `json:"services"`
	Tools       []ToolStatus    `json:"tools"`
	systemSections
}

// systemDeadline bounds one status snapshot: probes that take longer are
// reported by the provider as unknown rather than holding the page.
const systemDeadline = 3 * time.Second

// handleSystemStatus serves the System page's snapshot: the host itself,
// what Options.System reports, and the tool inventory with each tool's
// current policy decision and its totals and last result from the usage
// ledger.
func (h *Host) handleSystemStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), systemDeadline)
	defer cancel()
	clients := h.hub.Clients()
	st := SystemStatus{GeneratedAt: time.Now().UTC(), Services: []ServiceStatus{}, Tools: []ToolStatus{},
		Host: ServiceStatus{Name: "host", State: StateOK, Detail: fmt.Sprintf("version %s, up %s, %d app%s connected",
			h.opts.Version, time.Since(h.started).Round(time.Second), clients, plural(clients))}}
	if h.manager != nil {
		st.Services = append(st.Services, h.manager.contextStatus())
	}
	var info SystemInfo
	if h.opts.System != nil {
		info = h.opts.System(ctx)
		st.Services = append(st.Services, info.Services...)
		st.systemSections = info.systemSections
	}
	if st.Stores == nil {
		st.Stores = []StoreStatus{}
	}
	tools := map[string]ToolInfo{AskUserTool: {Name: AskUserTool, Source: "host"}}
	for _, t := range info.Tools {
		tools[t.Name] = t
	}
	live := map[string]bool{AskUserTool: true}
	if h.manager != nil {
		for _, t := range h.manager.opts.Tools() {
			name := t.Spec().Name
			live[name] = true
			if _, known := tools[name]; !known {
				tools[name] = ToolInfo{Name: name, Source: toolSource(name)}
			}
		}
	}
	stats, err := h.toolStats(ctx)
	if err != nil {
		h.log.Warn("system status: tool ledger unreadable", "err", err)
		st.Services = append(st.Services, ServiceStatus{Name: "usage ledger", State: StateWarning, Detail: "tool totals unavailable; see the host log"})
	}
	pol := h.opts.Chats.Policy
	for name, ti := range tools {
		ts := stats[name]
		ts.Name, ts.Source, ts.Scope, ts.Available, ts.Decision = name, ti.Source, ti.Scope, live[name], string(policy.Gate)
		if ts.Scope == "" {
			ts.Scope = "chat"
		}
		if pol != nil {
			ts.Decision = string(pol.Decide(name))
		}
		st.Tools = append(st.Tools, ts)
	}
	sort.Slice(st.Tools, func(i, j int) bool { return st.Tools[i].Name < st.Tools[j].Name })
	h.auditHealth(r.Context(), &st)
	writeJSON(w, http.StatusOK, st)
}

// toolStats reads each tool's call and error totals and its last call from
// the usage ledger's tool table.
func (h *Host) toolStats(ctx context.Context) (map[string]ToolStatus, error) {
	out := map[string]ToolStatus{}
	if h.opts.Usage == nil {
		return out, nil
	}
	rows, err := h.opts.Usage.DB().QueryContext(ctx, `SELECT t.tool, g.n, g.errs, t.ts, t.ok, t.error
		FROM (SELECT tool, count(*) AS n, sum(ok = 0) AS errs, max(id) AS last FROM tool_calls GROUP BY tool) g
		JOIN tool_calls t ON t.id = g.last`)
	if err != nil {
		return nil, fmt.Errorf("read tool totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ts ToolStatus
		var name string
		var at int64
		if err := rows.Scan(&name, &ts.Calls, &ts.Errors, &at, &ts.LastOK, &ts.LastError); err != nil {
			return nil, fmt.Errorf("read tool totals: %w", err)
		}
		t := time.UnixMilli(at).UTC()
		ts.LastAt = &t
		out[name] = ts
	}
	return out, rows.Err()
}

// toolSource names the connector of an mcp__server__tool name, or "host".
func toolSource(name string) string {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if server, _, ok := strings.Cut(rest, "__"); ok && server != "" {
			return server
		}
	}
	return "host"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ProbeHTTP checks a service's health URL with a short timeout, for
// Options.System providers: 2xx is ok, anything else an error with the
// reason.
func ProbeHTTP(ctx context.Context, client *http.Client, name, url string) ServiceStatus {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ServiceStatus{Name: name, State: StateError, Detail: "bad health URL: " + err.Error()}
	}
	res, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ServiceStatus{Name: name, State: StateError, Detail: "no answer within 2 s at " + url}
		}
		return ServiceStatus{Name: name, State: StateError, Detail: "unreachable at " + url}
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return ServiceStatus{Name: name, State: StateError, Detail: fmt.Sprintf("%s answered %s", url, res.Status)}
	}
	// A service that is up but not useful says so with a "warning" field.
	var body struct {
		Warning string `json:"warning"`
	}
	if json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&body) == nil && body.Warning != "" {
		return ServiceStatus{Name: name, State: StateWarning, Detail: body.Warning}
	}
	return ServiceStatus{Name: name, State: StateOK, Detail: url}
}
