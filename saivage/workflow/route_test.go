package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// compileTemplate compiles a built-in template after mutate changes its
// configuration.
func compileTemplate(t *testing.T, name string, mutate func(*config.Config)) *workflow.Set {
	t.Helper()
	cfg, files := templateConfig(t, name)
	if mutate != nil {
		mutate(cfg)
	}
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// routingProject is classic's project table with more typed fields on the
// assess node and more cases on its done outcome, in this order:
// perfect (score ge 9, DONE, with a pending-notifications alternative),
// complete (verdict eq complete, DONE), good (score gt 5, plan), tagged
// (label in [urgent, later], plan), otherwise plan.
func routingProject(t *testing.T) *workflow.Table {
	t.Helper()
	set := compileTemplate(t, "classic", func(c *config.Config) {
		ct := c.CardTypes["project"]
		n := ct.Workflow.Nodes["assess"]
		n.Execution.DataInputs["score"] = config.DataInput{Type: "integer"}
		n.Execution.DataInputs["label"] = config.DataInput{Type: "string"}
		e := n.Edges["done"]
		done := func(id string, w config.When) config.Case {
			return config.Case{ID: id, When: w, EdgeBody: config.EdgeBody{Target: &config.Target{Terminal: "DONE"}}}
		}
		replan := func(id string, w config.When) config.Case {
			return config.Case{ID: id, When: w, EdgeBody: config.EdgeBody{Target: &config.Target{Node: "plan"}}}
		}
		perfect := done("perfect", config.When{Field: "score", Op: "ge", Value: 9})
		perfect.PendingNotifications = &config.PendingNotifications{Node: "plan", Prompt: &config.PromptRef{Reference: "prompts/nodes/replan.md"}}
		e.Cases = []config.Case{
			perfect,
			e.Cases[0], // complete: verdict eq complete → DONE, promoting and exporting
			replan("good", config.When{Field: "score", Op: "gt", Value: 5}),
			replan("tagged", config.When{Field: "label", Op: "in", Value: []any{"urgent", "later"}}),
		}
		n.Edges["done"] = e
		ct.Workflow.Nodes["assess"] = n
		c.CardTypes["project"] = ct
	})
	tbl, ok := set.Table("project")
	if !ok {
		t.Fatal("no project table")
	}
	return tbl
}

func TestRoute(t *testing.T) {
	project := routingProject(t)
	tests := []struct {
		name        string
		node        string
		result      workflow.Result
		wantVariant workflow.Variant
		wantCase    string
		wantDest    workflow.Destination
		wantPending string // the alternative's target, "" for none
		wantPrompt  string // a fragment of the edge's prompt
	}{
		{"direct outcome to a node", "plan", workflow.Result{Outcome: "done"},
			workflow.VariantOutcome, "", workflow.Destination{Node: "assess"}, "", "Assess"},
		{"direct outcome to BLOCKED", "plan", workflow.Result{Outcome: "blocked"},
			workflow.VariantOutcome, "", workflow.Destination{Terminal: "BLOCKED"}, "", ""},
		{"direct outcome to FAILED", "plan", workflow.Result{Outcome: "failed"},
			workflow.VariantOutcome, "", workflow.Destination{Terminal: "FAILED"}, "", ""},
		{"first case of several matching wins", "assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "complete", "score": float64(10), "label": "urgent"}},
			workflow.VariantCase, "perfect", workflow.Destination{Terminal: "DONE"}, "node:plan", ""},
		{"an earlier case that does not match is skipped", "assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "complete", "score": float64(7)}},
			workflow.VariantCase, "complete", workflow.Destination{Terminal: "DONE"}, "", ""},
		{"a numeric case", "assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "incomplete", "score": float64(6)}},
			workflow.VariantCase, "good", workflow.Destination{Node: "plan"}, "", ""},
		{"an in case", "assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "incomplete", "score": float64(2), "label": "later"}},
			workflow.VariantCase, "tagged", workflow.Destination{Node: "plan"}, "", ""},
		{"no case matches: otherwise", "assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "incomplete", "score": float64(5), "label": "soon"}},
			workflow.VariantOtherwise, "", workflow.Destination{Node: "plan"}, "", "not accepted"},
		{"a missing field matches no case", "assess", workflow.Result{Outcome: "done"},
			workflow.VariantOtherwise, "", workflow.Destination{Node: "plan"}, "", ""},
		{"another outcome's cases are not consulted", "assess", workflow.Result{Outcome: "blocked", Data: map[string]any{"score": float64(10)}},
			workflow.VariantOutcome, "", workflow.Destination{Terminal: "BLOCKED"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := project.Route(tt.node, tt.result)
			if err != nil {
				t.Fatal(err)
			}
			tr := r.Transition
			if tr.Variant != tt.wantVariant || tr.CaseID != tt.wantCase || tr.Outcome != tt.result.Outcome {
				t.Errorf("edge = %s %q of outcome %q, want %s %q", tr.Variant, tr.CaseID, tr.Outcome, tt.wantVariant, tt.wantCase)
			}
			if got := tr.Destination(); got != tt.wantDest {
				t.Errorf("destination = %+v, want %+v", got, tt.wantDest)
			}
			switch {
			case tt.wantPending == "" && r.Pending != nil:
				t.Errorf("pending alternative = %+v, want none", r.Pending)
			case tt.wantPending != "" && (r.Pending == nil || r.Pending.Target != tt.wantPending || r.Pending.Variant != workflow.VariantPendingNotifications):
				t.Errorf("pending alternative = %+v, want target %s", r.Pending, tt.wantPending)
			}
			if tt.wantPrompt != "" && (tr.Prompt == nil || !strings.Contains(strings.ToLower(tr.Prompt.Text), strings.ToLower(tt.wantPrompt))) {
				t.Errorf("prompt = %+v, want one mentioning %q", tr.Prompt, tt.wantPrompt)
			}
		})
	}
	// The authored DONE edge keeps its promotion and exports.
	r, err := project.Route("assess", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": "complete"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Transition.Promote; p == nil || !p.Current || len(r.Transition.ExportRecords) != 1 || r.Transition.ExportRecords[0] != "assessment" {
		t.Errorf("complete edge = %+v", r.Transition)
	}
}

func TestRouteNoMatch(t *testing.T) {
	project := routingProject(t)
	tests := []struct {
		name, node, outcome string
		want                []string // fragments of the error
	}{
		{"an outcome without an edge", "assess", "failed", []string{"no route", `"failed"`, "node assess", "project"}},
		{"an unknown outcome", "plan", "exploded", []string{"no route", `"exploded"`, "node plan"}},
		{"an unknown node", "deploy", "done", []string{"no route", "no node deploy", "project"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := project.Route(tt.node, workflow.Result{Outcome: tt.outcome, Data: map[string]any{"score": float64(10)}})
			if !errors.Is(err, workflow.ErrNoRoute) {
				t.Fatalf("Route = %+v, %v; want ErrNoRoute", r, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestNativeTransitions covers the generated edges: each lifecycle entry,
// and the Git correction node's return to the saved entry and its block.
func TestNativeTransitions(t *testing.T) {
	task, _ := compileTemplate(t, "classic-git", nil).Table("task")
	for _, tt := range []struct {
		entry, prompt string
	}{
		{"BACKLOG", "first time"},
		{"CHANGED", "changed"},
		{"BLOCKED", "blocked"},
		{"STOPPED", "stopped"},
	} {
		tr, err := task.Entry(tt.entry)
		if err != nil {
			t.Fatalf("Entry(%s): %v", tt.entry, err)
		}
		if tr.Variant != workflow.VariantEntry || tr.Destination() != (workflow.Destination{Node: "execute"}) ||
			tr.Prompt == nil || !strings.Contains(strings.ToLower(tr.Prompt.Text), tt.prompt) {
			t.Errorf("Entry(%s) = %+v", tt.entry, tr)
		}
	}
	if tr, err := task.Entry("DONE"); err == nil || !strings.Contains(err.Error(), "no DONE entry") {
		t.Errorf("Entry(DONE) = %+v, %v; want an error naming the entry", tr, err)
	}
	for _, tt := range []struct {
		outcome string
		want    workflow.Destination
	}{
		{"done", workflow.Destination{Return: true}},
		{"blocked", workflow.Destination{Terminal: "BLOCKED"}},
	} {
		r, err := task.Route(workflow.CorrectionNode, workflow.Result{Outcome: tt.outcome})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Transition.Destination(); got != tt.want {
			t.Errorf("correction %s → %+v, want %+v", tt.outcome, got, tt.want)
		}
	}
	if _, err := task.Route(workflow.CorrectionNode, workflow.Result{Outcome: "failed"}); !errors.Is(err, workflow.ErrNoRoute) {
		t.Errorf("correction failed routed: %v", err)
	}
}

func TestConditionMatches(t *testing.T) {
	data := map[string]any{"n": float64(3), "i": 3, "s": "x", "b": true, "z": nil}
	tests := []struct {
		field, op string
		value     any
		want      bool
	}{
		{"n", "eq", 3, true}, // a YAML int against a JSON number
		{"i", "eq", float64(3), true},
		{"n", "eq", 4, false},
		{"n", "ne", 4, true},
		{"n", "ne", float64(3), false},
		{"n", "lt", 4, true},
		{"n", "lt", 3, false},
		{"n", "le", 3, true},
		{"n", "gt", 2.5, true},
		{"n", "gt", 3, false},
		{"n", "ge", 3, true},
		{"n", "ge", 3.5, false},
		{"n", "in", []any{1, 3}, true},
		{"n", "in", []any{1, 2}, false},
		{"s", "eq", "x", true},
		{"s", "eq", "y", false},
		{"s", "ne", "y", true},
		{"s", "in", []any{"w", "x"}, true},
		{"s", "in", []any{"w"}, false},
		{"s", "lt", "y", false}, // ordering holds between numbers only
		{"s", "eq", 1, false},
		{"n", "eq", "3", false},
		{"b", "eq", true, true},
		{"b", "ne", true, false},
		{"z", "eq", nil, true},
		{"missing", "eq", nil, false},
		{"missing", "ne", "x", false}, // an absent field matches nothing
		{"n", "like", 3, false},
		{"n", "in", 3, false}, // in needs a list
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %v", tt.field, tt.op, tt.value), func(t *testing.T) {
			c := &workflow.Condition{Field: tt.field, Op: tt.op, Value: tt.value}
			if got := c.Matches(data); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
	var none *workflow.Condition
	if none.Matches(data) {
		t.Error("a nil condition matched")
	}
}

func TestResolveInputs(t *testing.T) {
	facts := workflow.Facts{"check": {"exit_code": float64(3), "status": "red"}, "plan": nil}
	tests := []struct {
		name    string
		inputs  map[string]workflow.Input
		want    map[string]any
		wantErr string
	}{
		{"literals and facts", map[string]workflow.Input{
			"mode": {Literal: "strict"}, "limit": {Literal: 5}, "code": {Source: "check.exit_code"}, "status": {Source: "check.status"},
		}, map[string]any{"mode": "strict", "limit": 5, "code": float64(3), "status": "red"}, ""},
		{"no inputs", nil, map[string]any{}, ""},
		{"a node without an accepted result", map[string]workflow.Input{"x": {Source: "review.verdict"}},
			nil, "input x: node review has no accepted result in this activation"},
		{"a result without the field", map[string]workflow.Input{"x": {Source: "check.verdict"}},
			nil, "input x: check has no field verdict"},
		{"a result without data", map[string]workflow.Input{"x": {Source: "plan.verdict"}},
			nil, "input x: plan has no field verdict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workflow.Node{Name: "run", Inputs: tt.inputs}.ResolveInputs(facts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ResolveInputs = %v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("inputs = %v, want %v", got, tt.want)
			}
		})
	}
}

// Routing the classic task's review: the first matching case, otherwise,
// and a result no edge takes.
func ExampleTable_Route() {
	tpl, _ := templates.Lookup("classic")
	cfg, _ := tpl.Config()
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: tpl.Files()})
	if err != nil {
		fmt.Println(err)
		return
	}
	task, _ := set.Table("task")
	entry, _ := task.Entry("BACKLOG")
	fmt.Printf("BACKLOG enters %s\n", entry.Destination().Node)
	for _, verdict := range []string{"approved", "changes_requested"} {
		r, _ := task.Route("review", workflow.Result{Outcome: "done", Data: map[string]any{"verdict": verdict}})
		fmt.Printf("review done, %s: %s edge → %+v\n", verdict, r.Transition.Variant, r.Transition.Destination())
	}
	_, err = task.Route("review", workflow.Result{Outcome: "failed"})
	fmt.Println(err)
	// Output:
	// BACKLOG enters execute
	// review done, approved: case edge → {Node: Terminal:DONE Return:false}
	// review done, changes_requested: otherwise edge → {Node:execute Terminal: Return:false}
	// no route for outcome "failed" of node review (card type task)
}
