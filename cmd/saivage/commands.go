package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/records"
	saivageruntime "github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/templates"
)

// projectFlags are the selection flags shared by project commands.
type projectFlags struct {
	root, config string
	json         bool
}

func (p *projectFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.root, "root", "", "project directory (default $SAIVAGE_ROOT, else the current directory)")
	fs.StringVar(&p.config, "config", "", "configuration file (default $SAIVAGE_CONFIG, else <root>/.saivage/config.yaml)")
	fs.BoolVar(&p.json, "json", false, "print JSON")
}

func (p *projectFlags) options(e *env) (project.Options, config.Inputs, error) {
	in, err := config.ResolveInputs(config.Flags{Root: p.root, Config: p.config}, e.lookupEnv)
	if err != nil {
		return project.Options{}, in, err
	}
	return project.Options{Root: in.Root, ConfigPath: in.ConfigPath, LookupEnv: e.lookupEnv}, in, nil
}

// open admits the project read-only: offline commands never write.
func (p *projectFlags) open(ctx context.Context, e *env) (*project.Project, error) {
	opts, _, err := p.options(e)
	if err != nil {
		return nil, err
	}
	opts.ReadOnly = true
	return project.Open(ctx, opts)
}

// templateList is the init help's list of registered templates.
func templateList() string {
	var b strings.Builder
	for _, t := range templates.All() {
		fmt.Fprintf(&b, "  %-14s %s\n", t.Name, t.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

func initCommand() *command {
	var pf projectFlags
	var tpl, title, objective string
	return &command{
		name: "init", summary: "create a project's .saivage directory from a template",
		usage: "[--template NAME] [--title TEXT] [--objective TEXT] [--root DIR] [--json]",
		help: `Creates .saivage/ in the project directory. When config.yaml is absent the
template's prompts and config.yaml are written (an existing config and its
prompts are kept). The configuration is then compiled, and the generated
state (cards/, agents/, logs/, work/) is published with a root card of type
"project". Running init again on an initialised project only validates it.
A provision-required template (classic-git) needs a Git checkout whose
delivery branch is checked out and clean: init refuses a dirty checkout
naming the paths, then commissions the root's private ref.

Templates:
` + templateList(),
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.StringVar(&tpl, "template", templates.Default, "template written when config.yaml is absent")
			fs.StringVar(&title, "title", "", "title of the root card (default \"Project\")")
			fs.StringVar(&objective, "objective", "", "accept this text as the root card's objective record")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"init takes no arguments"}
			}
			opts, _, err := pf.options(e)
			if err != nil {
				return err
			}
			p, res, err := project.Init(ctx, project.InitOptions{Options: opts, Template: tpl, Title: title, Objective: objective})
			if err != nil {
				return err
			}
			root, err := p.Cards.Get(ctx, cards.RootID)
			if err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, map[string]any{
					"root": p.Root, "config": p.ConfigPath, "wrote_config": res.WroteConfig,
					"bootstrapped": res.Bootstrapped, "cards": p.Graph.Active, "git": root.ReadModel().Git,
				})
			}
			if res.WroteConfig {
				fmt.Fprintf(e.stdout, "wrote %s and its prompts (template %s)\n", p.ConfigPath, tpl)
			} else {
				fmt.Fprintf(e.stdout, "kept existing %s\n", p.ConfigPath)
			}
			if res.Bootstrapped {
				fmt.Fprintf(e.stdout, "initialised project in %s with root card %q\n", p.StateDir, cards.RootID)
			} else {
				fmt.Fprintf(e.stdout, "project already initialised; %d cards admitted\n", p.Graph.Active)
			}
			if g := root.Git; g != nil && res.Bootstrapped {
				fmt.Fprintf(e.stdout, "commissioned delivery branch %s at %s; cards work on private refs under %s; .saivage/ is ignored through .git/info/exclude\n",
					g.DeliveryBranch, g.Tip, p.Workflows.Git().RefNamespace)
			}
			if objective == "" && res.Bootstrapped {
				fmt.Fprintln(e.stdout, "next: write the objective (a Markdown file) into the root card's objective record with the server running: saivage record write project objective FILE")
			}
			return nil
		},
	}
}

func validateCommand() *command {
	var pf projectFlags
	return &command{
		name: "validate", summary: "check the configuration and the project state strictly",
		usage: "[--root DIR] [--config FILE] [--json]",
		help: `Decodes config.yaml strictly, compiles every card type's workflow and admits
the generated state (card graph, records, sessions, app log) without writing
anything. The first problem is reported with its key path or exact file.
The websearch backend is checked as start checks it (the websearch section,
or the SAIVAGE_WEBSEARCH_* variables; both at once is refused).
Then each provider's model names are checked against its endpoint's model
list (GET baseUrl/models): a name the endpoint does not serve is a warning;
an endpoint that is not reachable is noted, not an error.`,
		flags: pf.register,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"validate takes no arguments"}
			}
			p, err := pf.open(ctx, e)
			if err == nil {
				err = p.CheckSourcePolicy(ctx)
			}
			if err == nil {
				_, _, err = saivageruntime.WebSearchBackend(p.Config, e.lookupEnv, nil)
			}
			if err != nil {
				if pf.json {
					_ = writeJSON(e.stdout, map[string]any{"ok": false, "error": err.Error()})
				}
				return err
			}
			checkCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			warnings := saivageruntime.CheckModelNames(checkCtx, p.Config, &http.Client{Timeout: 3 * time.Second})
			cancel()
			if pf.json {
				return writeJSON(e.stdout, map[string]any{
					"ok": true, "config": p.ConfigPath, "card_types": p.Workflows.CardTypes(),
					"cards": p.Graph.Active, "tombstones": p.Graph.Tombstones,
					"record_versions": p.Graph.RecordVersions, "app_events": p.AppEvents,
					"warnings": warnings,
				})
			}
			for _, w := range warnings {
				fmt.Fprintf(e.stderr, "warning: %s: %s\n", p.ConfigPath, w)
			}
			fmt.Fprintf(e.stdout, "ok: %s\n  card types: %s\n  cards: %d active, %d deleted; %d accepted record versions\n",
				p.ConfigPath, strings.Join(p.Workflows.CardTypes(), ", "), p.Graph.Active, p.Graph.Tombstones, p.Graph.RecordVersions)
			return nil
		},
	}
}

func statusCommand() *command {
	var pf projectFlags
	return &command{
		name: "status", summary: "show the runtime (live server), lock and card counts",
		usage: "[--root DIR] [--json]",
		help: `Shows whether a Saivage server holds the project lock (missing, live, dead,
indeterminate or malformed — none of which is taken over automatically); when
a live server publishes its endpoint, its runtime status (asked through the
API with the operator token); the listener and the cards in each status.`,
		flags: pf.register,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			p, err := pf.open(ctx, e)
			if err != nil {
				return err
			}
			obs := lock.Inspect(p.StateDir)
			listen, err := config.ResolveServer(config.Flags{}, e.lookupEnv, p.Config)
			if err != nil {
				return err
			}
			counts := map[string]int{}
			for st, n := range p.Graph.Summary() {
				counts[string(st)] = n
			}
			runtime := "stopped"
			var live *runtimeView
			switch obs.Status {
			case lock.Live:
				runtime = "server running"
				if srv, _, err := pf.live(e); err == nil {
					var v runtimeView
					if err := srv.call(ctx, "GET", "/api/runtime/status", nil, &v); err == nil {
						runtime, live = v.line(), &v
					} else {
						runtime = "server running (status unavailable: " + err.Error() + ")"
					}
				}
			case lock.Dead:
				runtime = "stopped (stale lock: manual repair needed)"
			case lock.Indeterminate, lock.Malformed:
				runtime = "unknown (lock " + string(obs.Status) + ")"
			}
			if pf.json {
				return writeJSON(e.stdout, map[string]any{
					"root": p.Root, "runtime": runtime, "runtime_status": live, "lock": obs,
					"listen": map[string]any{"host": listen.Host, "port": listen.Port},
					"cards":  counts,
				})
			}
			fmt.Fprintf(e.stdout, "project: %s\nruntime: %s\nlock: %s (%s)\nlisten: %s:%d (%s/%s)\ncards:",
				p.Root, runtime, obs.Status, obs.Reason, listen.Host, listen.Port, listen.HostSource, listen.PortSource)
			for _, st := range cards.Statuses {
				if n := counts[string(st)]; n > 0 {
					fmt.Fprintf(e.stdout, " %s=%d", st, n)
				}
			}
			fmt.Fprintln(e.stdout)
			return nil
		},
	}
}

type treeJSON struct {
	ID       string      `json:"id"`
	Type     string      `json:"type"`
	Title    string      `json:"title"`
	Status   string      `json:"status"`
	Deleted  bool        `json:"deleted,omitempty"`
	Children []*treeJSON `json:"children,omitempty"`
}

func toTree(n *cards.Node) *treeJSON {
	t := &treeJSON{ID: n.Card.ID, Type: n.Card.Type, Title: n.Card.Title, Status: string(n.Card.Status), Deleted: n.Card.Tombstoned()}
	for _, k := range n.Children {
		t.Children = append(t.Children, toTree(k))
	}
	return t
}

func treeCommand() *command {
	var pf projectFlags
	return &command{
		name: "tree", summary: "print the card tree",
		usage: "[--root DIR] [--json]",
		help:  "Prints every card in child order with its type and status. Deleted cards keep their place and are marked.",
		flags: pf.register,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			p, err := pf.open(ctx, e)
			if err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, toTree(p.Graph.Root))
			}
			p.Graph.Walk(func(n *cards.Node, depth int) {
				mark := ""
				if n.Card.Tombstoned() {
					mark = " (deleted)"
				}
				fmt.Fprintf(e.stdout, "%s%s [%s] %s — %s%s\n", strings.Repeat("  ", depth), n.Card.ID, n.Card.Type, n.Card.Status, n.Card.Title, mark)
			})
			return nil
		},
	}
}

func cardCommand() *command {
	var pf projectFlags
	var history bool
	return &command{
		name: "card", summary: "show a card; reopen or cancel it through the live server",
		usage: "show ID [--history] [--json] | reopen ID | cancel ID",
		help: `show    prints a card's current document, its records and, with --history,
        every version (offline).
reopen  reopens a done, failed or blocked card as changed, with its finished
        ancestors (the Analyst's reopen_card, through the live server; the
        runtime must be stopped or paused). Then saivage run.
cancel  cancels a card and its unfinished descendants (cancel_card).
reopen and cancel are audited as operator actions (GET /api/control-actions).`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&history, "history", false, "list every version of the card")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) == 2 && (args[0] == "reopen" || args[0] == "cancel") {
				return cardAction(ctx, e, &pf, args[0], args[1])
			}
			if len(args) != 2 || args[0] != "show" {
				return usageError{"expected: card show|reopen|cancel ID"}
			}
			p, err := pf.open(ctx, e)
			if err != nil {
				return err
			}
			id := args[1]
			h, c, err := p.Cards.GetHead(ctx, id)
			if err != nil {
				return err
			}
			tbl, _ := p.Workflows.Table(c.Type)
			type recJSON struct {
				Name      string `json:"name"`
				Selection string `json:"selection"`
				Latest    int    `json:"latest"`
			}
			var recs []recJSON
			if !c.Tombstoned() {
				for _, r := range tbl.Records() {
					rh, err := p.Cards.Records().ReadHead(records.Ref{CardDir: p.Cards.CardDir(id), Card: id, Name: r.Name})
					if err != nil {
						return err
					}
					recs = append(recs, recJSON{Name: r.Name, Selection: rh.Selection, Latest: rh.Latest})
				}
			}
			var hist []cards.Card
			if history {
				if hist, err = p.Cards.History(ctx, id); err != nil {
					return err
				}
			}
			if pf.json {
				out := map[string]any{"card": c, "head": h, "records": recs}
				if history {
					out["history"] = hist
				}
				return writeJSON(e.stdout, out)
			}
			fmt.Fprintf(e.stdout, "%s  %s\ntype: %s  status: %s  version: %d  revision: %d\n", c.ID, c.Title, c.Type, c.Status, c.Version, h.Revision)
			if c.Tombstoned() {
				fmt.Fprintln(e.stdout, "deleted (tombstone)")
			}
			if c.Description != "" {
				fmt.Fprintf(e.stdout, "\n%s\n", c.Description)
			}
			if len(c.Dependencies) > 0 {
				fmt.Fprintf(e.stdout, "depends on: %s\n", strings.Join(c.Dependencies, ", "))
			}
			if len(c.Children) > 0 {
				fmt.Fprintf(e.stdout, "children: %s\n", strings.Join(c.Children, ", "))
			}
			for _, r := range recs {
				fmt.Fprintf(e.stdout, "record %-12s %s (latest version %d)\n", r.Name, r.Selection, r.Latest)
			}
			for _, v := range hist {
				fmt.Fprintf(e.stdout, "v%d r%d %s %s %s\n", v.Version, v.Revision, v.UpdatedAt.Format("2006-01-02T15:04:05Z"), v.Kind, v.Status)
			}
			return nil
		},
	}
}

func recordCommand() *command {
	var pf projectFlags
	var version int
	return &command{
		name: "record", summary: "read records; write one through the live server",
		usage: "show CARD NAME [--version N] | history CARD NAME | diff CARD NAME [FROM [TO]] | write CARD NAME FILE",
		help: `show     prints the current content (open draft, else latest accepted version,
         else the baseline); --version N prints accepted version N (0 = baseline).
history  lists the accepted versions.
diff     compares two versions (default: the one before latest with latest).
write    accepts FILE's text as the record's next version through the live
         server (the Analyst's direct acceptance; a blocked, done or failed
         card reopens as changed). The runtime must be stopped or paused.
         Audited as an operator action. Example, after init without
         --objective: saivage record write project objective objective.md`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.IntVar(&version, "version", -1, "exact version to show (0 = baseline)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) < 3 {
				return usageError{"expected: record show|history|diff CARD NAME"}
			}
			sub, id, name := args[0], args[1], args[2]
			if sub == "write" {
				return recordWrite(ctx, e, &pf, args)
			}
			p, err := pf.open(ctx, e)
			if err != nil {
				return err
			}
			ref, err := p.Cards.RecordRef(ctx, id, name)
			if err != nil {
				return err
			}
			rs := p.Cards.Records()
			switch sub {
			case "show":
				return recordShow(e, pf.json, rs, ref, version)
			case "history":
				hist, err := rs.History(ref)
				if err != nil {
					return err
				}
				if pf.json {
					if hist == nil {
						hist = []records.Accepted{}
					}
					return writeJSON(e.stdout, hist)
				}
				if len(hist) == 0 {
					fmt.Fprintln(e.stdout, "no accepted versions")
				}
				for _, a := range hist {
					fmt.Fprintf(e.stdout, "v%d %s %s %d bytes\n", a.Version, a.AcceptedAt.Format("2006-01-02T15:04:05Z"), a.Author, len(a.Content))
				}
				return nil
			case "diff":
				return recordDiff(e, pf.json, rs, ref, args[3:])
			}
			return usageError{fmt.Sprintf("unknown record subcommand %q", sub)}
		},
	}
}

func recordShow(e *env, asJSON bool, rs *records.Store, ref records.Ref, version int) error {
	if version >= 0 {
		content, err := rs.Content(ref, version)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(e.stdout, map[string]any{"card": ref.Card, "record": ref.Name, "version": version, "content": content})
		}
		printContent(e, content)
		return nil
	}
	cur, err := rs.Current(ref)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, map[string]any{"card": ref.Card, "record": ref.Name, "selection": cur.Head.Selection,
			"version": cur.Version, "revision": cur.Head.Revision, "draft": cur.Head.Draft != nil, "content": cur.Content})
	}
	printContent(e, cur.Content)
	return nil
}

func printContent(e *env, s string) {
	fmt.Fprint(e.stdout, s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		fmt.Fprintln(e.stdout)
	}
}

func recordDiff(e *env, asJSON bool, rs *records.Store, ref records.Ref, args []string) error {
	h, err := rs.ReadHead(ref)
	if err != nil {
		return err
	}
	from, to := max(h.Latest-1, 0), h.Latest
	nums := []*int{&from, &to}
	if len(args) > 2 {
		return usageError{"diff takes at most FROM and TO"}
	}
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("version %q is not a non-negative number", a)}
		}
		*nums[i] = n
	}
	a, err := rs.Content(ref, from)
	if err != nil {
		return err
	}
	b, err := rs.Content(ref, to)
	if err != nil {
		return err
	}
	d := records.Diff(fmt.Sprintf("%s/%s v%d", ref.Card, ref.Name, from), fmt.Sprintf("%s/%s v%d", ref.Card, ref.Name, to), a, b)
	if asJSON {
		return writeJSON(e.stdout, map[string]any{"card": ref.Card, "record": ref.Name, "from": from, "to": to, "diff": d})
	}
	if d == "" {
		fmt.Fprintln(e.stdout, "no differences")
	}
	fmt.Fprint(e.stdout, d)
	return nil
}
