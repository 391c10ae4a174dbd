package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mcptool"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/wiki"
)

// wikiSettings are the wiki's validated settings.
type wikiSettings struct {
	dir, indexDir string
	apiBase       string
	apiToken      string
	model         string
	embed         string
	autoIngest    bool
	rescan        time.Duration
}

func readWikiSettings(cfg *config.Config) (*wikiSettings, error) {
	w := &wikiSettings{
		dir:        cfg.Path("STEWARD_WIKI_DIR", filepath.Join(cfg.Home, "wiki")),
		apiBase:    cfg.URL("LLM_WIKI_API_BASE_URL", "http://"+wiki.DefaultAPIAddr),
		apiToken:   cfg.String("LLM_WIKI_API_TOKEN", ""),
		model:      cfg.String("WIKI_MODEL", cfg.String("HOST_TIER", "tier-5")),
		embed:      cfg.String("WIKI_EMBED_ENDPOINT", "gateway"),
		autoIngest: cfg.Bool("WIKI_AUTO_INGEST", true),
		rescan:     cfg.Millis("WIKI_RESCAN_MS", wiki.DefaultRescanInterval, time.Second, 24*time.Hour),
	}
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(w.dir)
	if err != nil {
		return nil, err
	}
	w.dir = abs
	// One index folder per vault, so that pointing STEWARD_WIKI_DIR at
	// another vault never mixes their queues.
	sum := sha256.Sum256([]byte(abs))
	w.indexDir = cfg.Path("WIKI_INDEX_DIR", filepath.Join(cfg.Home, "wiki-index", hex.EncodeToString(sum[:6])))
	return w, cfg.Err()
}

// openWiki opens the wiki service with the gateway for ingest and
// embeddings and the documents extractor for PDF/Office/HTML sources. A
// missing default vault is created; a missing STEWARD_WIKI_DIR is an error.
func openWiki(ctx context.Context, env *cliEnv, model *llm.Client, create bool) (*wiki.Service, *wikiSettings, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, nil, err
	}
	ws, err := readWikiSettings(cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(ws.dir); errors.Is(err, os.ErrNotExist) && create {
		if err := wiki.InitVault(ws.dir); err != nil {
			return nil, nil, err
		}
		env.Log.Info("created the wiki", "dir", ws.dir)
	}
	opts, err := wikiOptions(env, cfg, ws, model)
	if err != nil {
		return nil, nil, err
	}
	svc, err := wiki.Open(ctx, opts)
	return svc, ws, err
}

// wikiOptions builds the wiki's dependencies. The wiki and its document
// extractor share one embedding client (WIKI_EMBED_ENDPOINT); each labels
// its own calls for the usage ledger.
func wikiOptions(env *cliEnv, cfg *config.Config, ws *wikiSettings, model *llm.Client) (wiki.Options, error) {
	emb := newLocalEmbedder(cfg, ws.embed, "", "", 30*time.Second)
	docs, err := newDocumentExtractor(env, emb, "wiki|"+ws.embed)
	if err != nil {
		return wiki.Options{}, err
	}
	if model == nil {
		model = llm.NewClient(llm.ClientOptions{BaseURL: cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"), APIKey: cfg.String("GATEWAY_API_KEY", "sk-local")})
	}
	return wiki.Options{Dir: ws.dir, IndexDir: ws.indexDir, Embedder: emb,
		Model: model, ModelName: ws.model, Extractor: docs, Log: env.Log.With("component", "wiki")}, nil
}

// runWikiBackground keeps the wiki current (file watch, periodic rescan,
// auto-ingest) and works through the ingest queue until ctx ends; wait
// returns when both have stopped.
func runWikiBackground(ctx context.Context, svc *wiki.Service, ws *wikiSettings, log *slog.Logger) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := svc.Watch(ctx, ws.rescan, ws.autoIngest); err != nil {
			log.Warn("wiki file watch stopped; edits outside Steward are picked up by `steward wiki reindex`", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		svc.RunIngest(ctx)
	}()
	return wg.Wait
}

// startWiki opens the wiki inside `steward serve`: its API is mounted on
// the host under /wiki/api/ (host token, for the web app) and served on
// LLM_WIKI_API_BASE_URL (LLM_WIKI_API_TOKEN, for other clients). A wiki
// that cannot open is logged and leaves the rest of Steward running.
func startWiki(ctx context.Context, env *cliEnv, sc *serveConfig, gw *gateway.Switch, gatewayURL string, h *host.Host, st *stack) {
	log := env.Log.With("component", "wiki")
	key := sc.gatewayKey
	if key == "" {
		key = "sk-local"
	}
	opts := llm.ClientOptions{BaseURL: gatewayURL, APIKey: key}
	if gw != nil {
		opts.HTTPClient = &http.Client{Transport: gateway.InProcess(gw.Handler())}
	}
	svc, ws, err := openWiki(ctx, env, llm.NewClient(opts), true)
	if err != nil {
		log.Error("the wiki is unavailable; the rest of Steward runs without it", "err", err)
		return
	}
	st.push(svc.Close)
	api := wiki.APIHandler(svc)
	for _, m := range []string{"GET", "PUT", "POST"} {
		h.Handle(m+" /wiki/api/", http.StripPrefix("/wiki/api", api))
	}
	bgCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	wait := runWikiBackground(bgCtx, svc, ws, log)
	st.push(func() error { stop(); wait(); return nil })

	token, err := host.LoadOrCreateToken(filepath.Join(sc.home, "wiki-api-token"), ws.apiToken)
	if err != nil {
		log.Error("the wiki API is not started", "err", err)
		return
	}
	u, err := url.Parse(ws.apiBase)
	if err != nil || u.Host == "" {
		log.Error("the wiki API is not started: LLM_WIKI_API_BASE_URL is not a URL", "value", ws.apiBase)
		return
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Error("the wiki API is not started: LLM_WIKI_API_BASE_URL must name a loopback address", "value", ws.apiBase)
		return
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		log.Warn("the wiki API is not started (the web app's wiki still works); set LLM_WIKI_API_BASE_URL to another port", "addr", u.Host, "err", err)
		return
	}
	srv := &http.Server{Handler: wiki.RequireBearer(token, api), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("wiki API listening", "url", "http://"+ln.Addr().String(), "token", "STEWARD_HOME/wiki-api-token or LLM_WIKI_API_TOKEN")
	st.push(func() error {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}

func init() {
	registerMCP("wiki", func(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
		lazy := mcptool.NewLazy(func(octx context.Context) (*wiki.Service, error) {
			svc, ws, err := openWiki(octx, env, nil, false)
			if err != nil {
				return nil, err
			}
			runWikiBackground(ctx, svc, ws, env.Log)
			return svc, nil
		}, (*wiki.Service).Close)
		return wiki.NewMCPServer(lazy.Get, version), nil
	})

	register(&command{
		Name:    "wiki",
		Summary: "the Markdown wiki memory: status, search, lint, reindex, add, init",
		Run:     runWikiCommand,
	})
}

const wikiUsage = `Usage: steward wiki COMMAND [options]

The wiki is Steward's long-term memory: Markdown pages with YAML frontmatter and [[wikilinks]] in
STEWARD_WIKI_DIR (default STEWARD_HOME/wiki; any Obsidian vault works). Its index is rebuilt from
the files at any time.

Commands:
  status              pages, sources, index, embeddings, ingest queue, lint issues
  search QUERY        hybrid search (keywords, substrings, meaning, related pages)
  lint                broken links, orphans, pages without sources, frontmatter errors, overdue reviews
  reindex             re-read every file and rebuild the index
  add PATH…           copy files or folders into raw/sources/ and queue their ingest
  init                create the vault's folders and fixed files
  ingest              run the ingest queue until it is empty (the model is reached through the gateway)

Run 'steward wiki COMMAND --help' for a command's options.`

// withWiki parses a subcommand's flags and runs f on the opened wiki.
func withWiki(ctx context.Context, env *cliEnv, fs *flag.FlagSet, args []string, f func(*wiki.Service) error) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	svc, _, err := openWiki(ctx, env, nil, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	return f(svc)
}

// cmpErr returns err, or the result of next when err is nil.
func cmpErr(err error, next func() error) error {
	if err != nil {
		return err
	}
	return next()
}

func runWikiCommand(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stderr, wikiUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	name := "wiki " + sub
	switch sub {
	case "init":
		fs := newFlagSet(env, name, "", "Creates raw/sources/, wiki/ and index.md, log.md, purpose.md, schema.md, overview.md in\nSTEWARD_WIKI_DIR; existing files are kept.")
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		cfg, err := env.Config()
		if err != nil {
			return err
		}
		ws, err := readWikiSettings(cfg)
		if err != nil {
			return err
		}
		if err := wiki.InitVault(ws.dir); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "wiki ready at %s\n", ws.dir)
		return nil
	case "status":
		fs := newFlagSet(env, name, "[--json]", "Prints the wiki's counts: pages, sources, problems, index and embeddings, ingest queue, lint issues.")
		asJSON := fs.Bool("json", false, "print JSON")
		return withWiki(ctx, env, fs, rest, func(svc *wiki.Service) error {
			st, err := svc.Status(ctx)
			if err != nil || *asJSON {
				return cmpErr(err, func() error { return writeJSON(env.Stdout, st) })
			}
			fmt.Fprintf(env.Stdout, "wiki %s\n  pages %d, sources %d, indexed %d, embedded %d\n  queue: %d queued, %d running, %d done, %d failed\n  lint issues %d, communities %d\n",
				st.Dir, st.Pages, st.Sources, st.Indexed, st.Embedded, st.Queue.Queued, st.Queue.Running, st.Queue.Done, st.Queue.Failed, st.LintIssues, st.Communities)
			for _, p := range st.Problems {
				fmt.Fprintf(env.Stdout, "  problem: %s: %s\n", p.Path, p.Reason)
			}
			return nil
		})
	case "search":
		fs := newFlagSet(env, name, "[--json] [--limit N] [--sources] QUERY", "Searches the wiki as the agent does: FTS5 (CJK, accents), substrings, vectors when\nembeddings are on, fused by rank, plus pages related to the top hits.")
		asJSON := fs.Bool("json", false, "print JSON")
		limit := fs.Int("limit", 10, "maximum results (≤ 50)")
		sources := fs.Bool("sources", false, "also search raw imported sources")
		return withWiki(ctx, env, fs, rest, func(svc *wiki.Service) error {
			if fs.NArg() == 0 {
				fs.Usage()
				return errUsage
			}
			res, err := svc.Search(ctx, wiki.SearchRequest{Query: strings.Join(fs.Args(), " "), Limit: *limit, IncludeSources: *sources})
			if err != nil || *asJSON {
				return cmpErr(err, func() error { return writeJSON(env.Stdout, res) })
			}
			if res.Warning != "" {
				fmt.Fprintf(env.Stderr, "note: %s\n", res.Warning)
			}
			for _, r := range res.Results {
				via := ""
				if r.Via != "" {
					via = "  (related to " + r.Via + ")"
				}
				fmt.Fprintf(env.Stdout, "%s — %s%s\n    %s\n", r.Path, r.Title, via, r.Snippet)
			}
			if len(res.Results) == 0 {
				fmt.Fprintln(env.Stdout, "no results")
			}
			return nil
		})
	case "lint":
		fs := newFlagSet(env, name, "[--json]", "Checks the wiki without a model and without changing any file. Exits 1 when there are issues.")
		asJSON := fs.Bool("json", false, "print JSON")
		return withWiki(ctx, env, fs, rest, func(svc *wiki.Service) error {
			rep := svc.Lint(ctx)
			if *asJSON {
				if err := writeJSON(env.Stdout, rep); err != nil {
					return err
				}
			} else {
				for _, i := range rep.Issues {
					loc := i.Path
					if i.Line > 0 {
						loc = fmt.Sprintf("%s:%d", i.Path, i.Line)
					}
					fmt.Fprintf(env.Stdout, "%s: %s: %s\n", loc, i.Kind, i.Message)
				}
				fmt.Fprintf(env.Stdout, "%d pages, %d issues\n", rep.Pages, len(rep.Issues))
			}
			if len(rep.Issues) > 0 {
				return fmt.Errorf("%d issues", len(rep.Issues))
			}
			return nil
		})
	case "reindex":
		fs := newFlagSet(env, name, "[--json]", "Re-reads every file of the wiki and rebuilds its index (text, substrings, vectors when\nembeddings are on). The Markdown files are not changed.")
		asJSON := fs.Bool("json", false, "print JSON")
		return withWiki(ctx, env, fs, rest, func(svc *wiki.Service) error {
			start := time.Now()
			st, err := svc.Reindex(ctx)
			if err != nil || *asJSON {
				return cmpErr(err, func() error { return writeJSON(env.Stdout, st) })
			}
			fmt.Fprintf(env.Stdout, "indexed %d pages and sources in %s\n", st.Total, time.Since(start).Round(time.Millisecond))
			return nil
		})
	case "add":
		fs := newFlagSet(env, name, "[--root DEST] [--no-ingest] [--json] PATH…",
			"Copies files and folders into raw/sources/ (snapshots; the originals are never changed) and queues\n"+
				"their ingest. Hidden files, build/junk folders, unsupported types, symlinks and files over\n"+
				"100 MiB are skipped. Same bytes are skipped; a changed file you added before replaces its\n"+
				"snapshot; an unrelated file of the same name becomes \"name (2).ext\". The origin → snapshot map is\n"+
				"kept in .llmwiki-added.json at the wiki's root.")
		root := fs.String("root", "", "destination folder inside raw/sources (relocates tracked snapshots)")
		noIngest := fs.Bool("no-ingest", false, "copy only; do not queue ingest")
		asJSON := fs.Bool("json", false, "print JSON")
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			fs.Usage()
			return errUsage
		}
		svc, _, err := openWiki(ctx, env, nil, true)
		if err != nil {
			return err
		}
		defer svc.Close()
		var items []wiki.AddItem
		var tasks []*wiki.Task
		if *noIngest {
			items, err = wiki.AddSources(svc.Vault().Dir(), wiki.AddOptions{Inputs: fs.Args(), Root: *root})
			if err == nil {
				_, err = svc.Rescan(ctx)
			}
		} else {
			items, tasks, err = svc.Add(ctx, wiki.AddOptions{Inputs: fs.Args(), Root: *root})
		}
		if *asJSON {
			if jerr := writeJSON(env.Stdout, map[string]any{"items": items, "tasks": tasks}); jerr != nil {
				return jerr
			}
		} else {
			for _, it := range items {
				switch {
				case it.Reason != "" && it.Dest == "":
					fmt.Fprintf(env.Stdout, "%-9s %s (%s)\n", it.Action, it.Origin, it.Reason)
				default:
					fmt.Fprintf(env.Stdout, "%-9s %s → %s\n", it.Action, it.Origin, it.Dest)
				}
			}
			if len(tasks) > 0 {
				fmt.Fprintf(env.Stdout, "%d source(s) queued for ingest; `steward serve` works through the queue (or run `steward wiki ingest`)\n", len(tasks))
			}
		}
		return err
	case "ingest":
		fs := newFlagSet(env, name, "", "Works through the ingest queue until no task is due, then prints the latest tasks.")
		return withWiki(ctx, env, fs, rest, func(svc *wiki.Service) error {
			for {
				did, err := svc.IngestNext(ctx)
				if err != nil {
					return err
				}
				if !did {
					break
				}
				c, _ := svc.Queue().Counts(ctx)
				fmt.Fprintf(env.Stderr, "ingest: %d done, %d queued, %d failed\n", c.Done, c.Queued, c.Failed)
			}
			tasks, err := svc.Queue().List(ctx, 20)
			for _, t := range tasks {
				fmt.Fprintf(env.Stdout, "#%d %-9s %s %s\n", t.ID, t.Status, t.Source, t.Error)
			}
			return err
		})
	}
	fmt.Fprintf(env.Stderr, "steward wiki: unknown command %q\n\n%s\n", sub, wikiUsage)
	return errUsage
}

func init() {
	registerBench(&benchmark{
		Name:    "wiki",
		Summary: "wiki index rebuild, graph, incremental update and search on a generated vault",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "bench wiki", "[--pages N] [--links N] [--samples N] [--smoke] [--keep] [--out FILE] [--json]",
				"Generates a vault (default 10,000 pages, 50,000 links) and measures the index rebuild rate, the\n"+
					"graph + Louvain build, the incremental update after one edit, and warm substring search against\n"+
					"the same SQL through C SQLite (build with -tags 'csqlite fts5') and against rg.")
			pages := fs.Int("pages", 10000, "pages to generate")
			links := fs.Int("links", 0, "wikilinks to generate (default 5 per page)")
			samples := fs.Int("samples", 30, "warm samples per query")
			smoke := fs.Bool("smoke", false, "tiny sizes, to check the harness")
			keep := fs.Bool("keep", false, "keep the generated vault and index (the folder is printed)")
			out := fs.String("out", "", "report path (default STEWARD_HOME/benchmarks/wiki-TIMESTAMP.json)")
			asJSON := fs.Bool("json", false, "also print the report on stdout")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			if *smoke {
				*pages, *samples = 300, 3
			}
			dir, err := os.MkdirTemp("", "steward-bench-wiki-")
			if err != nil {
				return err
			}
			if *keep {
				fmt.Fprintf(env.Stderr, "keeping %s\n", dir)
			} else {
				defer os.RemoveAll(dir)
			}
			rep, err := wiki.RunBenchmark(ctx, wiki.BenchOptions{Pages: *pages, Links: *links, Samples: *samples, Dir: dir, Progress: env.Stderr})
			if err != nil {
				return err
			}
			path := *out
			if path == "" {
				cfg, err := env.Config()
				if err != nil {
					return err
				}
				path = filepath.Join(cfg.Home, "benchmarks", "wiki-"+time.Now().UTC().Format("20060102-150405")+".json")
			}
			data, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
				return err
			}
			for _, t := range rep.Targets {
				mark := "MET"
				if !t.Met {
					mark = "NOT MET"
				}
				fmt.Fprintf(env.Stderr, "target %-36s %-7s (%s): %.3f — %s\n", t.Name, mark, t.Target, t.Value, t.Detail)
			}
			fmt.Fprintf(env.Stderr, "report: %s\n", path)
			if *asJSON {
				_, err = env.Stdout.Write(append(data, '\n'))
			}
			return err
		},
	})
}
