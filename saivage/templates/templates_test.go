package templates_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/workflow"
)

func TestMaterializeWritesConfigLast(t *testing.T) {
	tpl, err := templates.Lookup("classic")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	if err := tpl.Materialize(func(rel string, data []byte) error {
		if len(data) == 0 {
			t.Errorf("%s is empty", rel)
		}
		order = append(order, rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if order[len(order)-1] != templates.ConfigFile {
		t.Fatalf("config.yaml not last: %v", order)
	}
	cfg, err := tpl.Config()
	if err != nil {
		t.Fatal(err)
	}
	// Every prompt the config references is part of the written closure.
	written := strings.Join(order, "\n")
	for name, a := range cfg.Agents {
		if !strings.Contains(written, a.Prompt.Reference) {
			t.Errorf("agent %s prompt %s not written", name, a.Prompt.Reference)
		}
	}
	if _, err := templates.Lookup("paad"); err == nil || !strings.Contains(err.Error(), "classic") {
		t.Fatalf("unknown template error: %v", err)
	}
}

func TestClassicCardTypesAreFreshCopies(t *testing.T) {
	a := templates.ClassicCardTypes()
	delete(a, "task")
	if _, ok := templates.ClassicCardTypes()["task"]; !ok {
		t.Fatal("default card types shared between callers")
	}
}

// classic-git derives classic's graph: the Executor adds checkpoint_source,
// the Analyst drops the command and default MCP tools, every other role is
// unchanged, and the correction participant joins each task's table.
func TestClassicGitDerivesClassic(t *testing.T) {
	load := func(name string) (*workflow.Set, *config.Config) {
		tpl, err := templates.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := tpl.Config()
		if err != nil {
			t.Fatal(err)
		}
		set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: tpl.Files()})
		if err != nil {
			t.Fatal(err)
		}
		return set, cfg
	}
	classic, _ := load("classic")
	git, cfg := load("classic-git")
	if tpl, _ := templates.Lookup("classic-git"); !tpl.ProvisionRequired {
		t.Error("classic-git is not marked provision-required")
	}
	sortedTools := func(s *workflow.Set, name string) []string {
		a, _ := s.Agent(name)
		out := slices.Clone(a.Tools)
		slices.Sort(out)
		return out
	}
	for _, role := range []string{"planner", "reviewer", "oversight"} {
		if !slices.Equal(sortedTools(classic, role), sortedTools(git, role)) {
			t.Errorf("%s tools differ from classic", role)
		}
	}
	wantExec := append(sortedTools(classic, "executor"), "checkpoint_source")
	slices.Sort(wantExec)
	if got := sortedTools(git, "executor"); !slices.Equal(got, wantExec) {
		t.Errorf("executor tools = %v", got)
	}
	wantAnalyst := slices.DeleteFunc(sortedTools(classic, "analyst"), func(n string) bool {
		return slices.Contains([]string{"run_command", "wait_process", "kill_process", "mcp_tool_call", "mcp_server_control", "mcp_tools"}, n)
	})
	if got := sortedTools(git, "analyst"); !slices.Equal(got, wantAnalyst) {
		t.Errorf("analyst tools = %v, want %v", got, wantAnalyst)
	}
	pol := git.Git()
	if pol == nil || pol.DeliveryBranch != "main" || pol.RefNamespace != "refs/saivage" || !pol.Delivers("task") || pol.Delivers("goal") ||
		!strings.HasPrefix(pol.Digest, "sha256:") || cfg.GitWorkflow.Correction.Agent != "executor" {
		t.Fatalf("git policy = %+v", pol)
	}
	task, _ := git.Table("task")
	corr, ok := task.Node(workflow.CorrectionNode)
	if !ok || corr.Purpose != workflow.PurposeCorrection || corr.Agent != "executor" || !strings.Contains(corr.Prompt.Text, "conflict markers") ||
		!slices.Contains(corr.Tools, "checkpoint_source") {
		t.Fatalf("correction node = %+v", corr)
	}
	st, ok := task.State("node:" + workflow.CorrectionNode)
	if !ok || len(st.Transitions) != 2 || st.Transitions[1].Target != workflow.ReturnTarget {
		t.Fatalf("correction state = %+v", st)
	}
	if exec, _ := task.Node("execute"); exec.Purpose != workflow.PurposeProduct {
		t.Errorf("execute purpose = %q", exec.Purpose)
	}
	if goal, _ := git.Table("goal"); slices.ContainsFunc(goal.NodeNames(), func(n string) bool { return n == workflow.CorrectionNode }) {
		t.Error("goal cards do not deliver source but got a correction node")
	}
}
