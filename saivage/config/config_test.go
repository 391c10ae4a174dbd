package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
)

func classicYAML(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "templates", "classic", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDecodeClassicTemplate(t *testing.T) {
	cfg, err := config.Decode([]byte(classicYAML(t)), config.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfg.CardTypes); got != 3 {
		t.Fatalf("card types = %d, want 3", got)
	}
	if cfg.Server.Port != 4400 || cfg.AnalystAgent != "analyst" || cfg.Oversight.Enabled {
		t.Fatalf("unexpected decode: %+v %q %+v", cfg.Server, cfg.AnalystAgent, cfg.Oversight)
	}
	e := cfg.CardTypes["project"].Workflow.Nodes["assess"].Edges["done"]
	if len(e.Cases) != 1 || !e.Cases[0].Target.Promote.Current || e.Otherwise.Target.Node != "plan" {
		t.Fatalf("cases/otherwise not decoded: %+v", e)
	}
	if got := cfg.CardTypes["task"].Workflow.Nodes["review"].Edges["done"].Cases[0].Target.Promote.LatestNode; got != "execute" {
		t.Fatalf("promote latest_node = %q", got)
	}
}

func TestDecodeStrictErrors(t *testing.T) {
	tests := []struct {
		name, yaml, wantPath, wantMsg string
	}{
		{"unknown top-level key", "servers: {}\n", "servers", "unknown key"},
		{"unknown nested key", "server: {host: a, prt: 1}\n", "server.prt", "unknown key"},
		{"old model shape", "agents:\n  planner:\n    model: gpt-4\n", "agents.planner.model", "old model shape"},
		{"removed selector", "card_types:\n  task:\n    role: executor\n", "card_types.task.role", "removed selector"},
		{"duplicate key", "server: {host: a}\nserver: {host: b}\n", "server", "duplicate key"},
		{"duplicate map key", "agents:\n  a: {session: card}\n  a: {session: card}\n", "agents.a", "duplicate key"},
		{"string for int", "server: {port: \"80\"}\n", "server.port", "expected an integer"},
		{"int for string", "analyst_agent: 5\n", "analyst_agent", "expected a string"},
		{"list for map", "providers: [a]\n", "providers", "expected a mapping"},
		{"null value", "server:\n  host:\n", "server.host", "null"},
		{"alias", "x: &a {host: h}\nserver: *a\n", "x", "unknown key"},
		{"alias in known key", "models: {routes: {a: &c {candidates: [p/m]}, b: *c}}\n", "models.routes.b", "aliases"},
		{"merge key", "server:\n  <<: {host: a}\n", "server", "merge"},
		{"bad promote", "card_types:\n  t:\n    workflow:\n      nodes:\n        n:\n          edges:\n            done:\n              target: {terminal: DONE, promote: latest}\n", "card_types.t.workflow.nodes.n.edges.done.target.promote", `"current"`},
		{"unknown case key", "card_types:\n  t:\n    workflow:\n      nodes:\n        n:\n          edges:\n            done:\n              cases: [{id: a, whenever: {}}]\n", "card_types.t.workflow.nodes.n.edges.done.cases[0].whenever", "unknown key"},
		{"two documents", "server: {}\n---\nserver: {}\n", "", "more than one YAML document"},
		{"empty", "", "", "empty configuration"},
		{"not yaml", "server: [\n", "", "invalid YAML"},
		{"unset variable", "analyst_agent: ${NOPE}\n", "analyst_agent", "NOPE is not set"},
		{"bad variable name", "analyst_agent: ${1X}\n", "analyst_agent", "invalid environment variable name"},
		{"unterminated", "analyst_agent: ${X\n", "analyst_agent", "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode([]byte(tt.yaml), config.DecodeOptions{File: "config.yaml", LookupEnv: env(nil)})
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Msg, tt.wantMsg) {
				t.Fatalf("got path %q msg %q, want path %q msg containing %q", ce.Path, ce.Msg, tt.wantPath, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "config.yaml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestDecodeOversized(t *testing.T) {
	big := strings.Repeat("#", config.MaxConfigBytes+1)
	if _, err := config.Decode([]byte(big), config.DecodeOptions{}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v", err)
	}
}

func TestInterpolation(t *testing.T) {
	y := `server:
  host: ${HOST}
  port: ${PORT}
providers:
  p:
    baseUrl: "https://${HOST}/v1"
    apiKey: ${KEY}
    models: ["$${NOT_A_VAR}"]
agents:
  a:
    session: card
    model_route: r
    prompt:
      reference: |
        ${KEPT_LITERALLY}
card_types:
  t:
    workflow:
      nodes:
        n:
          execution:
            kind: action
            inputs:
              x: {literal: "${ALSO_KEPT}"}
`
	cfg, err := config.Decode([]byte(y), config.DecodeOptions{LookupEnv: env(map[string]string{"HOST": "h.example", "PORT": "9001", "KEY": "s3cret"})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Host != "h.example" || cfg.Server.Port != 9001 {
		t.Fatalf("server = %+v", cfg.Server)
	}
	p := cfg.Providers["p"]
	if p.BaseURL != "https://h.example/v1" || p.APIKey != "s3cret" || p.Models[0] != "${NOT_A_VAR}" {
		t.Fatalf("provider = %+v", p)
	}
	if got := cfg.Agents["a"].Prompt.Reference; got != "${KEPT_LITERALLY}\n" {
		t.Fatalf("block scalar interpolated: %q", got)
	}
	if got := cfg.CardTypes["t"].Workflow.Nodes["n"].Execution.Inputs["x"].Literal; got != "${ALSO_KEPT}" {
		t.Fatalf("literal interpolated: %v", got)
	}
	// A quoted interpolation stays a string, so it cannot fill an int.
	_, err = config.Decode([]byte("server: {port: \"${PORT}\"}\n"), config.DecodeOptions{LookupEnv: env(map[string]string{"PORT": "1"})})
	if err == nil || !strings.Contains(err.Error(), "server.port") {
		t.Fatalf("quoted interpolation into int: err = %v", err)
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func withoutCardTypes(y string) string {
	i := strings.Index(y, "\ncard_types:")
	return y[:i+1]
}

func TestLoadOmittedCardTypesUsesCompleteClassicMap(t *testing.T) {
	p := writeConfig(t, withoutCardTypes(classicYAML(t)))
	cfg, err := config.Load(config.LoadOptions{Path: p, LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.CardTypes, templates.ClassicCardTypes()) {
		t.Fatalf("omitted card_types did not resolve to the classic map")
	}
}

func TestLoadPresentCardTypesIsNotMerged(t *testing.T) {
	y := withoutCardTypes(classicYAML(t)) + `card_types:
  project:
    records: {plan: {format: markdown}}
    workflow:
      format_version: 1
      nodes: {}
`
	cfg, err := config.Load(config.LoadOptions{Path: writeConfig(t, y), LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CardTypes) != 1 {
		t.Fatalf("card types merged: %d", len(cfg.CardTypes))
	}
	if _, ok := cfg.CardTypes["project"].Records["objective"]; ok {
		t.Fatal("records merged from classic")
	}
}

func TestValidateShapeErrors(t *testing.T) {
	base := classicYAML(t)
	tests := []struct {
		name, from, to, wantPath string
	}{
		{"port range", "port: 4400", "port: 70000", "server.port"},
		{"unknown route", "model_route: fast", "model_route: slow", "agents.oversight.model_route"},
		{"bad session", "session: card\n    model_route: default\n    prompt: {reference: prompts/agents/planner.md}", "session: both\n    model_route: default\n    prompt: {reference: prompts/agents/planner.md}", "agents.planner.session"},
		{"candidate unknown provider", "[gateway/tier-3]", "[nowhere/fast]", "models.routes.fast.candidates[0]"},
		{"candidate unknown model", "[gateway/tier-3]", "[gateway/huge]", "models.routes.fast.candidates[0]"},
		{"candidate shape", "[gateway/tier-3]", "[gateway]", "models.routes.fast.candidates[0]"},
		{"analyst must be global", "analyst_agent: analyst", "analyst_agent: planner", "analyst_agent"},
		{"oversight interval", "interval_seconds: 1800", "interval_seconds: 0", "oversight.interval_seconds"},
		{"compaction fraction", "tail_fraction: 0.3", "tail_fraction: 1.5", "compaction.tail_fraction"},
		{"git on without a delivery branch", "enabled: false\n  format_version: 1", "enabled: true\n  format_version: 1", "git_workflow.delivery_branch"},
		{"git off with on fields", "enabled: false\n  format_version: 1", "enabled: false\n  format_version: 1\n  delivery_branch: main", "git_workflow"},
		{"git format", "enabled: false\n  format_version: 1", "enabled: false\n  format_version: 2", "git_workflow.format_version"},
		{"record format", "objective:\n        bootstrap: true\n        format: markdown", "objective:\n        bootstrap: true\n        format: docx", "card_types.project.records.objective.format"},
		{"tools mode", "toolsMode: native", "toolsMode: sometimes", "providers.gateway.capabilities.toolsMode"},
		{"no root type", "card_types:\n  project:", "card_types:\n  root:", "card_types"},
		{"inactivity too short", "failover: true", "failover: true\n  request_inactivity_ms: 999", "models.request_inactivity_ms"},
		{"inactivity negative", "failover: true", "failover: true\n  request_inactivity_ms: -5", "models.request_inactivity_ms"},
		{"call limit too long", "failover: true", "failover: true\n  request_limit_ms: 86400001", "models.request_limit_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.from) {
				t.Fatalf("fixture text %q not in template", tt.from)
			}
			y := strings.Replace(base, tt.from, tt.to, 1)
			_, err := config.Load(config.LoadOptions{Path: writeConfig(t, y), LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath {
				t.Fatalf("err = %v, want path %q", err, tt.wantPath)
			}
		})
	}
}

func TestMCPServerVariants(t *testing.T) {
	tests := []struct {
		name, yaml, wantPath string
	}{
		{"stdio ok", "{command: npx, args: [x]}", ""},
		{"http ok", "{transport: http, url: 'http://127.0.0.1:9/mcp'}", ""},
		{"stdio missing command", "{args: [x]}", "mcpServers.m.command"},
		{"http with command", "{transport: http, url: 'http://x', command: y}", "mcpServers.m.command"},
		{"unknown transport", "{transport: ws, url: 'http://x'}", "mcpServers.m.transport"},
	}
	base := classicYAML(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := base + "mcpServers:\n  m: " + tt.yaml + "\n"
			_, err := config.Load(config.LoadOptions{Path: writeConfig(t, y), LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
			if tt.wantPath == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath {
				t.Fatalf("err = %v, want path %q", err, tt.wantPath)
			}
		})
	}
}

func TestResolveInputsPrecedence(t *testing.T) {
	wd, _ := os.Getwd()
	tests := []struct {
		name       string
		flags      config.Flags
		env        map[string]string
		root       string
		rootSrc    config.Source
		configPath string
		configSrc  config.Source
	}{
		{"defaults", config.Flags{}, nil, wd, config.FromCwd, filepath.Join(wd, ".saivage", "config.yaml"), config.FromDefault},
		{"env root", config.Flags{}, map[string]string{"SAIVAGE_ROOT": "/srv/p"}, "/srv/p", config.FromEnv, "/srv/p/.saivage/config.yaml", config.FromDefault},
		{"flag beats env", config.Flags{Root: "/a"}, map[string]string{"SAIVAGE_ROOT": "/srv/p"}, "/a", config.FromFlag, "/a/.saivage/config.yaml", config.FromDefault},
		{"env config", config.Flags{Root: "/a"}, map[string]string{"SAIVAGE_CONFIG": "/etc/s.yaml"}, "/a", config.FromFlag, "/etc/s.yaml", config.FromEnv},
		{"flag config", config.Flags{Root: "/a", Config: "/c.yaml"}, map[string]string{"SAIVAGE_CONFIG": "/etc/s.yaml"}, "/a", config.FromFlag, "/c.yaml", config.FromFlag},
		{"empty env ignored", config.Flags{}, map[string]string{"SAIVAGE_ROOT": ""}, wd, config.FromCwd, filepath.Join(wd, ".saivage", "config.yaml"), config.FromDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := config.ResolveInputs(tt.flags, env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if in.Root != tt.root || in.RootSource != tt.rootSrc || in.ConfigPath != tt.configPath || in.ConfigSource != tt.configSrc {
				t.Fatalf("got %+v", in)
			}
		})
	}
}

func TestResolveServerPrecedence(t *testing.T) {
	yamlCfg := &config.Config{Server: &config.Server{Host: "0.0.0.0", Port: 5000}}
	tests := []struct {
		name    string
		flags   config.Flags
		env     map[string]string
		cfg     *config.Config
		host    string
		hostSrc config.Source
		port    int
		portSrc config.Source
		wantErr string
	}{
		{"defaults", config.Flags{}, nil, nil, "127.0.0.1", config.FromDefault, 4400, config.FromDefault, ""},
		{"yaml", config.Flags{}, nil, yamlCfg, "0.0.0.0", config.FromYAML, 5000, config.FromYAML, ""},
		{"env beats yaml", config.Flags{}, map[string]string{"SAIVAGE_HOST": "h", "SAIVAGE_PORT": "6000"}, yamlCfg, "h", config.FromEnv, 6000, config.FromEnv, ""},
		{"flag beats env", config.Flags{Host: "f", Port: 7000}, map[string]string{"SAIVAGE_HOST": "h", "SAIVAGE_PORT": "6000"}, yamlCfg, "f", config.FromFlag, 7000, config.FromFlag, ""},
		{"bad env port", config.Flags{}, map[string]string{"SAIVAGE_PORT": "http"}, nil, "", "", 0, "", "SAIVAGE_PORT"},
		{"bad flag port", config.Flags{Port: 99999}, nil, nil, "", "", 0, "", "--port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := config.ResolveServer(tt.flags, env(tt.env), tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Host != tt.host || l.HostSource != tt.hostSrc || l.Port != tt.port || l.PortSource != tt.portSrc {
				t.Fatalf("got %+v", l)
			}
		})
	}
}

func TestParseCandidate(t *testing.T) {
	c, err := config.ParseCandidate("openai:work/gpt-5/mini")
	if err != nil || c != (config.Candidate{Provider: "openai", Account: "work", Model: "gpt-5/mini"}) {
		t.Fatalf("got %+v %v", c, err)
	}
	for _, bad := range []string{"", "p", "/m", "p:/m", "p/"} {
		if _, err := config.ParseCandidate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Decode(data, config.DecodeOptions{LookupEnv: env(map[string]string{"A": "1"})})
		if err == nil && cfg == nil {
			t.Fatal("nil config without error")
		}
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not *config.Error: %v", err)
			}
		}
	})
}

// The ON variant: every field is either honoured or refused by name with
// what this build supports.
func TestGitWorkflowOn(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "templates", "classic-git", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	load := func(y string) (*config.Config, error) {
		return config.Load(config.LoadOptions{Path: writeConfig(t, y), LookupEnv: env(nil), DefaultCardTypes: templates.ClassicCardTypes})
	}
	cfg, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.GitWorkflow
	if !cfg.GitOn() || g.DeliveryBranch != "main" || g.RefNamespace() != "refs/saivage" || g.IntegrationMode() != "squash" ||
		g.RebasePreservation() != "snapshot" || g.CheckpointPreservation() != "private_ref" || g.ReviewBindings["task"].ApprovedOutcome != "approved" {
		t.Fatalf("git_workflow = %+v", g)
	}
	tests := []struct{ name, from, to, path, msg string }{
		{"no delivery branch", "  delivery_branch: main\n", "", "git_workflow.delivery_branch", "required"},
		{"bad branch", "delivery_branch: main", "delivery_branch: 'ma in'", "git_workflow.delivery_branch", "not a valid Git branch name"},
		{"branch with dotdot", "delivery_branch: main", "delivery_branch: a..b", "git_workflow.delivery_branch", "not a valid"},
		{"merge integration", "integration: squash", "integration: merge", "git_workflow.integration", "not supported"},
		{"rebase preservation", "interrupted_rebase: snapshot", "interrupted_rebase: keep", "git_workflow.preservation.interrupted_rebase", "not supported"},
		{"checkpoint preservation", "source_checkpoint: private_ref", "source_checkpoint: stash", "git_workflow.preservation.source_checkpoint", "not supported"},
		{"heads namespace", "private_ref_namespace: refs/saivage", "private_ref_namespace: refs/heads/saivage", "git_workflow.private_ref_namespace", "namespace Git or users own"},
		{"namespace outside refs", "private_ref_namespace: refs/saivage", "private_ref_namespace: saivage", "git_workflow.private_ref_namespace", "under refs/"},
		{"namespace trailing slash", "private_ref_namespace: refs/saivage", "private_ref_namespace: refs/saivage/", "git_workflow.private_ref_namespace", "not a valid"},
		{"excluded pattern", "excluded_paths: []", "excluded_paths: ['*.log']", "git_workflow.excluded_paths[0]", "literal path"},
		{"excluded escape", "excluded_paths: []", "excluded_paths: [../x]", "git_workflow.excluded_paths[0]", "inside the checkout"},
		{"excluded git dir", "excluded_paths: []", "excluded_paths: [ok, .git/hooks]", "git_workflow.excluded_paths[1]", "Git's own directory"},
		{"source root", `source_roots: ["."]`, "source_roots: [src]", "git_workflow.source_roots[0]", "not supported"},
		{"no bindings", "  review_bindings:\n    task: {node: review, approved_outcome: approved}\n", "  review_bindings: {}\n", "git_workflow.review_bindings", "required"},
		{"binding type", "task: {node: review, approved_outcome: approved}", "story: {node: review, approved_outcome: approved}", "git_workflow.review_bindings.story", "unknown card type"},
		{"binding node", "task: {node: review, approved_outcome: approved}", "task: {node: inspect, approved_outcome: approved}", "git_workflow.review_bindings.task.node", "no node"},
		{"binding outcome", "task: {node: review, approved_outcome: approved}", "task: {node: review}", "git_workflow.review_bindings.task.approved_outcome", "required"},
		{"correction agent", "    agent: executor\n    prompt: {reference: prompts/nodes/git-correction.md}", "    agent: reviewer\n    prompt: {reference: prompts/nodes/git-correction.md}", "git_workflow.correction.agent", "checkpoint_source"},
		{"correction prompt", "    prompt: {reference: prompts/nodes/git-correction.md}\n", "", "git_workflow.correction.prompt", "required"},
		{"off with on fields", "enabled: true\n  format_version: 1\n  delivery_branch", "enabled: false\n  format_version: 1\n  delivery_branch", "git_workflow", "only format_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.from) {
				t.Fatalf("fixture text %q not in template", tt.from)
			}
			_, err := load(strings.Replace(base, tt.from, tt.to, 1))
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Path != tt.path || !strings.Contains(ce.Msg, tt.msg) {
				t.Fatalf("err = %v, want %s: …%s…", err, tt.path, tt.msg)
			}
		})
	}
}
