package workflow

import "slices"

// knownTools are the tool identities an agent may be granted by
// configuration. emit_result is generated per node and never configured.
var knownTools = setOf(
	"activate_card", "apply_patch", "cancel_card", "checkpoint_source", "create_card", "delete_card",
	"diff_card_versions", "edit", "edit_card", "get_card", "get_card_version", "get_status", "get_tree",
	"glob", "grep", "kill_process", "list_agent_sessions", "list_card_versions", "list_cards",
	"list_observed_collections", "list_processes_tool", "mcp_catalog_refresh", "mcp_server_control",
	"mcp_server_register", "mcp_server_replace", "mcp_server_unregister", "mcp_servers", "mcp_tool_call",
	"mcp_tools", "navigate_back", "navigate_workspace", "pause_runtime", "query_observed_collections",
	"queue_notification", "read", "read_agent_session", "read_control_actions", "read_record_version",
	"read_runtime_errors", "read_runtime_events", "reconfigure", "reopen_card", "reorder_child",
	"restart_server", "resume_runtime", "run_command", "show_config", "skill", "start_project",
	"stop_project", "view_image", "wait_process", "webfetch", "websearch", "write",
)

// oversightAllowedTools is the only tool set an Oversight agent may hold: no
// command, MCP, skill, record-write, child or lifecycle authority.
var oversightAllowedTools = setOf(
	"diff_card_versions", "get_card", "get_card_version", "get_status", "get_tree", "glob", "grep",
	"list_agent_sessions", "list_card_versions", "list_cards", "list_processes_tool", "queue_notification",
	"read", "read_agent_session", "read_record_version", "read_runtime_errors", "read_runtime_events",
)

// KnownTools returns every configurable tool identity (tools and quality
// tools), sorted. checkpoint_source needs git_workflow.enabled.
func KnownTools() []string {
	var out []string
	for n := range knownTools {
		out = append(out, n)
	}
	for n := range knownQualityTools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// plannerOnlyTools may only be granted to agents that run in card sessions.
var cardOnlyTools = setOf("activate_card", "edit_card")

// knownQualityTools are the code-quality tools an agent may select.
var knownQualityTools = setOf(
	"code_quality_javascript_eslint", "code_quality_python_ruff", "code_quality_typescript_eslint",
)

// OversightAllowed reports whether an Oversight agent may hold tool name.
func OversightAllowed(name string) bool { return oversightAllowedTools[name] }

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
