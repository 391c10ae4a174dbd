package operator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Operation is one entry of the operator API's contract registry: the
// server registers its routes from it and the cockpit's API client reads
// the same table (served as /contracts.js), so a route, its method, the
// query keys it accepts and the statuses it may answer are declared once.
type Operation struct {
	// Name is the operation's stable identity ("cards.children").
	Name   string `json:"name"`
	Method string `json:"method"`
	// Path uses the reference notation: /api/cards/:id/children.
	Path string `json:"path"`
	// Purpose is the one-line description of the route table.
	Purpose string `json:"purpose"`
	// Public routes need no bearer token (only liveness and readiness).
	Public bool `json:"public,omitempty"`
	// Query lists the accepted query keys; any other key is 400.
	Query []string `json:"query,omitempty"`
	// Body is "none" (any body is 400 BodyNotAllowed) or "json".
	Body string `json:"body"`
	// Statuses are the only statuses the route answers; anything else
	// becomes the fixed safe 500.
	Statuses []int `json:"statuses"`
	// Debug marks the internal debug routes.
	Debug bool `json:"debug,omitempty"`
}

// pattern is the net/http mux pattern of the operation.
func (o Operation) pattern() string {
	parts := strings.Split(o.Path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return o.Method + " " + strings.Join(parts, "/")
}

// Status sets shared by many operations. 400 (request admission) and 401
// are part of every authenticated route; 500 of every route.
var (
	stGet      = []int{200, 400, 401, 500}
	stGetID    = []int{200, 400, 401, 404, 500}
	stControl  = []int{200, 400, 401, 409, 500}
	stMCP      = []int{200, 400, 401, 404, 409, 500}
	stChatPost = []int{200, 202, 400, 401, 409, 415, 500}
)

// Operations is the operator API's contract registry, in the order of the
// reference route tables (operator routes, then internal debug routes).
var Operations = []Operation{
	{Name: "agents.list", Method: "GET", Path: "/api/agents", Purpose: "Active compiled-workflow session summaries.", Statuses: stGet},
	{Name: "agents.get", Method: "GET", Path: "/api/agents/:id", Purpose: "Exact known session summary.", Statuses: stGetID},
	{Name: "cards.agentSessions", Method: "GET", Path: "/api/cards/:id/agent-sessions", Purpose: "One active card's session summaries.", Statuses: stGetID},
	{Name: "executions.list", Method: "GET", Path: "/api/cards/:id/executions", Purpose: "Bounded chronological non-LLM execution rows.", Query: []string{"limit", "before"}, Statuses: stGetID},
	{Name: "executions.get", Method: "GET", Path: "/api/cards/:id/executions/:invocationId", Purpose: "Exact invocation evidence, not liveness.", Statuses: stGetID},
	{Name: "executions.file", Method: "GET", Path: "/api/cards/:id/executions/:invocationId/files/:fileKey", Purpose: "Selected bounded redacted text.", Statuses: []int{200, 400, 401, 404, 413, 415, 500}},
	{Name: "executions.download", Method: "GET", Path: "/api/cards/:id/executions/:invocationId/files/:fileKey/download", Purpose: "Same confidential text as attachment.", Statuses: []int{200, 400, 401, 404, 413, 415, 500}},
	{Name: "agents.conversation", Method: "GET", Path: "/api/agents/:id/conversation", Purpose: "Current segment with exact segment cursor.", Statuses: stGetID},
	{Name: "agents.currentInstructions", Method: "GET", Path: "/api/agents/:id/current-instructions", Purpose: "All matching loaded static bindings.", Statuses: stGetID},
	{Name: "agents.conversationVersions", Method: "GET", Path: "/api/agents/:id/conversation/versions", Purpose: "Indexed segment catalog.", Statuses: stGetID},
	{Name: "agents.conversationVersion", Method: "GET", Path: "/api/agents/:id/conversation/versions/:version", Purpose: "Exact indexed segment.", Statuses: stGetID},
	{Name: "agents.llmExchange", Method: "GET", Path: "/api/agents/:id/llm-exchange", Purpose: "Latest primary exchange.", Statuses: stGetID},
	{Name: "auth.wsTicket", Method: "POST", Path: "/api/auth/ws-ticket", Purpose: "WebSocket ticket.", Statuses: []int{200, 400, 401, 500}},
	{Name: "chat.get", Method: "GET", Path: "/api/chat", Purpose: "Configured global Analyst identity/availability.", Statuses: stGet},
	{Name: "chat.post", Method: "POST", Path: "/api/chat", Purpose: "Internal Analyst submission.", Body: "json", Statuses: stChatPost},
	{Name: "analyst.operations", Method: "GET", Path: "/api/analyst/operations", Purpose: "The configured Analyst's operations (this build's addition).", Statuses: stGet},
	{Name: "analyst.operate", Method: "POST", Path: "/api/analyst/operations/:name", Purpose: "Audited operator invocation of one Analyst operation (this build's addition).", Body: "json", Statuses: []int{200, 400, 401, 404, 409, 415, 500}},
	{Name: "cards.notify", Method: "POST", Path: "/api/cards/:id/notifications", Purpose: "Operator notification, optionally urgent (this build's addition).", Body: "json", Statuses: []int{200, 400, 401, 404, 409, 415, 500}},
	{Name: "workflows.presentation", Method: "GET", Path: "/api/workflows/:cardType/presentation", Purpose: "One installed type's presentation topology.", Statuses: stGetID},
	{Name: "config.get", Method: "GET", Path: "/api/config", Purpose: "Redacted effective configuration.", Statuses: stGet},
	{Name: "providers.list", Method: "GET", Path: "/api/providers", Purpose: "Process-local routing/capability observation.", Statuses: stGet},
	{Name: "controlActions.list", Method: "GET", Path: "/api/control-actions", Purpose: "Bounded Analyst action evidence.", Query: []string{"limit"}, Statuses: stGet},
	{Name: "externalToolCalls.list", Method: "GET", Path: "/api/external-tool-calls", Purpose: "Body-free settled external receipts.", Query: []string{"limit"}, Statuses: stGet},
	{Name: "events.list", Method: "GET", Path: "/api/events", Purpose: "Authenticated retained-event query.", Query: []string{"type", "card", "offset", "limit"}, Statuses: stGet},
	{Name: "files.list", Method: "GET", Path: "/api/files", Purpose: "Privacy-admitted listing.", Query: []string{"path"}, Statuses: []int{200, 400, 401, 403, 404, 500}},
	{Name: "files.content", Method: "GET", Path: "/api/files/content", Purpose: "Admitted projected text.", Query: []string{"path"}, Statuses: []int{200, 400, 401, 403, 404, 413, 415, 500}},
	{Name: "files.image", Method: "GET", Path: "/api/files/image", Purpose: "Fresh ordinary static raster bytes.", Query: []string{"path"}, Statuses: []int{200, 400, 401, 403, 404, 413, 415, 500}},
	{Name: "agents.conversationImage", Method: "GET", Path: "/api/agents/:id/conversation/images", Purpose: "Exact descriptor-selected recorded occurrence.", Query: []string{"segment", "row", "index"}, Statuses: stGetID},
	{Name: "mcp.tools", Method: "GET", Path: "/api/mcp/tools", Purpose: "Server/tool hierarchy.", Statuses: stGet},
	{Name: "mcp.start", Method: "POST", Path: "/api/mcp/servers/:name/start", Purpose: "Start/install/complete discovery.", Statuses: stMCP},
	{Name: "mcp.stop", Method: "POST", Path: "/api/mcp/servers/:name/stop", Purpose: "Stop/join retained owner.", Statuses: stMCP},
	{Name: "mcp.restart", Method: "POST", Path: "/api/mcp/servers/:name/restart", Purpose: "Nonatomic stop then fresh start.", Statuses: stMCP},
	{Name: "mcp.servers", Method: "GET", Path: "/api/mcp/servers", Purpose: "Servers with source, state and catalog identity.", Statuses: stGet},
	{Name: "mcp.register", Method: "POST", Path: "/api/mcp/servers", Purpose: "Publish a new dynamic definition (not started).", Body: "json", Statuses: stMCP},
	{Name: "mcp.replace", Method: "POST", Path: "/api/mcp/servers/:name/replace", Purpose: "Publish a whole new definition, then retire the connection.", Body: "json", Statuses: stMCP},
	{Name: "mcp.unregister", Method: "POST", Path: "/api/mcp/servers/:name/unregister", Purpose: "Publish the removal, then stop.", Statuses: stMCP},
	{Name: "mcp.refresh", Method: "POST", Path: "/api/mcp/servers/:name/refresh", Purpose: "Re-list tools on the same connection; fresh catalog UUID.", Statuses: stMCP},
	{Name: "processes.list", Method: "GET", Path: "/api/processes", Purpose: "Process observations.", Statuses: stGet},
	{Name: "health", Method: "GET", Path: "/health", Purpose: "Public liveness.", Public: true, Statuses: []int{200}},
	{Name: "health.ready", Method: "GET", Path: "/health/ready", Purpose: "Public readiness.", Public: true, Statuses: []int{200, 503}},
	{Name: "state.get", Method: "GET", Path: "/api/state", Purpose: "Runtime/project without inventory.", Statuses: stGet},
	{Name: "runtime.contentPolicy", Method: "GET", Path: "/api/runtime/content-policy", Purpose: "Read-derived refusal count/latest locator.", Statuses: stGet},
	{Name: "cards.children", Method: "GET", Path: "/api/cards/:id/children", Purpose: "Immediate active hierarchy slice.", Statuses: stGetID},
	{Name: "cards.get", Method: "GET", Path: "/api/cards/:id", Purpose: "Selected current detail.", Statuses: stGetID},
	{Name: "cards.records", Method: "GET", Path: "/api/cards/:id/records", Purpose: "Compiled record descriptors.", Statuses: stGetID},
	{Name: "cards.record", Method: "GET", Path: "/api/cards/:id/records/:name", Purpose: "Exact current effective record.", Statuses: stGetID},
	{Name: "cards.recordHistory", Method: "GET", Path: "/api/cards/:id/records/:name/history", Purpose: "Accepted-record catalog.", Statuses: stGetID},
	{Name: "cards.recordVersion", Method: "GET", Path: "/api/cards/:id/records/:name/versions/:version", Purpose: "Exact accepted document.", Statuses: stGetID},
	{Name: "cards.recordDiff", Method: "GET", Path: "/api/cards/:id/records/:name/diff", Purpose: "Projected record comparison.", Query: []string{"from", "to"}, Statuses: stGetID},
	{Name: "cards.history", Method: "GET", Path: "/api/cards/:id/history", Purpose: "Sparse ordinary history catalog.", Statuses: stGetID},
	{Name: "cards.version", Method: "GET", Path: "/api/cards/:id/history/:version", Purpose: "Exact ordinary/tombstone artifact.", Statuses: stGetID},
	{Name: "cards.diff", Method: "GET", Path: "/api/cards/:id/diff", Purpose: "Projected card comparison.", Query: []string{"from", "to"}, Statuses: stGetID},
	{Name: "runtime.status", Method: "GET", Path: "/api/runtime/status", Purpose: "Supervisor runtime observation.", Statuses: stGet},
	{Name: "runtime.run", Method: "POST", Path: "/api/runtime/run", Purpose: "Bodyless Run start (this build's addition).", Statuses: stControl},
	{Name: "runtime.pause", Method: "POST", Path: "/api/runtime/pause", Purpose: "Bodyless cooperative Pause.", Statuses: stControl},
	{Name: "runtime.gcWork", Method: "POST", Path: "/api/runtime/gc-work", Purpose: "Explicit live-owner work preview or deletion.", Body: "json", Statuses: []int{200, 400, 401, 409, 415, 500}},
	{Name: "runtime.resume", Method: "POST", Path: "/api/runtime/resume", Purpose: "Bodyless same-Run Resume.", Statuses: stControl},
	{Name: "runtime.stop", Method: "POST", Path: "/api/runtime/stop-project", Purpose: "Bodyless project containment.", Statuses: stControl},
	{Name: "runtime.restartServer", Method: "POST", Path: "/api/runtime/restart-server", Purpose: "Exact-confirmation authenticated restart.", Body: "json", Statuses: []int{202, 400, 401, 409, 415, 500}},
	{Name: "debug.doctor", Method: "GET", Path: "/api/debug/doctor", Purpose: "Authenticated bounded card diagnostic.", Debug: true, Statuses: stGet},
	{Name: "debug.errors", Method: "GET", Path: "/api/debug/errors", Purpose: "Explicit error projection.", Debug: true, Query: []string{"limit"}, Statuses: stGet},
	{Name: "debug.graphs", Method: "GET", Path: "/api/debug/graphs", Purpose: "Non-disclosing installed workflow projection.", Debug: true, Statuses: stGet},
}

// operation returns the registry entry of a name.
func operation(name string) (Operation, bool) {
	i := slices.IndexFunc(Operations, func(o Operation) bool { return o.Name == name })
	if i < 0 {
		return Operation{}, false
	}
	return Operations[i], true
}

// contractsJS renders the registry as the cockpit's ES module.
func contractsJS() []byte {
	ops := map[string]Operation{}
	for _, o := range Operations {
		if o.Body == "" {
			o.Body = "none"
		}
		ops[o.Name] = o
	}
	b, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		panic(err) // plain data
	}
	var out bytes.Buffer
	out.WriteString("// Generated by the server from saivage/operator/contracts.go: the operator API's\n// contract registry, shared by the server and this cockpit.\nexport const operations = Object.freeze(")
	out.Write(b)
	out.WriteString(");\n")
	return out.Bytes()
}

// buffered holds a handler's response until the contract admits its status.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
	// after runs once the response is sent (a confirmed restart).
	after func()
}

func (b *buffered) Header() http.Header { return b.header }
func (b *buffered) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *buffered) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

// admitRequest validates what the contract says about the request after
// authentication: the query keys and the presence of a body.
func admitRequest(op Operation, r *http.Request) error {
	for k := range r.URL.Query() {
		if !slices.Contains(op.Query, k) {
			allowed := "no query parameters"
			if len(op.Query) > 0 {
				allowed = "only " + strings.Join(op.Query, ", ")
			}
			return badRequest("InvalidQuery", "unknown query parameter "+strconv.Quote(k)+": this route takes "+allowed)
		}
	}
	if op.Body != "json" {
		return bodyless(r)
	}
	return nil
}
