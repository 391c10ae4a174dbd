package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/workflow"
)

func classic(t *testing.T) (*config.Config, fs.FS) {
	t.Helper()
	return templateConfig(t, "classic")
}

// templateConfig returns a built-in template's configuration and files.
func templateConfig(t *testing.T, name string) (*config.Config, fs.FS) {
	t.Helper()
	tpl, err := templates.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tpl.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, tpl.Files()
}

func TestCompileBuiltinTemplates(t *testing.T) {
	for _, tpl := range templates.All() {
		t.Run(tpl.Name, func(t *testing.T) {
			cfg, err := tpl.Config()
			if err != nil {
				t.Fatal(err)
			}
			set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: tpl.Files()})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{
				"classic":       {"goal", "project", "task"},
				"classic-typed": {"architecture", "goal", "implementation", "project", "research", "test"},
				"paad-typed":    {"architecture", "goal", "implementation", "project", "research", "test"},
				"classic-git":   {"goal", "project", "task"},
			}[tpl.Name]
			if got := set.CardTypes(); !slices.Equal(got, want) {
				t.Fatalf("card types = %v, want %v", got, want)
			}
		})
	}
}

func TestClassicStateTable(t *testing.T) {
	cfg, files := classic(t)
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := set.Table("task")
	var ids []string
	for _, s := range task.States() {
		ids = append(ids, s.ID)
	}
	want := []string{"ready", "entry:BACKLOG", "entry:CHANGED", "entry:BLOCKED", "entry:STOPPED", "node:execute", "node:review", "terminal:DONE", "terminal:FAILED", "terminal:BLOCKED"}
	if !slices.Equal(ids, want) {
		t.Fatalf("states = %v", ids)
	}
	review, _ := task.State("node:review")
	var approved *workflow.Transition
	for i, tr := range review.Transitions {
		if tr.Variant == workflow.VariantCase && tr.CaseID == "approved" {
			approved = &review.Transitions[i]
		}
	}
	if approved == nil || approved.Target != "terminal:DONE" || approved.Promote.LatestNode != "execute" ||
		!slices.Equal(approved.ExportRecords, []string{"summary", "review"}) || approved.When.Value != "approved" {
		t.Fatalf("approved transition = %+v", approved)
	}
	entry, _ := task.State("entry:BACKLOG")
	if entry.Transitions[0].Target != "node:execute" || !strings.Contains(entry.Transitions[0].Prompt.Text, "first time") {
		t.Fatalf("entry = %+v", entry)
	}
	if task.PermitsChild("task") || len(task.PermittedChildTypes()) != 0 {
		t.Fatal("task permits children")
	}
	if got := task.SessionAgents(); !slices.Equal(got, []string{"executor", "reviewer"}) {
		t.Fatalf("session agents = %v", got)
	}
	project, _ := set.Table("project")
	obj, ok := project.Record("objective")
	if !ok || !obj.Bootstrap || !strings.HasPrefix(obj.Initial, "# Objective") {
		t.Fatalf("objective record = %+v", obj)
	}
	// create_card is removed from nodes of types without permitted children.
	plan, _ := project.Node("plan")
	if !slices.Contains(plan.Tools, "create_card") {
		t.Fatal("project planner lost create_card")
	}
	taskExec, _ := task.Node("execute")
	if slices.Contains(taskExec.Tools, "create_card") {
		t.Fatal("task executor has create_card")
	}
	// The returned states are copies.
	sts := task.States()
	sts[0].Transitions[0].Target = "mutated"
	if again, _ := task.State("ready"); again.Transitions[0].Target == "mutated" {
		t.Fatal("table mutated through accessor")
	}
	a, _ := set.Agent("planner")
	if a.Prompt == nil || a.Candidates[0] != "gateway/tier-5" {
		t.Fatalf("agent = %+v", a)
	}
}

func TestEmitResultSchema(t *testing.T) {
	cfg, files := classic(t)
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := set.Table("task")
	tests := []struct {
		node         string
		wantOutcomes []string
		wantData     bool
	}{
		{"execute", []string{"blocked", "done", "failed"}, false},
		{"review", []string{"blocked", "done"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			n, _ := task.Node(tt.node)
			var schema struct {
				AdditionalProperties bool     `json:"additionalProperties"`
				Required             []string `json:"required"`
				Properties           struct {
					Outcome struct {
						Enum []string `json:"enum"`
					} `json:"outcome"`
					Data *struct {
						Required   []string `json:"required"`
						Properties map[string]struct {
							Enum []string `json:"enum"`
						} `json:"properties"`
					} `json:"data"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(n.EmitResult, &schema); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(schema.Properties.Outcome.Enum, tt.wantOutcomes) || schema.AdditionalProperties {
				t.Fatalf("schema = %s", n.EmitResult)
			}
			if (schema.Properties.Data != nil) != tt.wantData || tt.wantData != slices.Contains(schema.Required, "data") {
				t.Fatalf("data presence wrong: %s", n.EmitResult)
			}
			if tt.wantData && !slices.Equal(schema.Properties.Data.Properties["verdict"].Enum, []string{"approved", "changes_requested"}) {
				t.Fatalf("verdict enum: %s", n.EmitResult)
			}
		})
	}
}

// TestCompileRejects runs one broken configuration per validation rule and
// checks the error names the exact card type, node and field.
func TestCompileRejects(t *testing.T) {
	type mut func(c *config.Config)
	node := func(c *config.Config, ct, n string, f func(*config.Node)) {
		x := c.CardTypes[ct].Workflow.Nodes[n]
		f(&x)
		c.CardTypes[ct].Workflow.Nodes[n] = x
	}
	edge := func(c *config.Config, ct, n, o string, f func(*config.Edge)) {
		node(c, ct, n, func(x *config.Node) {
			e := x.Edges[o]
			f(&e)
			x.Edges[o] = e
		})
	}
	setWF := func(c *config.Config, ct string, f func(*config.Workflow)) {
		x := c.CardTypes[ct]
		f(&x.Workflow)
		c.CardTypes[ct] = x
	}
	agent := func(c *config.Config, name string, f func(*config.Agent)) {
		a := c.Agents[name]
		f(&a)
		c.Agents[name] = a
	}
	tests := []struct {
		name     string
		mutate   mut
		wantPath string
		wantMsg  string
	}{
		{"unknown tool", func(c *config.Config) {
			agent(c, "executor", func(a *config.Agent) { a.Tools = append(a.Tools, "teleport") })
		}, "agents.executor.tools[22]", "unknown tool"},
		{"tool this build cannot provide", func(c *config.Config) {
			agent(c, "executor", func(a *config.Agent) { a.Tools = append(a.Tools, "checkpoint_source") })
		}, "agents.executor.tools[22]", `tool "checkpoint_source" needs the native Git workflow`},
		{"skill without skills", func(c *config.Config) {
			agent(c, "reviewer", func(a *config.Agent) { a.Skills = false })
		}, "agents.reviewer.tools[12]", "skill needs skills: true"},
		{"quality tool listed twice", func(c *config.Config) {
			agent(c, "executor", func(a *config.Agent) {
				a.QualityTools = []string{"code_quality_python_ruff", "code_quality_python_ruff"}
			})
		}, "agents.executor.quality_tools[1]", "listed twice"},
		{"emit_result configured", func(c *config.Config) {
			agent(c, "executor", func(a *config.Agent) { a.Tools = append(a.Tools, "emit_result") })
		}, "agents.executor.tools[22]", "generated"},
		{"oversight tool outside allowlist", func(c *config.Config) {
			agent(c, "oversight", func(a *config.Agent) { a.Tools = append(a.Tools, "run_command") })
		}, "agents.oversight.tools[17]", "Oversight"},
		{"unknown quality tool", func(c *config.Config) {
			agent(c, "executor", func(a *config.Agent) { a.QualityTools = []string{"lint_everything"} })
		}, "agents.executor.quality_tools[0]", "unknown quality tool"},
		{"missing agent prompt file", func(c *config.Config) {
			agent(c, "reviewer", func(a *config.Agent) { a.Prompt = &config.PromptRef{Reference: "prompts/agents/nope.md"} })
		}, "agents.reviewer.prompt.reference", "prompt file"},
		{"prompt path traversal", func(c *config.Config) {
			agent(c, "reviewer", func(a *config.Agent) { a.Prompt = &config.PromptRef{Reference: "../../etc/passwd"} })
		}, "agents.reviewer.prompt.reference", "without '..'"},
		{"unknown agent", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Execution.Agent = "coder" })
		}, "card_types.task.workflow.nodes.execute.execution.agent", "unknown agent"},
		{"global agent on node", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Execution.Agent = "analyst" })
		}, "card_types.task.workflow.nodes.execute.execution.agent", "session"},
		{"unknown execution kind", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Execution.Kind = "script" })
		}, "card_types.task.workflow.nodes.execute.execution.kind", "agent"},
		{"unknown action", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) {
				n.Execution = config.Execution{Kind: "action", Action: "rm.rf", ContractVersion: 1}
				n.Records = nil
			})
		}, "card_types.task.workflow.nodes.execute.execution.action", "unknown action"},
		{"unknown child type", func(c *config.Config) {
			x := c.CardTypes["goal"]
			x.PermittedChildTypes = []string{"subtask"}
			c.CardTypes["goal"] = x
		}, "card_types.goal.permitted_child_types[0]", "unknown card type"},
		{"missing entry", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) { w.Entries.STOPPED = nil })
		}, "card_types.task.workflow.entries.STOPPED", "required"},
		{"entry to unknown node", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) { w.Entries.CHANGED = &config.Entry{Node: "ghost"} })
		}, "card_types.task.workflow.entries.CHANGED.node", "unknown node"},
		{"undeclared record", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Records["notes"] = config.NodeRecord{Mode: "read"} })
		}, "card_types.task.workflow.nodes.execute.records.notes", "not declared"},
		{"bad record mode", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Records["work"] = config.NodeRecord{Mode: "append"} })
		}, "card_types.task.workflow.nodes.execute.records.work.mode", "read, clean or continue"},
		{"updated gate on read", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Records["work"] = config.NodeRecord{Mode: "read", Gate: "updated"} })
		}, "card_types.task.workflow.nodes.execute.records.work.gate", "clean or continue"},
		{"write without record_writes", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.Records["review"] = config.NodeRecord{Mode: "clean"} })
		}, "card_types.task.workflow.nodes.execute.records.review.mode", "record_writes"},
		{"write without write tool", func(c *config.Config) {
			agent(c, "reviewer", func(a *config.Agent) {
				a.Tools = slices.DeleteFunc(a.Tools, func(s string) bool { return s == "write" })
			})
		}, "card_types.task.workflow.nodes.review.records.review.mode", "needs the write tool"},
		{"initialize non-written record", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.InitializeRecords = []string{"brief"} })
		}, "card_types.task.workflow.nodes.execute.initialize_records[0]", "clean or continue"},
		{"output_record on agent", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) { n.OutputRecord = "work" })
		}, "card_types.task.workflow.nodes.execute.output_record", "only action nodes"},
		{"unknown edge target", func(c *config.Config) {
			edge(c, "task", "execute", "done", func(e *config.Edge) { e.Target = &config.Target{Node: "deploy"} })
		}, "card_types.task.workflow.nodes.execute.edges.done.target.node", "unknown node"},
		{"bad terminal", func(c *config.Config) {
			edge(c, "task", "execute", "done", func(e *config.Edge) { e.Target = &config.Target{Terminal: "FINISHED"} })
		}, "card_types.task.workflow.nodes.execute.edges.done.target.terminal", "DONE, FAILED or BLOCKED"},
		{"node and terminal", func(c *config.Config) {
			edge(c, "task", "execute", "done", func(e *config.Edge) { e.Target = &config.Target{Node: "review", Terminal: "DONE"} })
		}, "card_types.task.workflow.nodes.execute.edges.done.target", "exactly one"},
		{"promote on node target", func(c *config.Config) {
			edge(c, "task", "execute", "done", func(e *config.Edge) {
				e.Target = &config.Target{Node: "review", Promote: &config.Promote{Current: true}}
			})
		}, "card_types.task.workflow.nodes.execute.edges.done.target", "terminal targets"},
		{"target and cases", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Target = &config.Target{Terminal: "DONE"} })
		}, "card_types.task.workflow.nodes.review.edges.done", "not both"},
		{"cases without otherwise", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Otherwise = nil })
		}, "card_types.task.workflow.nodes.review.edges.done", "otherwise"},
		{"case on unknown field", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Cases[0].When.Field = "score" })
		}, "card_types.task.workflow.nodes.review.edges.done.cases[0].when.field", "no data field"},
		{"case value outside enum", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Cases[0].When.Value = "maybe" })
		}, "card_types.task.workflow.nodes.review.edges.done.cases[0].when.value", "not one of"},
		{"case op for type", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Cases[0].When.Op = "gt" })
		}, "card_types.task.workflow.nodes.review.edges.done.cases[0].when.op", "does not apply"},
		{"bad data input type", func(c *config.Config) {
			node(c, "task", "review", func(n *config.Node) { n.Execution.DataInputs["verdict"] = config.DataInput{Type: "date"} })
		}, "card_types.task.workflow.nodes.review.execution.data_inputs.verdict.type", "must be enum"},
		{"unreachable node", func(c *config.Config) {
			node(c, "task", "execute", func(n *config.Node) {})
			x := c.CardTypes["task"]
			x.Workflow.Nodes["orphan"] = config.Node{
				Execution: config.Execution{Kind: "agent", Agent: "executor", Prompt: &config.PromptRef{Reference: "prompts/nodes/rework.md"}},
				Edges:     map[string]config.Edge{"done": {EdgeBody: config.EdgeBody{Target: &config.Target{Terminal: "DONE"}}}},
			}
		}, "card_types.task.workflow.nodes.orphan", "not reachable"},
		{"no terminal path", func(c *config.Config) {
			edge(c, "task", "execute", "blocked", func(e *config.Edge) { e.Target = &config.Target{Node: "review"} })
			edge(c, "task", "execute", "failed", func(e *config.Edge) { e.Target = &config.Target{Node: "review"} })
			edge(c, "task", "review", "blocked", func(e *config.Edge) { e.Target = &config.Target{Node: "execute"} })
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Cases[0].Target = &config.Target{Node: "execute"} })
		}, "card_types.task.workflow.nodes.execute.edges", "reaches a terminal"},
		{"export without source", func(c *config.Config) {
			c.CardTypes["task"].Records["notes"] = config.RecordDecl{Format: "markdown"}
			edge(c, "task", "execute", "failed", func(e *config.Edge) {
				e.Target = &config.Target{Terminal: "FAILED", ExportRecords: []string{"notes"}}
			})
		}, "card_types.task.workflow.nodes.execute.edges.failed.target.export_records", "written by no node"},
		{"export undeclared", func(c *config.Config) {
			edge(c, "task", "execute", "failed", func(e *config.Edge) {
				e.Target = &config.Target{Terminal: "FAILED", ExportRecords: []string{"logs"}}
			})
		}, "card_types.task.workflow.nodes.execute.edges.failed.target.export_records[0]", "not declared"},
		{"unreachable promotion", func(c *config.Config) {
			edge(c, "task", "execute", "failed", func(e *config.Edge) {
				e.Target = &config.Target{Terminal: "FAILED", Promote: &config.Promote{LatestNode: "review"}}
			})
			// review can reach execute through otherwise, so break that path first.
			edge(c, "task", "review", "done", func(e *config.Edge) { e.Otherwise.Target = &config.Target{Terminal: "FAILED"} })
		}, "card_types.task.workflow.nodes.execute.edges.failed.target.promote.latest_node", "cannot run before"},
		{"descendant context without children", func(c *config.Config) {
			node(c, "task", "review", func(n *config.Node) { n.DescendantContext = &config.DescendantContext{Records: []string{"summary"}} })
		}, "card_types.task.workflow.nodes.review.descendant_context", "permits no child types"},
		{"descendant context not closed", func(c *config.Config) {
			node(c, "goal", "plan", func(n *config.Node) { n.DescendantContext.Records = []string{"summary", "objective"} })
		}, "card_types.goal.workflow.nodes.plan.descendant_context.records[1]", "declares record"},
		{"recipient unknown", func(c *config.Config) {
			setWF(c, "goal", func(w *config.Workflow) { w.NotificationRecipient = "inbox" })
		}, "card_types.goal.workflow.notification_recipient", "unknown node"},
		{"pending notifications to non-recipient", func(c *config.Config) {
			edge(c, "goal", "review", "done", func(e *config.Edge) {
				e.Cases[0].PendingNotifications = &config.PendingNotifications{Node: "review"}
			})
		}, "card_types.goal.workflow.nodes.review.edges.done.cases[0].pending_notifications.node", "recipient"},
		{"pending notifications on non-DONE", func(c *config.Config) {
			edge(c, "goal", "review", "blocked", func(e *config.Edge) {
				e.PendingNotifications = &config.PendingNotifications{Node: "plan"}
			})
		}, "card_types.goal.workflow.nodes.review.edges.blocked.pending_notifications", "DONE"},
		{"edge input from unknown field", func(c *config.Config) {
			edge(c, "task", "review", "done", func(e *config.Edge) {
				e.Otherwise.Inputs = map[string]config.EdgeInput{"notes": {Output: "comments"}}
			})
		}, "card_types.task.workflow.nodes.review.edges.done.otherwise.inputs.notes.output", "no data field"},
		{"hook must be action", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "agent"}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.kind", "action"},
		{"unqualified action", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "run", ContractVersion: 1}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.action", "not qualified"},
		{"reserved namespace", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "shell.exec", ContractVersion: 1}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.action", "reserved namespace"},
		{"undeclared plugin action", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "acme.lint", ContractVersion: 1}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.action", `unknown action "acme.lint": this build compiles shell.run and the code_quality actions, and no plugin declares it`},
		{"wrong contract version", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "shell.run", ContractVersion: 2,
					Config: map[string]any{"script": "true"}}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.contract_version", `action "shell.run" uses contract version 1`},
		{"quality action contract version", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "code_quality.python_ruff"}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.contract_version", `action "code_quality.python_ruff" uses contract version 1`},
		{"shell.run script and argv", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "shell.run", ContractVersion: 1,
					Config: map[string]any{"script": "x", "argv": []any{"y"}}}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.config", "exactly one of script or argv"},
		{"shell.run timeout", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{Execution: config.Execution{Kind: "action", Action: "shell.run", ContractVersion: 1,
					Config: map[string]any{"script": "x", "timeout_seconds": 99999}}, Statuses: []string{"done"}}
			})
		}, "card_types.task.workflow.after_activation_commit.execution.config.timeout_seconds", "1 to 3600"},
		{"hook status", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) {
				w.AfterActivationCommit = &config.AfterActivationCommit{
					Execution: config.Execution{Kind: "action", Action: "shell.run", ContractVersion: 1, Config: map[string]any{"script": "true"}}, Statuses: []string{"cancelled"}}
			})
		}, "card_types.task.workflow.after_activation_commit.statuses[0]", "done, blocked or failed"},
		{"format version", func(c *config.Config) {
			setWF(c, "task", func(w *config.Workflow) { w.FormatVersion = 2 })
		}, "card_types.task.workflow.format_version", "must be 1"},
		{"record template missing", func(c *config.Config) {
			x := c.CardTypes["project"]
			x.Records["objective"] = config.RecordDecl{Format: "markdown", Bootstrap: true, Initialization: &config.RecordInitialization{FormatVersion: 1, Template: "prompts/records/none.md"}}
		}, "card_types.project.records.objective.initialization.template", "prompt file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, files := classic(t)
			tt.mutate(cfg)
			_, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if !strings.HasPrefix(ce.Path, tt.wantPath) || !strings.Contains(ce.Msg, tt.wantMsg) {
				t.Fatalf("got %q: %q\nwant %q: …%q…", ce.Path, ce.Msg, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestCompileActionNodeWithOutputRecord(t *testing.T) {
	cfg, files := classic(t)
	x := cfg.CardTypes["task"]
	x.Records["lint"] = config.RecordDecl{Format: "markdown"}
	x.Workflow.Nodes["lint"] = config.Node{
		Execution: config.Execution{Kind: "action", Action: "shell.run", ContractVersion: 1, Config: map[string]any{"script": "make lint"},
			Inputs: map[string]config.Input{"target": {Literal: "all"}}},
		Records:      map[string]config.NodeRecord{"lint": {Mode: "continue", Gate: "updated"}},
		OutputRecord: "lint",
		Edges: map[string]config.Edge{
			"done": {Cases: []config.Case{{ID: "clean", When: config.When{Field: "exit_code", Op: "eq", Value: 0},
				EdgeBody: config.EdgeBody{Target: &config.Target{Node: "review"}}}},
				Otherwise: &config.EdgeBody{Target: &config.Target{Node: "execute"}}},
			"failed": {EdgeBody: config.EdgeBody{Target: &config.Target{Terminal: "FAILED"}}},
		},
	}
	e := x.Workflow.Nodes["execute"]
	e.Edges["done"] = config.Edge{EdgeBody: config.EdgeBody{Target: &config.Target{Node: "lint"}}}
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := set.Table("task")
	n, _ := tbl.Node("lint")
	if n.Kind != workflow.NodeAction || n.OutputRecord != "lint" || n.EmitResult != nil {
		t.Fatalf("node = %+v", n)
	}
	// The output record must be continue/updated.
	x.Workflow.Nodes["lint"].Records["lint"] = config.NodeRecord{Mode: "continue"}
	_, err = workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
	if err == nil || !strings.Contains(err.Error(), "card_types.task.workflow.nodes.lint") {
		t.Fatalf("err = %v", err)
	}
}

func TestCompileHasNoFileEffectsBeyondPrompts(t *testing.T) {
	cfg, files := classic(t)
	tpl, _ := templates.Lookup("classic")
	paths, err := tpl.Paths()
	if err != nil {
		t.Fatal(err)
	}
	// An in-memory FS proves compilation needs nothing but read access.
	mem := fstest.MapFS{}
	for _, p := range paths {
		b, err := fs.ReadFile(files, p)
		if err != nil {
			t.Fatal(err)
		}
		mem[p] = &fstest.MapFile{Data: b}
	}
	if _, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: mem}); err != nil {
		t.Fatal(err)
	}
	delete(mem, "prompts/nodes/rework.md")
	_, err = workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: mem})
	if err == nil || !strings.Contains(err.Error(), "card_types.task.workflow.nodes.review.edges.done.otherwise.prompt.reference") {
		t.Fatalf("err = %v", err)
	}
}
