package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/documents"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/pathguard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newPathGuard returns the shared sensitive-path guard for this user and
// data directory.
func newPathGuard(cfg *config.Config) *pathguard.Guard {
	home, _ := os.UserHomeDir()
	return pathguard.New(pathguard.Options{Home: home, DataDir: cfg.Home})
}

// documentWorkerCommand is how the documents connector starts its
// extraction worker: this same binary.
func documentWorkerCommand() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the steward executable for the extraction worker: %w", err)
	}
	return []string{exe, "documents", "extract", "--worker"}, nil
}

// documentsPDFStatus tells the System page which PDF extractor the
// documents connector uses (DOCUMENT_PDF_EXTRACTOR).
func documentsPDFStatus(cfg *config.Config) host.ServiceStatus {
	_, desc, err := documents.ResolvePDFExtractor(cfg.String("DOCUMENT_PDF_EXTRACTOR", documents.PDFExtractorAuto), exec.LookPath)
	switch {
	case err != nil:
		return host.ServiceStatus{Name: "documents: PDF text", State: host.StateError, Detail: err.Error()}
	case strings.Contains(desc, "not installed"):
		return host.ServiceStatus{Name: "documents: PDF text", State: host.StateWarning, Detail: desc}
	}
	return host.ServiceStatus{Name: "documents: PDF text", State: host.StateOK, Detail: desc}
}

func newDocumentService(env *cliEnv) (*documents.Service, error) {
	return buildDocumentService(env, documents.OptionsFromConfig)
}

// newDocumentExtractor is the documents service the wiki extracts sources
// with: it searches with the wiki's embedder (nil: lexical only), so one
// embedding client serves both; id names that embedder for the vector cache.
func newDocumentExtractor(env *cliEnv, emb documents.Embedder, id string) (*documents.Service, error) {
	return buildDocumentService(env, func(cfg *config.Config, g *pathguard.Guard) (documents.Options, error) {
		opts, err := documents.ExtractOptionsFromConfig(cfg, g)
		if emb != nil {
			opts.Embedder, opts.EmbedderID = emb, id
		}
		return opts, err
	})
}

func buildDocumentService(env *cliEnv, options func(*config.Config, *pathguard.Guard) (documents.Options, error)) (*documents.Service, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	opts, err := options(cfg, newPathGuard(cfg))
	if err != nil {
		return nil, err
	}
	if opts.WorkerCommand, err = documentWorkerCommand(); err != nil {
		return nil, err
	}
	opts.Log = env.Log
	return documents.New(opts), nil
}

func init() {
	registerMCP("documents", func(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
		svc, err := newDocumentService(env)
		if err != nil {
			return nil, err
		}
		return documents.NewServer(svc, version), nil
	})

	register(&command{
		Name:    "documents",
		Summary: "extract a local document's text as the documents connector sees it",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			if len(args) == 0 || args[0] != "extract" {
				fmt.Fprintln(env.Stderr, "Usage: steward documents extract [--json] [--page N] PATH")
				if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
					return nil
				}
				return errUsage
			}
			fs := newFlagSet(env, "documents extract", "[--json] [--page N] PATH",
				"Extracts PATH with the same checks and limits as the documents connector (DOCUMENT_* settings)\n"+
					"and prints its info and the text of one page, or everything as JSON with --json.")
			asJSON := fs.Bool("json", false, "print info and the selected page as JSON")
			page := fs.Int("page", 1, "page (PDF page, PPTX slide) to print")
			worker := fs.Bool("worker", false, "internal: serve one extraction request on stdin (used by the connector)")
			if err := parseFlags(fs, args[1:]); err != nil {
				return err
			}
			if *worker {
				return documents.ServeWorker(ctx, env.Stdin, env.Stdout)
			}
			if fs.NArg() != 1 {
				fs.Usage()
				return errUsage
			}
			path, err := filepath.Abs(fs.Arg(0))
			if err != nil {
				return err
			}
			svc, err := newDocumentService(env)
			if err != nil {
				return err
			}
			info, err := svc.Info(ctx, path)
			if err != nil {
				return err
			}
			read, err := svc.Read(ctx, documents.ReadRequest{Path: path, Page: *page, MaxChars: documents.MaxReadChars})
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, map[string]any{"info": info, "read": read})
			}
			fmt.Fprintf(env.Stdout, "%s: %s, %d page(s), %d characters\n", info.Name, info.Format, info.Pages, info.Characters)
			for _, w := range info.Warnings {
				fmt.Fprintf(env.Stdout, "warning: %s\n", w)
			}
			for _, s := range read.Segments {
				fmt.Fprintf(env.Stdout, "\n--- page %d ---\n%s\n", s.Page, s.Text)
			}
			if read.Navigation.HasMore {
				fmt.Fprintln(env.Stdout, "\n(more text follows; use --json for cursors)")
			}
			return nil
		},
	})

	registerBench(&benchmark{
		Name:    "documents",
		Summary: "document extraction, cache, read and search on generated files",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "bench documents", "[--samples N] [--in-process] [--out FILE] [--json]",
				"Reproduces the spec's Document Extraction, Cache And Search table on generated inputs\n"+
					"(text 100,000 and 2,000,000 characters, a 20-page PDF, a 20-slide PPTX), with the\n"+
					"pdftotext, cache and scaling targets, and writes a JSON report.")
			samples := fs.Int("samples", 10, "timed samples after the first operation")
			inProcess := fs.Bool("in-process", false, "extract in-process instead of in a worker process")
			out := fs.String("out", "", "report path (default STEWARD_HOME/benchmarks/documents-TIMESTAMP.json)")
			asJSON := fs.Bool("json", false, "also print the report on stdout")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			var worker []string
			if !*inProcess {
				var err error
				if worker, err = documentWorkerCommand(); err != nil {
					return err
				}
			}
			cfg, err := env.Config()
			if err != nil {
				return err
			}
			pdfBin, _, err := documents.ResolvePDFExtractor(cfg.String("DOCUMENT_PDF_EXTRACTOR", documents.PDFExtractorAuto), exec.LookPath)
			if err != nil {
				return err
			}
			report, err := documents.RunBenchmark(ctx, documents.BenchOptions{WorkerCommand: worker, Samples: *samples, Progress: env.Stderr, PDFToText: pdfBin})
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(report, "", "  ")
			if err != nil {
				return err
			}
			path := *out
			if path == "" {
				cfg, err := env.Config()
				if err != nil {
					return err
				}
				path = filepath.Join(cfg.Home, "benchmarks", "documents-"+time.Now().UTC().Format("20060102-150405")+".json")
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
				return err
			}
			for _, t := range report.Targets {
				mark := "MET"
				if !t.Met {
					mark = "NOT MET"
				}
				fmt.Fprintf(env.Stderr, "target %-50s %s (%s): %s\n", t.Name, mark, t.Target, strings.TrimSpace(t.Detail))
			}
			fmt.Fprintf(env.Stderr, "report: %s\n", path)
			if *asJSON {
				_, err = env.Stdout.Write(append(data, '\n'))
			}
			return err
		},
	})
}
