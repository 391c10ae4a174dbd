package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/eval"
	"github.com/agentstack/agentstack/steward/host"
)

func init() {
	register(&command{
		Name:    "eval",
		Summary: "offline model replay: catalog past tool decisions, replay them against a model, compare",
		Run:     runEval,
	})
}

const evalUsage = `Usage: steward eval COMMAND [options]

Offline model replay, a developer tool apart from normal chat: it measures how closely a model
(a local one, say) would have chosen the tools your Steward chats actually called.

Commands:
  catalog   collect the decision points of the stored chat sessions (STEWARD_HOME/chats.db) and
            the current tool schemas of the connectors and mcp.json servers into DIR/catalog.json
  run       replay catalogued histories against an OpenAI-compatible endpoint, compare the tool
            calls it proposes with the historical ones and write DIR/report.json

Proposed tool calls are recorded, never executed. The artifacts hold your private transcripts:
they are written owner-only, marked PRIVATE, and refused inside STEWARD_HOME or a git work tree.
Agreement measures similarity to what happened, not correctness or safety.

Run 'steward eval COMMAND --help' for a command's options.`

func runEval(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stderr, evalUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "catalog":
		return evalCatalog(ctx, env, args[1:])
	case "run":
		return evalRun(ctx, env, args[1:])
	}
	fmt.Fprintln(env.Stderr, evalUsage)
	return fmt.Errorf("%w: unknown eval command %q", errUsage, args[0])
}

func evalCatalog(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval catalog", "--output DIR [--chats FILE] [--wait DURATION] [--json]", `
Reads every chat's stored agent session and writes one case per assistant message that called
tools: the conversation before it (with the host's system prompt) and the calls it made. The tool
schemas are discovered now, by starting Steward's connectors and the servers of mcp.json as the
host does (this can initialise their local state); a case whose tool no server offers any more
lists it under missingTools.`)
	out := fs.String("output", "", "directory for catalog.json (outside STEWARD_HOME and any git work tree)")
	chatsPath := fs.String("chats", "", "chats database (default STEWARD_HOME/chats.db)")
	wait := fs.Duration("wait", time.Minute, "how long to wait for the MCP servers to list their tools")
	asJSON := fs.Bool("json", false, "print a JSON summary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, sc, art, err := evalSetup(env, *out)
	if err != nil {
		return err
	}
	if *chatsPath == "" {
		*chatsPath = filepath.Join(sc.home, "chats.db")
	}
	if _, err := os.Stat(*chatsPath); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("no chats database at %s: nothing to catalog (have a chat first, or pass --chats)", *chatsPath)
	}
	store, err := chats.Open(ctx, *chatsPath)
	if err != nil {
		return err
	}
	defer store.Close()
	sessions, err := eval.Sessions(ctx, store)
	if err != nil {
		return err
	}

	servers, err := connectorServers(cfg, cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"), sc.gatewayKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "eval: starting %d MCP servers to read their tool schemas…\n", len(servers))
	bridge := mcpbridge.New(mcpbridge.Options{Servers: servers, Logger: env.Log.With("component", "mcp"), StartTimeout: *wait})
	bridge.Start(ctx)
	defer bridge.Close()
	wctx, cancel := context.WithTimeout(ctx, *wait)
	err = bridge.WaitStarted(wctx)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for the MCP servers: %w", err)
	}
	for _, st := range bridge.Status() {
		if st.State != mcpbridge.StateReady {
			fmt.Fprintf(env.Stderr, "eval: server %s is %s (%s); its tools are not in the catalog\n", st.Name, st.State, st.LastError)
		}
	}
	var tools []llm.Tool
	for _, s := range append(specs(bridge.Tools()), host.AskUserSpec()) {
		tools = append(tools, llm.Tool{Type: "function", Function: llm.FunctionDef{Name: s.Name, Description: s.Description, Parameters: s.Parameters}})
	}
	cat := eval.Collect(sessions, eval.CollectOptions{Source: *chatsPath, Tools: tools, SystemPrompt: host.DefaultSystemPrompt})
	path, err := art.Write(eval.CatalogFile, cat)
	if err != nil {
		return err
	}
	missing := 0
	for _, c := range cat.Cases {
		if len(c.MissingTools) > 0 {
			missing++
		}
	}
	summary := struct {
		Catalog          string `json:"catalog"`
		Chats            int    `json:"chats"`
		Cases            int    `json:"cases"`
		Tools            int    `json:"tools"`
		CasesMissingTool int    `json:"casesWithMissingTools"`
	}{path, len(sessions), len(cat.Cases), len(tools), missing}
	if *asJSON {
		return writeJSON(env.Stdout, summary)
	}
	fmt.Fprintf(env.Stdout, "%d cases from %d chats, %d tools offered (%d cases call a tool no server offers now)\nwrote %s (PRIVATE: your transcripts)\n",
		summary.Cases, summary.Chats, summary.Tools, missing, path)
	return nil
}

// evalSetup reads the configuration and checks the output directory.
func evalSetup(env *cliEnv, out string) (*config.Config, *serveConfig, eval.Artifacts, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, nil, eval.Artifacts{}, err
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		return nil, nil, eval.Artifacts{}, err
	}
	art := eval.Artifacts{Dir: out, DataHome: sc.home}
	return cfg, sc, art, art.Check()
}

func specs(tools []agent.Tool) []agent.ToolSpec {
	out := make([]agent.ToolSpec, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Spec())
	}
	return out
}

func evalRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval run", "--output DIR [--base-url URL] [--model NAME] [--limit N] [--case ID]... [--json]", `
Sends each selected case's history, with the catalog's tools, to an OpenAI-compatible endpoint
once and compares the tool calls it proposes with the historical ones: the first tool, the tool
sequence, and the sequence with equal arguments. Nothing it proposes runs. Writes DIR/report.json.

The default endpoint is Steward's gateway (GATEWAY_BASE_URL, model HOST_TIER), which records the
spend. Another URL receives your private histories directly and bypasses the gateway's accounting;
its key is read from the environment variable named by --api-key-env, never from a flag.`)
	out := fs.String("output", "", "directory holding catalog.json (from 'steward eval catalog'); report.json is written there")
	baseURL := fs.String("base-url", "", "OpenAI-compatible endpoint (default GATEWAY_BASE_URL)")
	model := fs.String("model", "", "model name (default HOST_TIER)")
	keyEnv := fs.String("api-key-env", "", "environment variable holding the endpoint's API key (default: the gateway key for the gateway)")
	limit := fs.Int("limit", 12, "replay at most N cases (0: all)")
	var cases stringList
	fs.Var(&cases, "case", "replay this case ID (repeatable; default: the catalog's cases in order)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit must be 0 or more", errUsage)
	}
	cfg, _, art, err := evalSetup(env, *out)
	if err != nil {
		return err
	}
	cat, err := eval.ReadCatalog(filepath.Join(*out, eval.CatalogFile))
	if err != nil {
		return err
	}
	key := ""
	if *baseURL == "" {
		*baseURL = cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1")
		key = cfg.String("GATEWAY_API_KEY", "sk-local")
	}
	if *keyEnv != "" {
		if key = os.Getenv(*keyEnv); key == "" {
			return fmt.Errorf("--api-key-env %s: that environment variable is empty", *keyEnv)
		}
	}
	if *model == "" {
		*model = cfg.String("HOST_TIER", "tier-5")
	}
	if err := cfg.Err(); err != nil {
		return err
	}
	u, err := url.Parse(*baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --base-url %q is not an http(s) URL", errUsage, *baseURL)
	}
	if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		fmt.Fprintf(env.Stderr, "eval: %s is not on this machine: it receives your private chat histories\n", u.Host)
	}
	client := llm.NewClient(llm.ClientOptions{BaseURL: *baseURL, APIKey: key})
	rep, err := eval.Run(ctx, cat, eval.RunOptions{Model: client, ModelName: *model, Cases: cases, Limit: *limit,
		Progress: func(done, total int, r eval.CaseResult) {
			verdict := "differs"
			switch {
			case r.Error != "":
				verdict = "error: " + r.Error
			case r.Exact:
				verdict = "same calls"
			case r.Sequence:
				verdict = "same tools, other arguments"
			case r.FirstTool:
				verdict = "same first tool"
			}
			fmt.Fprintf(env.Stderr, "eval: %d/%d %s: %s\n", done, total, r.ID, verdict)
		}})
	if err != nil {
		return err
	}
	rep.Endpoint = u.Scheme + "://" + u.Host + u.Path // never a query (a key could sit there)
	path, err := art.Write(eval.ReportFile, rep)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	fmt.Fprintf(env.Stdout, "%d cases against %s at %s: first tool %d, tool sequence %d, exact calls %d, errors %d\nwrote %s (PRIVATE)\n",
		rep.Cases, rep.Model, rep.Endpoint, rep.FirstTool, rep.Sequence, rep.Exact, rep.Errors, path)
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
