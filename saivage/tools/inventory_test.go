package tools_test

import (
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// specRows are the spec's "Agent tools" default rows (sorted membership).
var specRows = map[string]string{
	"planner":   "activate_card,cancel_card,create_card,diff_card_versions,edit,edit_card,get_card,get_card_version,get_tree,glob,grep,list_card_versions,list_cards,list_observed_collections,query_observed_collections,read,read_record_version,reopen_card,reorder_child,webfetch,websearch,write",
	"executor":  "apply_patch,diff_card_versions,edit,get_card_version,glob,grep,kill_process,list_card_versions,list_observed_collections,mcp_server_control,mcp_tool_call,mcp_tools,query_observed_collections,read,read_record_version,run_command,skill,view_image,wait_process,webfetch,websearch,write",
	"reviewer":  "diff_card_versions,edit,get_card_version,glob,grep,list_card_versions,list_observed_collections,query_observed_collections,read,read_record_version,skill,view_image,webfetch,websearch,write",
	"analyst":   "apply_patch,cancel_card,create_card,delete_card,diff_card_versions,edit,get_card,get_card_version,get_status,get_tree,glob,grep,kill_process,list_agent_sessions,list_card_versions,list_cards,list_observed_collections,list_processes_tool,mcp_server_control,mcp_tool_call,mcp_tools,navigate_back,navigate_workspace,pause_runtime,query_observed_collections,queue_notification,read,read_agent_session,read_control_actions,read_record_version,read_runtime_errors,read_runtime_events,reconfigure,reopen_card,reorder_child,restart_server,resume_runtime,run_command,show_config,skill,start_project,stop_project,view_image,wait_process,webfetch,websearch,write",
	"oversight": "diff_card_versions,get_card,get_card_version,get_status,get_tree,glob,grep,list_agent_sessions,list_card_versions,list_cards,list_processes_tool,queue_notification,read,read_agent_session,read_record_version,read_runtime_errors,read_runtime_events",
}

// shippedNames is the spec's tools.projector-presenter-equality name list.
const shippedNames = "activate_card,apply_patch,cancel_card,checkpoint_source,code_quality_javascript_eslint,code_quality_python_ruff,code_quality_typescript_eslint,create_card,delete_card,diff_card_versions,edit,edit_card,emit_result,get_card,get_card_version,get_status,get_tree,glob,grep,kill_process,list_agent_sessions,list_card_versions,list_cards,list_observed_collections,list_processes_tool,mcp_catalog_refresh,mcp_server_control,mcp_server_register,mcp_server_replace,mcp_server_unregister,mcp_servers,mcp_tool_call,mcp_tools,navigate_back,navigate_workspace,pause_runtime,query_observed_collections,queue_notification,read,read_agent_session,read_control_actions,read_record_version,read_runtime_errors,read_runtime_events,reconfigure,reopen_card,reorder_child,restart_server,resume_runtime,run_command,show_config,skill,start_project,stop_project,view_image,wait_process,webfetch,websearch,write"

// boundNames binds names for a caller and returns the tool names the model
// is offered, sorted.
func boundNames(t *testing.T, env *tools.Env, names []string) string {
	t.Helper()
	bound, err := tools.Build(names, env)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bound {
		out = append(out, b.Spec().Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestEveryShippedToolIsProvided(t *testing.T) {
	provided := tools.Names()
	for _, n := range strings.Split(shippedNames, ",") {
		switch n {
		case "emit_result": // generated per node by the runtime
			continue
		}
		if !slices.Contains(provided, n) {
			t.Errorf("shipped tool %s has no implementation", n)
		}
	}
	// Everything configuration admits binds, so nothing is ever dropped.
	for _, n := range workflow.KnownTools() {
		if !slices.Contains(provided, n) {
			t.Errorf("configurable tool %s has no implementation", n)
		}
	}
	if _, err := tools.Build([]string{"read", "no_such_tool"}, &tools.Env{}); err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Fatalf("unknown name: err = %v", err)
	}
}

func TestRoleToolsMatchSpecRowsForEveryTemplate(t *testing.T) {
	for _, tpl := range templates.All() {
		t.Run(tpl.Name, func(t *testing.T) {
			dir := t.TempDir()
			rows := specRows
			if tpl.ProvisionRequired { // classic-git: the spec's derived native selection
				gitInit(t, dir)
				rows = gitRows()
			}
			p, _, err := project.Init(context.Background(), project.InitOptions{Options: project.Options{Root: dir}, Template: tpl.Name})
			if err != nil {
				t.Fatal(err)
			}
			// Bound as the runtime composes them: each agent by name, global
			// agents with the Supervisor's source gate (checked at binding
			// under the Git workflow).
			env := func(agent string) *tools.Env {
				return &tools.Env{Root: dir, StateDir: filepath.Join(dir, ".saivage"), Cards: p.Cards, Workflows: p.Workflows, Config: p.Config,
					Caller: tools.Caller{Agent: agent}, SourceGate: func(context.Context, []string) error { return nil }}
			}
			for role, want := range rows {
				ag, ok := p.Workflows.Agent(role)
				if !ok {
					t.Fatalf("no agent %s", role)
				}
				if got := boundNames(t, env(role), ag.BoundTools()); got != want {
					t.Errorf("%s bound %s\nspec row  %s", role, got, want)
				}
			}
			// Every card node binds exactly its agent's row.
			for _, ct := range p.Workflows.CardTypes() {
				tbl, _ := p.Workflows.Table(ct)
				for _, nn := range tbl.NodeNames() {
					nd, _ := tbl.Node(nn)
					if nd.Kind != workflow.NodeAgent {
						continue
					}
					if got := boundNames(t, env(nd.Agent), nd.Tools); got != rows[nd.Agent] {
						t.Errorf("%s.%s (%s) bound %s\nspec row %s", ct, nn, nd.Agent, got, rows[nd.Agent])
					}
				}
			}
		})
	}
}

// gitRows derives classic-git's rows from the spec's: the Analyst excludes
// run_command/wait_process/kill_process and the three default MCP tools,
// the Executor adds checkpoint_source, other roles are unchanged.
func gitRows() map[string]string {
	rows := maps.Clone(specRows)
	drop := []string{"run_command", "wait_process", "kill_process", "mcp_tool_call", "mcp_server_control", "mcp_tools"}
	rows["analyst"] = strings.Join(slices.DeleteFunc(strings.Split(rows["analyst"], ","), func(n string) bool { return slices.Contains(drop, n) }), ",")
	exec := append(strings.Split(rows["executor"], ","), "checkpoint_source")
	slices.Sort(exec)
	rows["executor"] = strings.Join(exec, ",")
	return rows
}

// gitInit makes dir a clean Git checkout of main (Debian's git).
func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "initial"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
