package config

// Config is the decoded `.saivage/config.yaml`: every field of the spec's
// "Config schema" table. Decode fills it strictly; Load additionally resolves
// an omitted card_types to the complete built-in default map.
type Config struct {
	Server       *Server              `yaml:"server"`
	Providers    map[string]Provider  `yaml:"providers"`
	Models       *Models              `yaml:"models"`
	Agents       map[string]Agent     `yaml:"agents"`
	AnalystAgent string               `yaml:"analyst_agent"`
	Oversight    *Oversight           `yaml:"oversight"`
	Compaction   *Compaction          `yaml:"compaction"`
	MCPServers   map[string]MCPServer `yaml:"mcpServers"`
	GitWorkflow  *GitWorkflow         `yaml:"git_workflow"`
	CardTypes    map[string]CardType  `yaml:"card_types"`
}

// Server is the operator listener address written in YAML; flags and
// environment take precedence (see ResolveServer).
type Server struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
}

// Provider is one OpenAI-compatible model provider, optionally split into
// accounts that share its models but carry their own credentials.
type Provider struct {
	Accounts          map[string]Account      `yaml:"accounts"`
	APIKey            string                  `yaml:"apiKey"`
	AuthProfile       string                  `yaml:"authProfile"`
	BaseURL           string                  `yaml:"baseUrl"`
	Capabilities      *Capabilities           `yaml:"capabilities"`
	ModelCapabilities map[string]Capabilities `yaml:"modelCapabilities"`
	Models            []string                `yaml:"models"`
	Priority          int                     `yaml:"priority"`
}

// Account is one credentialled account of a provider.
type Account struct {
	APIKey       string        `yaml:"apiKey"`
	AuthProfile  string        `yaml:"authProfile"`
	BaseURL      string        `yaml:"baseUrl"`
	Capabilities *Capabilities `yaml:"capabilities"`
	Models       []string      `yaml:"models"`
	Priority     int           `yaml:"priority"`
}

// Capabilities declares what a provider, account or model supports.
type Capabilities struct {
	ContextWindowTokens        int                 `yaml:"contextWindowTokens"`
	ExclusiveToolChoiceSupport bool                `yaml:"exclusiveToolChoiceSupport"`
	ImageInput                 bool                `yaml:"imageInput"`
	MaxOutputTokens            int                 `yaml:"maxOutputTokens"`
	Quirks                     []string            `yaml:"quirks"`
	ResponsesReasoning         *ResponsesReasoning `yaml:"responsesReasoning"`
	ToolsMode                  string              `yaml:"toolsMode"`
	TransportProtocol          string              `yaml:"transportProtocol"`
}

// ResponsesReasoning selects the reasoning effort of a Responses-API model.
type ResponsesReasoning struct {
	Effort string `yaml:"effort"`
}

// Models names model routes (what agents select), selection profiles,
// equivalent model names and failover behaviour.
type Models struct {
	Equivalents map[string][]string `yaml:"equivalents"`
	// Failover says whether a route falls through to its next candidate when
	// the current one fails.
	Failover *bool              `yaml:"failover"`
	Profiles map[string]Profile `yaml:"profiles"`
	Routes   map[string]Route   `yaml:"routes"`
}

// Route is an ordered list of candidates ("provider/model" or
// "provider:account/model") with generation limits.
type Route struct {
	Candidates  []string `yaml:"candidates"`
	MaxTokens   int      `yaml:"max_tokens"`
	Profile     string   `yaml:"profile"`
	Temperature *float64 `yaml:"temperature"`
}

// Profile filters and orders route candidates by model name.
type Profile struct {
	Allowed   []string `yaml:"allowed"`
	Preferred []string `yaml:"preferred"`
}

// Agent is one configured agent (Planner, Executor, Reviewer, Analyst,
// Oversight or a custom one).
type Agent struct {
	CanCreateChildren bool       `yaml:"can_create_children"`
	ModelRoute        string     `yaml:"model_route"`
	Prompt            *PromptRef `yaml:"prompt"`
	QualityTools      []string   `yaml:"quality_tools"`
	// RecordWrites are globs of record names the agent may write directly.
	RecordWrites []string `yaml:"record_writes"`
	// Session is "card" (one session per card) or "global" (one session).
	Session string   `yaml:"session"`
	Skills  bool     `yaml:"skills"`
	Tools   []string `yaml:"tools"`
}

// PromptRef points at a prompt file relative to `.saivage/`.
type PromptRef struct {
	Compactable   bool   `yaml:"compactable"`
	CompactionKey string `yaml:"compaction_key"`
	Reference     string `yaml:"reference"`
}

// Oversight configures the periodic Oversight check.
type Oversight struct {
	Agent           string `yaml:"agent"`
	Enabled         bool   `yaml:"enabled"`
	IntervalSeconds int    `yaml:"interval_seconds"`
}

// Compaction configures provider-context compaction.
type Compaction struct {
	ContextUtilizationFraction float64              `yaml:"context_utilization_fraction"`
	Enabled                    bool                 `yaml:"enabled"`
	Snap                       bool                 `yaml:"snap"`
	SummarizerCandidate        *SummarizerCandidate `yaml:"summarizer_candidate"`
	TailFraction               float64              `yaml:"tail_fraction"`
	TriggerFraction            float64              `yaml:"trigger_fraction"`
}

// SummarizerCandidate names the exact model used to summarise.
type SummarizerCandidate struct {
	Account  string `yaml:"account"`
	Model    string `yaml:"model"`
	Provider string `yaml:"provider"`
}

// MCPServer is an outbound MCP server. Transport "stdio" (default) uses
// Command/Args/Env; transport "http" uses URL/Headers.
type MCPServer struct {
	Args      []string          `yaml:"args"`
	Autostart bool              `yaml:"autostart"`
	Command   string            `yaml:"command"`
	Disabled  bool              `yaml:"disabled"`
	Env       map[string]string `yaml:"env"`
	Transport string            `yaml:"transport"`
	URL       string            `yaml:"url"`
	Headers   map[string]string `yaml:"headers"`
}

// GitWorkflow is the native Git workflow switch. Only the OFF variant
// ({enabled: false, format_version}) is accepted by this build; the ON
// variant's fields are decoded so that errors name them exactly.
type GitWorkflow struct {
	Enabled             bool                     `yaml:"enabled"`
	FormatVersion       int                      `yaml:"format_version"`
	Correction          *GitCorrection           `yaml:"correction"`
	DeliveryBranch      string                   `yaml:"delivery_branch"`
	ExcludedPaths       []string                 `yaml:"excluded_paths"`
	Integration         string                   `yaml:"integration"`
	Preservation        *GitPreservation         `yaml:"preservation"`
	PrivateRefNamespace string                   `yaml:"private_ref_namespace"`
	ReviewBindings      map[string]ReviewBinding `yaml:"review_bindings"`
	SourceRoots         []string                 `yaml:"source_roots"`
}

// GitPreservation selects how interrupted rebases and checkpoints are kept.
type GitPreservation struct {
	InterruptedRebase string `yaml:"interrupted_rebase"`
	SourceCheckpoint  string `yaml:"source_checkpoint"`
}

// GitCorrection names the correction participant.
type GitCorrection struct {
	Agent            string     `yaml:"agent"`
	CorrectionPrompt *PromptRef `yaml:"correction_prompt"`
	Prompt           *PromptRef `yaml:"prompt"`
}

// ReviewBinding binds a review node's approving outcome.
type ReviewBinding struct {
	ApprovedOutcome string `yaml:"approved_outcome"`
	Node            string `yaml:"node"`
}

// CardType declares one card type: its records, workflow and the types its
// cards may create as children.
type CardType struct {
	PermittedChildTypes []string              `yaml:"permitted_child_types"`
	Records             map[string]RecordDecl `yaml:"records"`
	Workflow            Workflow              `yaml:"workflow"`
}

// RecordDecl declares one named record of a card type.
type RecordDecl struct {
	// Bootstrap records are authored at card creation by the creator.
	Bootstrap      bool                  `yaml:"bootstrap"`
	Format         string                `yaml:"format"`
	Initialization *RecordInitialization `yaml:"initialization"`
	// Schema is an optional JSON schema for "json" records.
	Schema any `yaml:"schema"`
}

// RecordInitialization selects the template file that seeds the baseline.
type RecordInitialization struct {
	FormatVersion int    `yaml:"format_version"`
	Template      string `yaml:"template"`
}

// Workflow is a card type's declared state machine.
type Workflow struct {
	AfterActivationCommit *AfterActivationCommit `yaml:"after_activation_commit"`
	Entries               Entries                `yaml:"entries"`
	FormatVersion         int                    `yaml:"format_version"`
	Nodes                 map[string]Node        `yaml:"nodes"`
	NotificationRecipient string                 `yaml:"notification_recipient"`
}

// AfterActivationCommit is the optional advisory hook run after a natural
// outcome publication.
type AfterActivationCommit struct {
	Execution Execution `yaml:"execution"`
	Statuses  []string  `yaml:"statuses"`
}

// Entries are the lifecycle entries into the workflow.
type Entries struct {
	BACKLOG *Entry `yaml:"BACKLOG"`
	CHANGED *Entry `yaml:"CHANGED"`
	BLOCKED *Entry `yaml:"BLOCKED"`
	STOPPED *Entry `yaml:"STOPPED"`
}

// Entry starts a node with a prompt.
type Entry struct {
	Node   string     `yaml:"node"`
	Prompt *PromptRef `yaml:"prompt"`
}

// Node is an agent or action node.
type Node struct {
	DescendantContext *DescendantContext    `yaml:"descendant_context"`
	Edges             map[string]Edge       `yaml:"edges"`
	Execution         Execution             `yaml:"execution"`
	InitializeRecords []string              `yaml:"initialize_records"`
	RecordPrompts     []RecordPrompt        `yaml:"record_prompts"`
	Records           map[string]NodeRecord `yaml:"records"`
	OutputRecord      string                `yaml:"output_record"`
}

// Execution is either an agent execution (kind "agent") or an action
// (kind "action").
type Execution struct {
	Kind string `yaml:"kind"`
	// Agent variant.
	Agent            string               `yaml:"agent"`
	CorrectionPrompt *PromptRef           `yaml:"correction_prompt"`
	DataInputs       map[string]DataInput `yaml:"data_inputs"`
	Prompt           *PromptRef           `yaml:"prompt"`
	// Action variant.
	Action          string         `yaml:"action"`
	Config          map[string]any `yaml:"config"`
	ContractVersion int            `yaml:"contract_version"`
	// Both.
	Inputs map[string]Input `yaml:"inputs"`
}

// DataInput declares one typed field of a node's emit_result data: enum
// (Enum), integer/number (Min/Max), string or boolean.
type DataInput struct {
	Type string   `yaml:"type"`
	Enum []string `yaml:"enum"`
	Min  *float64 `yaml:"min"`
	Max  *float64 `yaml:"max"`
}

// Input is a literal value or a source reference ("<node>.<field>").
type Input struct {
	Literal any    `yaml:"literal"`
	Source  string `yaml:"source"`
}

// RecordPrompt adds a prompt when a record is present/absent.
type RecordPrompt struct {
	Presence  string     `yaml:"presence"`
	Prompt    *PromptRef `yaml:"prompt"`
	Record    string     `yaml:"record"`
	Selection string     `yaml:"selection"`
}

// NodeRecord is a node's use of a record: mode read|clean|continue and gate
// none|exists|updated.
type NodeRecord struct {
	Gate string `yaml:"gate"`
	Mode string `yaml:"mode"`
}

// DescendantContext selects descendant records shown to the node.
type DescendantContext struct {
	Records                     []string `yaml:"records"`
	RequireUnchangedUntilAccept bool     `yaml:"require_unchanged_until_accept"`
}

// Edge routes one result outcome: directly (Target) or by Cases/Otherwise
// on typed result fields.
type Edge struct {
	EdgeBody  `yaml:",inline"`
	Cases     []Case    `yaml:"cases"`
	Otherwise *EdgeBody `yaml:"otherwise"`
}

// EdgeBody is a routed destination with its continuation prompt.
type EdgeBody struct {
	Inputs               map[string]EdgeInput  `yaml:"inputs"`
	PendingNotifications *PendingNotifications `yaml:"pending_notifications"`
	Prompt               *PromptRef            `yaml:"prompt"`
	Target               *Target               `yaml:"target"`
}

// EdgeInput passes one output field of the source node to the target.
type EdgeInput struct {
	Output string `yaml:"output"`
}

// PendingNotifications is the alternative destination taken when
// notifications are pending at a non-recipient DONE.
type PendingNotifications struct {
	Node   string     `yaml:"node"`
	Prompt *PromptRef `yaml:"prompt"`
}

// Case is one typed routing case; the first matching case wins.
type Case struct {
	ID       string `yaml:"id"`
	When     When   `yaml:"when"`
	EdgeBody `yaml:",inline"`
}

// When compares one result data field with a value.
type When struct {
	Field string `yaml:"field"`
	Op    string `yaml:"op"`
	Value any    `yaml:"value"`
}

// Target is a node or a terminal (DONE, FAILED, BLOCKED).
type Target struct {
	Node          string   `yaml:"node"`
	Terminal      string   `yaml:"terminal"`
	Promote       *Promote `yaml:"promote"`
	ExportRecords []string `yaml:"export_records"`
}

// Promote selects the result promoted at a terminal: "current" (the scalar
// form) or the latest accepted result of a named node.
type Promote struct {
	Current    bool
	LatestNode string
}
