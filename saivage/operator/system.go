package operator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Bounds of the observation routes.
const (
	DefaultObservations = 100
	MaxObservations     = 1000
	// MaxDoctorCards bounds the cards one doctor run reads.
	MaxDoctorCards = 5000
)

// newestEvents returns the newest limit events of the given types, newest
// first, and how many there are.
func (s *Server) newestEvents(types []string, limit int) ([]project.Event, int, error) {
	all, err := s.rt.Project().Events(func(e project.Event) bool { return slices.Contains(types, e.Type) })
	if err != nil {
		return nil, 0, err
	}
	out := make([]project.Event, 0, min(limit, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, all[i])
	}
	return out, len(all), nil
}

func (s *Server) boundedEvents(types []string, key string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		limit, err := queryInt(r, "limit", DefaultObservations, 1, MaxObservations)
		if err != nil {
			return err
		}
		evs, total, err := s.newestEvents(types, limit)
		if err != nil {
			return err
		}
		return s.writeRedacted(w, http.StatusOK, map[string]any{key: evs, "total": total, "truncated": total > len(evs)})
	}
}

// getControlActions lists runtime control and reconfiguration actions,
// newest first: evidence of what was asked, not of its effects.
func (s *Server) getControlActions(w http.ResponseWriter, r *http.Request) error {
	return s.boundedEvents(tools.ControlEventTypes(), "actions")(w, r)
}

// getExternalCalls lists the body-free receipts of settled external (MCP)
// tool calls, newest first.
func (s *Server) getExternalCalls(w http.ResponseWriter, r *http.Request) error {
	return s.boundedEvents([]string{"external_tool_call"}, "calls")(w, r)
}

func (s *Server) getContentPolicy(w http.ResponseWriter, r *http.Request) error {
	evs, total, err := s.newestEvents([]string{"content_policy_refusal"}, 1)
	if err != nil {
		return err
	}
	var latest any
	if len(evs) == 1 {
		e := evs[0]
		loc := map[string]any{"event": e.ID, "ts": e.Time, "session": e.Data["session"]}
		if sid, _ := e.Data["session"].(string); sid != "" {
			if _, card, err := parseSession(sid); err == nil && card != "" {
				loc["card"] = card
			}
		}
		latest = loc
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"refusals": total, "latest": latest})
}

// providerView is a process-local routing observation: no endpoints, no
// keys, no tokens. Auth says which kind of credentials a provider and each
// of its accounts sends (an account without its own uses the provider's).
type providerView struct {
	Name        string            `json:"name"`
	Accounts    []string          `json:"accounts"`
	Models      []string          `json:"models"`
	Priority    int               `json:"priority"`
	Keyed       bool              `json:"has_api_key"`
	Auth        string            `json:"auth"`
	AccountAuth map[string]string `json:"account_auth"`
}

// authKind names the credentials an apiKey/authProfile pair configures:
// "api_key", "profile" (an auth profile file), or "none".
func authKind(apiKey, profile string) string {
	switch {
	case profile != "":
		return "profile"
	case apiKey != "":
		return "api_key"
	}
	return "none"
}

func (s *Server) getProviders(w http.ResponseWriter, r *http.Request) error {
	cfg := s.rt.Project().Config
	provs := []providerView{}
	for _, name := range sortedKeys(cfg.Providers) {
		p := cfg.Providers[name]
		v := providerView{Name: name, Accounts: sortedKeys(p.Accounts), Models: append([]string{}, p.Models...), Priority: p.Priority, Keyed: p.APIKey != "",
			Auth: authKind(p.APIKey, p.AuthProfile), AccountAuth: map[string]string{}}
		for an, a := range p.Accounts {
			if a.APIKey == "" && a.AuthProfile == "" {
				v.AccountAuth[an] = v.Auth
			} else {
				v.AccountAuth[an] = authKind(a.APIKey, a.AuthProfile)
			}
		}
		provs = append(provs, v)
	}
	type routeView struct {
		Name        string   `json:"name"`
		Public      string   `json:"public"`
		Candidates  []string `json:"candidates"`
		MaxTokens   int      `json:"max_tokens,omitempty"`
		UsableInput int      `json:"usable_input_tokens"`
	}
	routes := []routeView{}
	for _, rb := range s.rt.Models().Routes() {
		routes = append(routes, routeView{Name: rb.Name, Public: rb.Public, Candidates: rb.Candidates, MaxTokens: rb.MaxTokens, UsableInput: rb.UsableInput})
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"providers": provs, "routes": routes, "observed_at": time.Now().UTC()})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func parseSession(id string) (agent, card string, err error) {
	parts := strings.SplitN(id, ":", 3)
	if len(parts) != 3 || parts[0] != "agent" {
		return "", "", fmt.Errorf("%q is not a session id", id)
	}
	if parts[2] == "global" {
		return parts[1], "", nil
	}
	return parts[1], parts[2], nil
}

func (s *Server) getInstructions(w http.ResponseWriter, r *http.Request) error {
	info, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	ins, err := s.rt.Instructions(r.Context(), info)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"session": info.ID, "instructions": ins})
}

// getConversationImage serves an image occurrence recorded in a
// conversation row, selected exactly by segment, row id and index. A row
// carries images as {"images": [{"mime": "image/png", "data": base64}]}.
func (s *Server) getConversationImage(w http.ResponseWriter, r *http.Request) error {
	info, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	seg, err := queryInt(r, "segment", 0, 1, 1<<30)
	if err != nil || seg == 0 {
		return badRequest("InvalidQuery", "segment (≥ 1), row and index select an image")
	}
	idx, err := queryInt(r, "index", 0, 0, 1000)
	if err != nil {
		return err
	}
	rowID := q.Get("row")
	if rowID == "" {
		return badRequest("InvalidQuery", "row is required")
	}
	if seg > info.Segments {
		return notFound(fmt.Sprintf("the session has %d segment(s)", info.Segments))
	}
	rows, err := s.rt.Project().Sessions.Segment(info.Dir, info.ID, seg)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if row.ID != rowID {
			continue
		}
		var c struct {
			Images []struct {
				Mime string `json:"mime"`
				Data string `json:"data"`
				// Published images (images/<UUID>.png) with their digest.
				Path   string `json:"path"`
				SHA256 string `json:"sha256"`
			} `json:"images"`
		}
		_ = json.Unmarshal(row.Content, &c)
		if idx >= len(c.Images) {
			return notFound(fmt.Sprintf("row %s has %d image(s)", rowID, len(c.Images)))
		}
		img := c.Images[idx]
		var b []byte
		if img.Path != "" {
			b, err = s.rt.ReadImage(img.Path, img.SHA256)
		} else {
			b, err = base64.StdEncoding.DecodeString(img.Data)
		}
		ct := http.DetectContentType(b)
		if err != nil || !slices.Contains(rasterTypes, ct) {
			return notFound("the recorded image is not a readable raster image")
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, err = w.Write(b)
		return err
	}
	return notFound("segment " + fmt.Sprint(seg) + " has no row " + rowID)
}

var cardTypeRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

type edgeView struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Variant string `json:"variant"`
	Outcome string `json:"outcome,omitempty"`
	Case    string `json:"case_id,omitempty"`
}

type stateView struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func topology(tbl *workflow.Table) ([]stateView, []edgeView) {
	states, edges := []stateView{}, []edgeView{}
	for _, st := range tbl.States() {
		states = append(states, stateView{ID: st.ID, Kind: string(st.Kind), Name: st.Name})
		for _, tr := range st.Transitions {
			edges = append(edges, edgeView{From: st.ID, To: tr.Target, Variant: string(tr.Variant), Outcome: tr.Outcome, Case: tr.CaseID})
		}
	}
	return states, edges
}

func (s *Server) getPresentation(w http.ResponseWriter, r *http.Request) error {
	typ := r.PathValue("cardType")
	if !cardTypeRE.MatchString(typ) {
		return badRequest("InvalidCardType", fmt.Sprintf("%q is not a card type name", typ))
	}
	tbl, ok := s.rt.Project().Workflows.Table(typ)
	if !ok {
		return notFound("no installed card type " + typ)
	}
	states, edges := topology(tbl)
	writeJSON(w, http.StatusOK, map[string]any{"card_type": typ, "states": states, "edges": edges})
	return nil
}

// getGraphs projects every installed card type's compiled workflow: states,
// transitions, nodes with their agents, tools and record modes, and
// records. Prompt bodies, paths and accounts are not included.
func (s *Server) getGraphs(w http.ResponseWriter, r *http.Request) error {
	type nodeView struct {
		Name     string                        `json:"name"`
		Kind     string                        `json:"kind"`
		Agent    string                        `json:"agent,omitempty"`
		Tools    []string                      `json:"tools,omitempty"`
		Action   string                        `json:"action,omitempty"`
		Outcomes []string                      `json:"outcomes"`
		Records  map[string]workflow.RecordUse `json:"records,omitempty"`
	}
	type graph struct {
		CardType   string          `json:"card_type"`
		States     []stateView     `json:"states"`
		Edges      []edgeView      `json:"edges"`
		Nodes      []nodeView      `json:"nodes"`
		Records    []recordSummary `json:"records"`
		ChildTypes []string        `json:"permitted_child_types"`
		Agents     []string        `json:"session_agents"`
	}
	set := s.rt.Project().Workflows
	out := []graph{}
	for _, typ := range set.CardTypes() {
		tbl, _ := set.Table(typ)
		g := graph{CardType: typ, ChildTypes: append([]string{}, tbl.PermittedChildTypes()...), Agents: append([]string{}, tbl.SessionAgents()...),
			Nodes: []nodeView{}, Records: []recordSummary{}}
		g.States, g.Edges = topology(tbl)
		for _, n := range tbl.NodeNames() {
			nd, _ := tbl.Node(n)
			g.Nodes = append(g.Nodes, nodeView{Name: nd.Name, Kind: string(nd.Kind), Agent: nd.Agent, Tools: nd.Tools, Action: nd.Action,
				Outcomes: nd.Outcomes, Records: nd.Records})
		}
		for _, rs := range tbl.Records() {
			g.Records = append(g.Records, recordSummary{Name: rs.Name, Format: rs.Format, Bootstrap: rs.Bootstrap})
		}
		out = append(out, g)
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"graphs": out, "analyst": set.Analyst(), "oversight": set.Oversight()})
}

type recordSummary struct {
	Name      string `json:"name"`
	Format    string `json:"format"`
	Bootstrap bool   `json:"bootstrap,omitempty"`
}

// getErrors is the explicit error projection: error events (newest first)
// and failed MCP servers. Informational control actions never appear.
func (s *Server) getErrors(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", DefaultObservations, 1, MaxObservations)
	if err != nil {
		return err
	}
	all, err := s.rt.ErrorEvents(r.Context())
	if err != nil {
		return err
	}
	evs := []project.Event{}
	for i := len(all) - 1; i >= 0 && len(evs) < limit; i-- {
		evs = append(evs, all[i])
	}
	type mcpFailure struct {
		Server string `json:"server"`
		Error  string `json:"error"`
	}
	failed := []mcpFailure{}
	for _, st := range s.rt.MCP().Status() {
		if st.State == "failed" {
			failed = append(failed, mcpFailure{Server: st.Name, Error: st.LastError})
		}
	}
	rs := s.rt.Status()
	var runtimeErr any
	if rs.Status == runtime.StatusError {
		runtimeErr = rs.Error
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"events": evs, "total": len(all), "mcp_failures": failed, "runtime_error": runtimeErr})
}

// getDoctor reads every card (bounded) and its record heads and reports
// what it could not read. An ordinary read failure is a diagnostic, so the
// route answers 200 with the problem rather than failing.
func (s *Server) getDoctor(w http.ResponseWriter, r *http.Request) error {
	type problem struct {
		Card   string `json:"card"`
		Record string `json:"record,omitempty"`
		Error  string `json:"error"`
	}
	p := s.rt.Project()
	problems := []problem{}
	checked, truncated := 0, false
	counts := map[cards.Status]int{}
	queue := []string{cards.RootID}
	started := time.Now()
	for len(queue) > 0 {
		if checked == MaxDoctorCards {
			truncated = true
			break
		}
		id := queue[0]
		queue = queue[1:]
		checked++
		c, err := p.Cards.Get(r.Context(), id)
		if err != nil {
			if ctxErr := r.Context().Err(); ctxErr != nil {
				return ctxErr
			}
			problems = append(problems, problem{Card: id, Error: err.Error()})
			continue
		}
		counts[c.Status]++
		if c.Tombstoned() {
			continue
		}
		tbl, ok := p.Workflows.Table(c.Type)
		if !ok {
			problems = append(problems, problem{Card: id, Error: "card type " + c.Type + " is not installed"})
			continue
		}
		for _, spec := range tbl.Records() {
			if _, err := p.Cards.Records().ReadHead(records.Ref{CardDir: p.Cards.CardDir(id), Card: id, Name: spec.Name}); err != nil {
				problems = append(problems, problem{Card: id, Record: spec.Name, Error: err.Error()})
			}
		}
		queue = append(queue, c.Children...)
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": len(problems) == 0, "cards_checked": checked, "truncated": truncated,
		"statuses": counts, "problems": problems, "duration_ms": time.Since(started).Milliseconds()})
}

// MCP servers.

func (s *Server) getMCPTools(w http.ResponseWriter, r *http.Request) error {
	type toolView struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	}
	type serverView struct {
		Name      string     `json:"name"`
		Transport string     `json:"transport"`
		Autostart bool       `json:"autostart"`
		State     string     `json:"state"`
		LastError string     `json:"last_error,omitempty"`
		Tools     []toolView `json:"tools"`
	}
	out := []serverView{}
	for _, st := range s.rt.MCP().Status() {
		v := serverView{Name: st.Name, Transport: st.Transport, Autostart: st.Autostart, State: st.State, LastError: st.LastError, Tools: []toolView{}}
		if st.State == "ready" {
			specs, _ := s.rt.MCP().Tools(st.Name)
			for _, sp := range specs {
				v.Tools = append(v.Tools, toolView{Name: sp.Name, Description: sp.Description})
			}
		}
		out = append(out, v)
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"servers": out})
}

var mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (s *Server) mcpControl(action string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("name")
		if !mcpNameRE.MatchString(name) {
			return badRequest("InvalidServerName", fmt.Sprintf("%q is not an MCP server name", name))
		}
		if !slices.ContainsFunc(s.rt.MCP().Status(), func(st tools.MCPStatus) bool { return st.Name == name }) {
			return notFound("no enabled MCP server " + name)
		}
		st, err := s.rt.MCP().Control(r.Context(), name, action)
		_ = s.rt.LogEvent("control_action", map[string]any{"action": "mcp_" + action, "server": name, "author": "operator", "ok": err == nil})
		if err != nil {
			return conflict("McpControlFailed", fmt.Sprintf("%s %s: %v", action, name, err))
		}
		return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "server": st})
	}
}

// Work garbage collection.

type gcRequest struct {
	Mode        string  `json:"mode"`
	Before      *string `json:"before,omitempty"`
	TargetBytes *int64  `json:"target_bytes,omitempty"`
}

func (s *Server) postGCWork(w http.ResponseWriter, r *http.Request) error {
	var req gcRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Mode != "dry_run" && req.Mode != "delete" {
		return badRequest("InvalidBody", "mode must be dry_run or delete")
	}
	var before time.Time
	if req.Before != nil {
		t, err := time.Parse(time.RFC3339, *req.Before)
		if err != nil || !strings.ContainsAny((*req.Before)[10:], "Z+-") {
			return badRequest("InvalidBody", "before must be an RFC 3339 time with a zone")
		}
		before = t
	}
	if req.TargetBytes != nil && (*req.TargetBytes < 0 || *req.TargetBytes > 1<<53-1) {
		return badRequest("InvalidBody", "target_bytes must be a nonnegative safe integer")
	}
	if !s.gc.TryLock() {
		return conflict("WorkGcBusy", "Work garbage collection is busy.")
	}
	defer s.gc.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	res := s.collectHeld(ctx, req.Mode, before, req.TargetBytes)
	if res.Disposition != "refused" {
		_ = s.rt.LogEvent("control_action", map[string]any{"action": "gc_work", "mode": req.Mode, "author": "operator", "disposition": res.Disposition})
	}
	return s.writeRedacted(w, http.StatusOK, res)
}

// Restart.

type restartRequest struct {
	Confirm string `json:"confirm"`
}

// RestartConfirmation is the exact body value a restart needs.
const RestartConfirmation = "restart-server"

func (s *Server) postRestart(w http.ResponseWriter, r *http.Request) error {
	var req restartRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Confirm != RestartConfirmation {
		return badRequest("InvalidBody", `send {"confirm": "`+RestartConfirmation+`"} to restart the server`)
	}
	if s.restart == nil {
		return conflict("RestartUnavailable", "this server was not started by saivage start; restart it by hand")
	}
	_ = s.rt.LogEvent("control_action", map[string]any{"action": "restart_server", "author": "operator"})
	// The restart begins once this response is sent.
	if b, ok := w.(*buffered); ok {
		b.after = s.restart
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"scheduled": true, "exit_code": RestartExitCode})
	return nil
}

// RestartExitCode is how saivage start exits after a confirmed restart, so
// a supervisor (systemd, a shell loop) starts it again.
const RestartExitCode = 75
