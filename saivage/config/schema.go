package config

import "path/filepath"

// Config is the decoded `.saivage/config.yaml`: every field of the spec's
// "Config schema" table, plus the websearch section. Decode fills it strictly; Load additionally resolves
// an omitted card_types to the complete built-in default map.
type Config struct {
	Server       *Server              `yaml:"server,omitempty"`
	Providers    map[string]Provider  `yaml:"providers,omitempty"`
	Models       *Models              `yaml:"models,omitempty"`
	Agents       map[string]Agent     `yaml:"agents,omitempty"`
	AnalystAgent string               `yaml:"analyst_agent,omitempty"`
	Oversight    *Oversight           `yaml:"oversight,omitempty"`
	Compaction   *Compaction          `yaml:"compaction,omitempty"`
	MCPServers   map[string]MCPServer `yaml:"mcpServers,omitempty"`
	GitWorkflow  *GitWorkflow         `yaml:"git_workflow,omitempty"`
	CardTypes    map[string]CardType  `yaml:"card_types,omitempty"`
	// WebSearch is an extension of the spec's table (see WebSearch).
	WebSearch *WebSearch `yaml:"websearch,omitempty"`
}

// Server is the operator listener address written in YAML; flags and
// environment take precedence (see ResolveServer).
type Server struct {
	Host string `yaml:"host,omitempty"`
	Port int    `yaml:"port,omitempty"`
}

// Provider is one model provider, optionally split into accounts that share
// its models but carry their own credentials. A candidate naming the
// provider without an account is served by the provider's own endpoint
// (when it has a baseUrl) and every account offering the model, highest
// priority first, failing over from one to the next.
type Provider struct {
	Accounts map[string]Account `yaml:"accounts,omitempty"`
	APIKey   string             `yaml:"apiKey,omitempty"`
	// AuthProfile names a credentials file .saivage/auth-profiles/NAME.json
	// (a token, or refreshable OAuth credentials); exclusive with APIKey.
	AuthProfile       string                  `yaml:"authProfile,omitempty"`
	BaseURL           string                  `yaml:"baseUrl,omitempty"`
	Capabilities      *Capabilities           `yaml:"capabilities,omitempty"`
	ModelCapabilities map[string]Capabilities `yaml:"modelCapabilities,omitempty"`
	Models            []string                `yaml:"models,omitempty"`
	Priority          int                     `yaml:"priority,omitempty"`
}

// Account is one credentialled account of a provider.
type Account struct {
	APIKey       string        `yaml:"apiKey,omitempty"`
	AuthProfile  string        `yaml:"authProfile,omitempty"`
	BaseURL      string        `yaml:"baseUrl,omitempty"`
	Capabilities *Capabilities `yaml:"capabilities,omitempty"`
	Models       []string      `yaml:"models,omitempty"`
	Priority     int           `yaml:"priority,omitempty"`
}

// Capabilities declares what a provider, account or model supports.
type Capabilities struct {
	ContextWindowTokens        int  `yaml:"contextWindowTokens,omitempty"`
	ExclusiveToolChoiceSupport bool `yaml:"exclusiveToolChoiceSupport,omitempty"`
	// ImageInput false refuses requests carrying images; unset admits them.
	ImageInput         *bool               `yaml:"imageInput,omitempty"`
	MaxOutputTokens    int                 `yaml:"maxOutputTokens,omitempty"`
	Quirks             []string            `yaml:"quirks,omitempty"`
	ResponsesReasoning *ResponsesReasoning `yaml:"responsesReasoning,omitempty"`
	ToolsMode          string              `yaml:"toolsMode,omitempty"`
	// TransportProtocol is chat_completions (default), responses or codex.
	TransportProtocol string `yaml:"transportProtocol,omitempty"`
}

// ResponsesReasoning selects the reasoning effort of a Responses-API model.
type ResponsesReasoning struct {
	Effort string `yaml:"effort,omitempty"`
}

// Models names model routes (what agents select), selection profiles,
// equivalent model names and failover behaviour.
type Models struct {
	Equivalents map[string][]string `yaml:"equivalents,omitempty"`
	// Failover says whether a route falls through to its next candidate when
	// the current one fails.
	Failover *bool              `yaml:"failover,omitempty"`
	Profiles map[string]Profile `yaml:"profiles,omitempty"`
	Routes   map[string]Route   `yaml:"routes,omitempty"`
	// RequestInactivityMS is how long one provider attempt may go without
	// streamed data (headers do not count) before it fails and the call
	// moves on to the next candidate (0: the default, 120000).
	RequestInactivityMS int `yaml:"request_inactivity_ms,omitempty"`
	// RequestLimitMS bounds one model call, every attempt and the whole
	// stream included, however steadily data arrives (0: the default,
	// 900000).
	RequestLimitMS int `yaml:"request_limit_ms,omitempty"`
}

// Limits of the models section's time settings, in milliseconds.
const (
	MinRequestTimeMS = 1000
	MaxRequestTimeMS = 24 * 60 * 60 * 1000
)

// Route is an ordered list of candidates ("provider/model" or
// "provider:account/model") with generation limits.
type Route struct {
	Candidates  []string `yaml:"candidates,omitempty"`
	MaxTokens   int      `yaml:"max_tokens,omitempty"`
	Profile     string   `yaml:"profile,omitempty"`
	Temperature *float64 `yaml:"temperature,omitempty"`
}

// Profile filters and orders route candidates by model name.
type Profile struct {
	Allowed   []string `yaml:"allowed,omitempty"`
	Preferred []string `yaml:"preferred,omitempty"`
}

// Agent is one configured agent (Planner, Executor, Reviewer, Analyst,
// Oversight or a custom one).
type Agent struct {
	CanCreateChildren bool       `yaml:"can_create_children,omitempty"`
	ModelRoute        string     `yaml:"model_route,omitempty"`
	Prompt            *PromptRef `yaml:"prompt,omitempty"`
	QualityTools      []string   `yaml:"quality_tools,omitempty"`
	// RecordWrites are globs of record names the agent may write directly.
	RecordWrites []string `yaml:"record_writes,omitempty"`
	// Session is "card" (one session per card) or "global" (one session).
	Session string   `yaml:"session,omitempty"`
	Skills  bool     `yaml:"skills,omitempty"`
	Tools   []string `yaml:"tools,omitempty"`
}

// PromptRef points at a prompt file relative to `.saivage/`.
type PromptRef struct {
	Compactable   bool   `yaml:"compactable,omitempty"`
	CompactionKey string `yaml:"compaction_key,omitempty"`
	Reference     string `yaml:"reference,omitempty"`
}

// Oversight configures the periodic Oversight check.
type Oversight struct {
	Agent           string `yaml:"agent,omitempty"`
	Enabled         bool   `yaml:"enabled,omitempty"`
	IntervalSeconds int    `yaml:"interval_seconds,omitempty"`
}

// Compaction configures provider-context compaction.
type Compaction struct {
	ContextUtilizationFraction float64              `yaml:"context_utilization_fraction,omitempty"`
	Enabled                    bool                 `yaml:"enabled,omitempty"`
	Snap                       bool                 `yaml:"snap,omitempty"`
	SummarizerCandidate        *SummarizerCandidate `yaml:"summarizer_candidate,omitempty"`
	TailFraction               float64              `yaml:"tail_fraction,omitempty"`
	TriggerFraction            float64              `yaml:"trigger_fraction,omitempty"`
}

// SummarizerCandidate names the exact model used to summarise.
type SummarizerCandidate struct {
	Account  string `yaml:"account,omitempty"`
	Model    string `yaml:"model,omitempty"`
	Provider string `yaml:"provider,omitempty"`
}

// MCPServer is an outbound MCP server. Transport "stdio" (default) uses
// Command/Args/Env; transport "http" uses URL/Headers.
type MCPServer struct {
	Args      []string          `yaml:"args,omitempty"`
	Autostart bool              `yaml:"autostart,omitempty"`
	Command   string            `yaml:"command,omitempty"`
	Disabled  bool              `yaml:"disabled,omitempty"`
	Env       map[string]string `yaml:"env,omitempty"`
	Transport string            `yaml:"transport,omitempty"`
	URL       string            `yaml:"url,omitempty"`
	Headers   map[string]string `yaml:"headers,omitempty"`
}

// GitWorkflow is the native Git workflow. The OFF variant is exactly
// {enabled: false, format_version: 1}; the ON variant (enabled: true) makes
// agents' source changes land as reviewed commits: each card works on its
// own private ref, the Executor checkpoints, an approved review delivers a
// squash commit to the parent and finally to delivery_branch. See git.go
// for the accepted values.
type GitWorkflow struct {
	Enabled             bool                     `yaml:"enabled,omitempty"`
	FormatVersion       int                      `yaml:"format_version,omitempty"`
	Correction          *GitCorrection           `yaml:"correction,omitempty"`
	DeliveryBranch      string                   `yaml:"delivery_branch,omitempty"`
	ExcludedPaths       []string                 `yaml:"excluded_paths,omitempty"`
	Integration         string                   `yaml:"integration,omitempty"`
	Preservation        *GitPreservation         `yaml:"preservation,omitempty"`
	PrivateRefNamespace string                   `yaml:"private_ref_namespace,omitempty"`
	ReviewBindings      map[string]ReviewBinding `yaml:"review_bindings,omitempty"`
	SourceRoots         []string                 `yaml:"source_roots,omitempty"`
}

// GitPreservation selects how interrupted rebases and checkpoints are kept.
type GitPreservation struct {
	InterruptedRebase string `yaml:"interrupted_rebase,omitempty"`
	SourceCheckpoint  string `yaml:"source_checkpoint,omitempty"`
}

// GitCorrection names the correction participant.
type GitCorrection struct {
	Agent            string     `yaml:"agent,omitempty"`
	CorrectionPrompt *PromptRef `yaml:"correction_prompt,omitempty"`
	Prompt           *PromptRef `yaml:"prompt,omitempty"`
}

// ReviewBinding binds a review node's approving outcome.
type ReviewBinding struct {
	ApprovedOutcome string `yaml:"approved_outcome,omitempty"`
	Node            string `yaml:"node,omitempty"`
}

// CardType declares one card type: its records, workflow and the types its
// cards may create as children.
type CardType struct {
	PermittedChildTypes []string              `yaml:"permitted_child_types,omitempty"`
	Records             map[string]RecordDecl `yaml:"records,omitempty"`
	Workflow            Workflow              `yaml:"workflow,omitempty"`
}

// RecordDecl declares one named record of a card type.
type RecordDecl struct {
	// Bootstrap records are authored at card creation by the creator.
	Bootstrap      bool                  `yaml:"bootstrap,omitempty"`
	Format         string                `yaml:"format,omitempty"`
	Initialization *RecordInitialization `yaml:"initialization,omitempty"`
	// Schema is an optional JSON schema for "json" records.
	Schema any `yaml:"schema,omitempty"`
}

// RecordInitialization selects the template file that seeds the baseline.
type RecordInitialization struct {
	FormatVersion int    `yaml:"format_version,omitempty"`
	Template      string `yaml:"template,omitempty"`
}

// Workflow is a card type's declared state machine.
type Workflow struct {
	AfterActivationCommit *AfterActivationCommit `yaml:"after_activation_commit,omitempty"`
	Entries               Entries                `yaml:"entries,omitempty"`
	FormatVersion         int                    `yaml:"format_version,omitempty"`
	Nodes                 map[string]Node        `yaml:"nodes,omitempty"`
	NotificationRecipient string                 `yaml:"notification_recipient,omitempty"`
}

// AfterActivationCommit is the optional advisory hook run after a natural
// outcome publication.
type AfterActivationCommit struct {
	Execution Execution `yaml:"execution,omitempty"`
	Statuses  []string  `yaml:"statuses,omitempty"`
}

// Entries are the lifecycle entries into the workflow.
type Entries struct {
	BACKLOG *Entry `yaml:"BACKLOG,omitempty"`
	CHANGED *Entry `yaml:"CHANGED,omitempty"`
	BLOCKED *Entry `yaml:"BLOCKED,omitempty"`
	STOPPED *Entry `yaml:"STOPPED,omitempty"`
}

// Entry starts a node with a prompt.
type Entry struct {
	Node   string     `yaml:"node,omitempty"`
	Prompt *PromptRef `yaml:"prompt,omitempty"`
}

// Node is an agent or action node.
type Node struct {
	DescendantContext *DescendantContext    `yaml:"descendant_context,omitempty"`
	Edges             map[string]Edge       `yaml:"edges,omitempty"`
	Execution         Execution             `yaml:"execution,omitempty"`
	InitializeRecords []string              `yaml:"initialize_records,omitempty"`
	RecordPrompts     []RecordPrompt        `yaml:"record_prompts,omitempty"`
	Records           map[string]NodeRecord `yaml:"records,omitempty"`
	OutputRecord      string                `yaml:"output_record,omitempty"`
}

// Execution is either an agent execution (kind "agent") or an action
// (kind "action").
type Execution struct {
	Kind string `yaml:"kind,omitempty"`
	// Agent variant.
	Agent            string               `yaml:"agent,omitempty"`
	CorrectionPrompt *PromptRef           `yaml:"correction_prompt,omitempty"`
	DataInputs       map[string]DataInput `yaml:"data_inputs,omitempty"`
	Prompt           *PromptRef           `yaml:"prompt,omitempty"`
	// Action variant.
	Action          string         `yaml:"action,omitempty"`
	Config          map[string]any `yaml:"config,omitempty"`
	ContractVersion int            `yaml:"contract_version,omitempty"`
	// Both.
	Inputs map[string]Input `yaml:"inputs,omitempty"`
}

// DataInput declares one typed field of a node's emit_result data: enum
// (Enum), integer/number (Min/Max), string or boolean.
type DataInput struct {
	Type string   `yaml:"type,omitempty"`
	Enum []string `yaml:"enum,omitempty"`
	Min  *float64 `yaml:"min,omitempty"`
	Max  *float64 `yaml:"max,omitempty"`
}

// Input is a literal value or a source reference ("<node>.<field>").
type Input struct {
	Literal any    `yaml:"literal,omitempty"`
	Source  string `yaml:"source,omitempty"`
}

// RecordPrompt adds a prompt when a record is present/absent.
type RecordPrompt struct {
	Presence  string     `yaml:"presence,omitempty"`
	Prompt    *PromptRef `yaml:"prompt,omitempty"`
	Record    string     `yaml:"record,omitempty"`
	Selection string     `yaml:"selection,omitempty"`
}

// NodeRecord is a node's use of a record: mode read|clean|continue and gate
// none|exists|updated.
type NodeRecord struct {
	Gate string `yaml:"gate,omitempty"`
	Mode string `yaml:"mode,omitempty"`
}

// DescendantContext selects descendant records shown to the node.
type DescendantContext struct {
	Records                     []string `yaml:"records,omitempty"`
	RequireUnchangedUntilAccept bool     `yaml:"require_unchanged_until_accept,omitempty"`
}

// Edge routes one result outcome: directly (Target) or by Cases/Otherwise
// on typed result fields.
type Edge struct {
	EdgeBody  `yaml:",inline"`
	Cases     []Case    `yaml:"cases,omitempty"`
	Otherwise *EdgeBody `yaml:"otherwise,omitempty"`
}

// EdgeBody is a routed destination with its continuation prompt.
type EdgeBody struct {
	Inputs               map[string]EdgeInput  `yaml:"inputs,omitempty"`
	PendingNotifications *PendingNotifications `yaml:"pending_notifications,omitempty"`
	Prompt               *PromptRef            `yaml:"prompt,omitempty"`
	Target               *Target               `yaml:"target,omitempty"`
}

// EdgeInput passes one output field of the source node to the target.
type EdgeInput struct {
	Output string `yaml:"output,omitempty"`
}

// PendingNotifications is the alternative destination taken when
// notifications are pending at a non-recipient DONE.
type PendingNotifications struct {
	Node   string     `yaml:"node,omitempty"`
	Prompt *PromptRef `yaml:"prompt,omitempty"`
}

// Case is one typed routing case; the first matching case wins.
type Case struct {
	ID       string `yaml:"id,omitempty"`
	When     When   `yaml:"when,omitempty"`
	EdgeBody `yaml:",inline"`
}

// When compares one result data field with a value.
type When struct {
	Field string `yaml:"field,omitempty"`
	Op    string `yaml:"op,omitempty"`
	Value any    `yaml:"value,omitempty"`
}

// Target is a node or a terminal (DONE, FAILED, BLOCKED).
type Target struct {
	Node          string   `yaml:"node,omitempty"`
	Terminal      string   `yaml:"terminal,omitempty"`
	Promote       *Promote `yaml:"promote,omitempty"`
	ExportRecords []string `yaml:"export_records,omitempty"`
}

// Promote selects the result promoted at a terminal: "current" (the scalar
// form) or the latest accepted result of a named node.
type Promote struct {
	Current    bool
	LatestNode string
}

// AuthProfileDir holds auth profile files, relative to the project root.
const AuthProfileDir = StateDir + "/auth-profiles"

// AuthProfilePath is the file of auth profile name in the project at root.
func AuthProfilePath(root, name string) string {
	return filepath.Join(root, AuthProfileDir, name+".json")
}
