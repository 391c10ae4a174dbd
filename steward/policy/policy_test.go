package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/policy"
)

func TestDecide(t *testing.T) {
	p, err := policy.New(policy.Options{User: policy.Rules{
		Allow:        []string{"mcp__github__get_issue", "mcp__shell__run_write"},
		Deny:         []string{"mcp__mail__read_message"},
		Gate:         []string{"mcp__calendar__search_events"},
		DenyPrefixes: []string{"mcp__github__", "mcp__danger"},
	}, Connectors: []string{"mail", "calendar", "shell"}, Hints: readOnly("mcp__mail__search_mail", "mcp__mail__read_message",
		"mcp__calendar__search_events", "mcp__wiki__wiki_read", "mcp__trains__find_next_train")})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]policy.Decision{
		"mcp__mail__search_mail":       policy.Allow, // a connector's annotated read
		"mcp__mail__send_email":        policy.Gate,  // default
		"create_agent_watch":           policy.Gate,  // built-in gate
		"create_watch":                 policy.Allow,
		"mcp__github__get_issue":       policy.Allow, // exact rule before the prefix
		"mcp__github__delete_repo":     policy.Deny,  // prefix
		"mcp__dangerzone__x":           policy.Deny,
		"mcp__mail__read_message":      policy.Deny, // user overrides a built-in allow
		"mcp__calendar__search_events": policy.Gate, // user can tighten
		"mcp__shell__run_write":        policy.Allow,
		"unknown_tool":                 policy.Gate,
		// Built-in allows for connectors not in Options.Connectors: the
		// server of that name is the user's, so its tools are gated.
		"mcp__wiki__wiki_read":         policy.Gate,
		"mcp__trains__find_next_train": policy.Gate,
	}
	for tool, want := range tests {
		if got := p.Decide(tool); got != want {
			t.Errorf("Decide(%s) = %s, want %s", tool, got, want)
		}
	}
}

// Built-in rules follow the connector registration, not the name: the same
// tool name is allowed when Steward's own wiki connector serves it and gated
// when only a user's server is called wiki.
func TestBuiltinRulesBindToConnectors(t *testing.T) {
	for _, tool := range []string{"mcp__wiki__wiki_read", "mcp__writeops__list_write_operations", "mcp__actions__read_action"} {
		server, _, _ := strings.Cut(strings.TrimPrefix(tool, "mcp__"), "__")
		own, _ := policy.New(policy.Options{Connectors: []string{server}, Hints: readOnly(tool)})
		users, _ := policy.New(policy.Options{Connectors: []string{"mail"}, Hints: readOnly(tool)})
		if got := own.Decide(tool); got != policy.Allow {
			t.Errorf("%s from Steward's %s connector: %s, want allow", tool, server, got)
		}
		if got := users.Decide(tool); got != policy.Gate {
			t.Errorf("%s from a user's server named %s: %s, want gate", tool, server, got)
		}
	}
	// Host tools are not connectors' and keep their built-in rules.
	p, _ := policy.New(policy.Options{})
	if p.Decide("ask_user") != policy.Allow || p.Decide("create_agent_watch") != policy.Gate {
		t.Errorf("host tools: ask_user %s, create_agent_watch %s", p.Decide("ask_user"), p.Decide("create_agent_watch"))
	}
}

// readOnly is a Hints with tools annotated readOnlyHint, as their servers
// would list them.
func readOnly(tools ...string) policy.StaticHints {
	h := policy.StaticHints{}
	for _, t := range tools {
		h[t] = true
	}
	return h
}

// A connector's readOnlyHint is its default: believed from Steward's own
// connectors only, beneath the exact rules (user and built-in gates win),
// and a tool the server does not list, or lists without the hint, is gated.
func TestReadOnlyHintsFeedDefaults(t *testing.T) {
	hints := policy.StaticHints{
		"mcp__mail__search_mail": true, "mcp__mail__send_email": false, "mcp__mail__read_thread": true,
		"mcp__notes__read_note":  true,                                // a user's server claiming a read
		"mcp__wiki__wiki_rescan": true, "mcp__shell__run_write": true, // built-in gates, whatever the claim
		"mcp__calendar__search_events": true,
	}
	p, err := policy.New(policy.Options{Connectors: []string{"mail", "wiki", "shell", "calendar"}, Hints: hints,
		User: policy.Rules{Gate: []string{"mcp__mail__read_thread"}, DenyPrefixes: []string{"mcp__calendar__"}}})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]policy.Decision{
		"mcp__mail__search_mail":       policy.Allow,
		"mcp__mail__send_email":        policy.Gate, // listed, no hint
		"mcp__mail__list_mailboxes":    policy.Gate, // not listed (yet)
		"mcp__mail__read_thread":       policy.Gate, // the user's gate wins
		"mcp__notes__read_note":        policy.Gate, // an untrusted server's claim
		"mcp__wiki__wiki_rescan":       policy.Gate,
		"mcp__shell__run_write":        policy.Gate,
		"mcp__calendar__search_events": policy.Deny, // the user's deny prefix beats the connector's annotation
	} {
		if got := p.Decide(tool); got != want {
			t.Errorf("Decide(%s) = %s, want %s", tool, got, want)
		}
	}
	// Without hints nothing is allowed by annotation.
	bare, _ := policy.New(policy.Options{Connectors: []string{"mail"}})
	if got := bare.Decide("mcp__mail__search_mail"); got != policy.Gate {
		t.Errorf("without hints: %s, want gate", got)
	}
	// Replace carries the hints and connectors of the new policy.
	bare.Replace(p)
	if got := bare.Decide("mcp__mail__search_mail"); got != policy.Allow {
		t.Errorf("after Replace: %s, want allow", got)
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		path := filepath.Join(dir, "policy.yaml")
		os.WriteFile(path, []byte(s), 0o600)
		return path
	}
	if r, err := policy.LoadRules(filepath.Join(dir, "missing.yaml")); err != nil || len(r.Allow) != 0 {
		t.Errorf("missing file: %+v %v", r, err)
	}
	if _, err := policy.LoadRules(write("")); err != nil {
		t.Errorf("empty file: %v", err)
	}
	r, err := policy.LoadRules(write("allow: [a]\ndeny_prefixes: [mcp__x__]\n"))
	if err != nil || r.Allow[0] != "a" || r.DenyPrefixes[0] != "mcp__x__" {
		t.Errorf("valid file: %+v %v", r, err)
	}
	for _, bad := range []string{"allow: [a]\nallw: [b]\n", "allow: [a]\ndeny: [a]\n", "deny_prefixes: ['']\n", "allow: {a: 1}\n"} {
		if _, err := policy.LoadRules(write(bad)); err == nil || !strings.Contains(err.Error(), "policy.yaml") {
			t.Errorf("%q: err = %v, want an error naming the file", bad, err)
		}
	}
}

// fakeApprover answers with a fixed response, or waits for ctx when wait is set.
type fakeApprover struct {
	resp  policy.ApprovalResponse
	err   error
	wait  bool
	asked []policy.ApprovalRequest
}

func (f *fakeApprover) Approve(ctx context.Context, req policy.ApprovalRequest) (policy.ApprovalResponse, error) {
	f.asked = append(f.asked, req)
	if f.wait {
		<-ctx.Done()
		return policy.ApprovalResponse{}, ctx.Err()
	}
	return f.resp, f.err
}

type sendMail struct {
	got       []string
	preflight bool
}

func (s *sendMail) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "mcp__mail__send_email", Parameters: json.RawMessage(`{"type":"object","required":["to","body"],"properties":{"to":{},"body":{},"cc":{}}}`)}
}

func (s *sendMail) Call(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
	s.got = append(s.got, string(args))
	return agent.ToolResult{Content: "sent"}, nil
}

type preflightMail struct{ sendMail }

func (p *preflightMail) Preflight(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
	var a map[string]any
	json.Unmarshal(args, &a)
	to, _ := a["to"].(string)
	if !strings.Contains(to, "@") {
		return nil, errors.New("to must be an email address")
	}
	a["to"] = strings.ToLower(to)
	return json.Marshal(a)
}

func call(t *testing.T, tool agent.Tool, ap policy.Approver, timeout time.Duration, args string) agent.ToolResult {
	t.Helper()
	p, _ := policy.New(policy.Options{User: policy.Rules{DenyPrefixes: []string{"mcp__blocked__"}}, Connectors: []string{"mail"},
		Hints: readOnly("mcp__mail__search_mail")})
	wrapped := policy.Wrap([]agent.Tool{tool}, policy.WrapOptions{Policy: p, Approver: ap, Timeout: timeout})[0]
	res, err := wrapped.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGate(t *testing.T) {
	const args = `{"to":"Anna@Polimi.it","body":"hello"}`
	tests := []struct {
		name      string
		ap        *fakeApprover
		wantRun   string // arguments the tool received, "" = it must not run
		wantText  string
		wantError bool
		// wantEffective is the result's EffectiveArgs: set only when the
		// user's edits changed the arguments (docs/protocol.md).
		wantEffective string
	}{
		{"approved", &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved}}, args, "sent", false, ""},
		{"approved with edits", &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved,
			Args: json.RawMessage(`{"to":"bob@example.com","body":"edited","cc":null}`)}},
			`{"body":"edited","to":"bob@example.com"}`, "user edited the arguments", false, `{"body":"edited","to":"bob@example.com"}`},
		// A client that always sends the form's values back (reordered,
		// with empty optionals) did not edit anything.
		{"approved with unchanged arguments", &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved,
			Args: json.RawMessage(`{"body":"hello","cc":null,"to":"Anna@Polimi.it"}`)}},
			`{"body":"hello","to":"Anna@Polimi.it"}`, "sent", false, ""},
		{"denied with note", &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictDenied, Note: "not now"}}, "", policy.BlockedDenied + " The user's note: not now", true, ""},
		{"revision", &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictRevise, Note: "shorter"}}, "", policy.RevisionPrefix + " The user's note: shorter", true, ""},
		{"timed out", &fakeApprover{wait: true}, "", policy.BlockedTimeout, true, ""},
		{"no channel", &fakeApprover{err: errors.New("no client connected")}, "", policy.BlockedNoClient, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := &sendMail{}
			res := call(t, tool, tc.ap, 50*time.Millisecond, args)
			if !strings.Contains(res.Content, tc.wantText) || res.IsError != tc.wantError {
				t.Errorf("result = %+v", res)
			}
			if tc.wantRun == "" && len(tool.got) != 0 {
				t.Errorf("tool ran with %v", tool.got)
			}
			if tc.wantRun != "" && (len(tool.got) != 1 || tool.got[0] != tc.wantRun) {
				t.Errorf("tool received %v, want %s", tool.got, tc.wantRun)
			}
			if string(res.EffectiveArgs) != tc.wantEffective {
				t.Errorf("effective args = %s, want %q", res.EffectiveArgs, tc.wantEffective)
			}
			if tc.wantEffective == "" && strings.Contains(res.Content, "edited") {
				t.Errorf("unedited approval says it was edited: %q", res.Content)
			}
			if len(tc.ap.asked) != 1 || string(tc.ap.asked[0].Args) != args || tc.ap.asked[0].Tool != "mcp__mail__send_email" {
				t.Errorf("approval requests = %+v", tc.ap.asked)
			}
		})
	}
}

func TestAllowAndDenyNeverAsk(t *testing.T) {
	ap := &fakeApprover{}
	read := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "mcp__mail__search_mail"}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
		return agent.ToolResult{Content: "3 results"}, nil
	}}
	if res := call(t, read, ap, time.Second, `{}`); res.Content != "3 results" {
		t.Errorf("allowed tool = %+v", res)
	}
	ran := false
	blockedTool := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "mcp__blocked__wipe"}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
		ran = true
		return agent.ToolResult{}, nil
	}}
	if res := call(t, blockedTool, ap, time.Second, `{}`); res.Content != policy.BlockedByPolicy || !res.IsError || ran {
		t.Errorf("denied tool = %+v ran=%v", res, ran)
	}
	if len(ap.asked) != 0 {
		t.Errorf("allow/deny asked for approval: %+v", ap.asked)
	}
}

func TestPreflightBeforeAndAfterEdits(t *testing.T) {
	ap := &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved}}
	tool := &preflightMail{}
	if res := call(t, tool, ap, time.Second, `{"to":"nobody","body":"x"}`); !res.IsError || len(ap.asked) != 0 {
		t.Errorf("invalid proposal reached the user: %+v asked=%d", res, len(ap.asked))
	}
	res := call(t, tool, ap, time.Second, `{"to":"ANNA@X.IT","body":"x"}`)
	if len(ap.asked) != 1 || !strings.Contains(string(ap.asked[0].Args), "anna@x.it") || res.Content != "sent" {
		t.Errorf("normalised proposal not shown: %+v, %+v", ap.asked, res)
	}
	ap2 := &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved, Args: json.RawMessage(`{"to":"broken","body":"x"}`)}}
	tool2 := &preflightMail{}
	if res := call(t, tool2, ap2, time.Second, `{"to":"a@b.c","body":"x"}`); !res.IsError || len(tool2.got) != 0 {
		t.Errorf("invalid edits ran: %+v %v", res, tool2.got)
	}
}

func TestGateChecksInputSchema(t *testing.T) {
	approve := func(edits string) *fakeApprover {
		return &fakeApprover{resp: policy.ApprovalResponse{Verdict: policy.VerdictApproved, Args: json.RawMessage(edits)}}
	}
	tests := []struct {
		name      string
		args      string
		ap        *fakeApprover
		wantAsked bool
		wantText  string
	}{
		{"missing required field: no card", `{"to":"anna@polimi.it"}`, approve(""), false, policy.InvalidProposal},
		{"wrong type: no card", `{"to":"anna@polimi.it","body":"hi","cc":7}`, approve(""), false, "cc"},
		{"edits break the schema", `{"to":"anna@polimi.it","body":"hi"}`, approve(`{"to":"anna@polimi.it","body":null,"cc":null}`), true,
			"edited arguments do not match the tool's input schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := &sendMail{}
			p, _ := policy.New(policy.Options{Connectors: []string{"mail"}})
			wrapped := policy.Wrap([]agent.Tool{typedSendMail{tool}}, policy.WrapOptions{Policy: p, Approver: tc.ap, Timeout: time.Second})[0]
			res, err := wrapped.Call(context.Background(), json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(res.Content, tc.wantText) {
				t.Errorf("result = %+v, want an error containing %q", res, tc.wantText)
			}
			if asked := len(tc.ap.asked) > 0; asked != tc.wantAsked {
				t.Errorf("approval asked = %v, want %v", asked, tc.wantAsked)
			}
			if len(tool.got) != 0 {
				t.Errorf("tool ran with %v", tool.got)
			}
		})
	}
}

// typedSendMail is sendMail with a typed schema, as an MCP server declares.
type typedSendMail struct{ *sendMail }

func (typedSendMail) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "mcp__mail__send_email", Parameters: json.RawMessage(`{"type":"object","required":["to","body"],
		"properties":{"to":{"type":"string"},"body":{"type":"string"},"cc":{"type":"string"}}}`)}
}
