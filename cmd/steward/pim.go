package main

// What the calendar and contacts commands share: both connectors read the
// local sources listed in STEWARD_HOME/NAME.yaml into an index at
// STEWARD_HOME/NAME-index.sqlitedb, embed through the gateway's local-embed
// model, and are benchmarked by timing the spec's queries on synthetic
// indexes at the spec's scale and multiples of it, beside the same SQL
// through C SQLite.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/indexfile"
	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// pimConnector describes a connector whose sources are listed in
// STEWARD_HOME/NAME.yaml and indexed into STEWARD_HOME/NAME-index.sqlitedb,
// each path overridable by a variable; C is its configuration.
type pimConnector[C any] struct {
	name                string // "calendar"
	configVar, indexVar string // "CALENDAR_CONFIG", "CALENDAR_INDEX_DB"
	load                func(path, home, goos string) (*C, error)
	embedSetting        func(*C) string
}

// files resolves the configuration and index paths.
func (p pimConnector[C]) files(env *cliEnv) (cfg *config.Config, configPath, indexPath string, err error) {
	cfg, err = env.Config()
	if err != nil {
		return nil, "", "", err
	}
	configPath = cfg.Path(p.configVar, filepath.Join(cfg.Home, p.name+".yaml"))
	indexPath = cfg.Path(p.indexVar, filepath.Join(cfg.Home, p.name+"-index.sqlitedb"))
	return cfg, configPath, indexPath, cfg.Err()
}

func (p pimConnector[C]) loadConfig(path string) (*C, error) {
	home, _ := os.UserHomeDir()
	return p.load(path, home, runtime.GOOS)
}

// pimCommands are what a connector adds to steward: its command (`steward
// NAME VERB`, the job), its MCP server and its benchmark.
type pimCommands[C any] struct {
	summary      string // the command's line in `steward help`
	job          pimJob[C]
	mcp          mcpServerFactory
	benchSummary string
	bench        pimBenchSuite
}

// register registers the connector's command, MCP server and benchmark
// under its name.
func (p pimConnector[C]) register(c pimCommands[C]) {
	register(&command{Name: p.name, Summary: c.summary, Run: func(ctx context.Context, env *cliEnv, args []string) error {
		return p.run(ctx, env, args, c.job)
	}})
	registerMCP(p.name, c.mcp)
	registerBench(&benchmark{Name: p.name, Summary: c.benchSummary, Run: func(ctx context.Context, env *cliEnv, args []string) error {
		return runPimBench(ctx, env, c.bench, args)
	}})
}

// pimJob is the command that reads a connector's sources into its index
// (`steward calendar sync`, `steward contacts index`).
type pimJob[C any] struct {
	verb        string // the job's word on the command line
	description string // its help text
	jsonHelp    string // the --json flag's help
	// build opens the index at indexPath, reads the sources of c into it
	// with emb (nil: no embeddings) and describes the run.
	build func(ctx context.Context, c *C, indexPath string, emb vecindex.Embedder, log *slog.Logger) (*pimOutcome, error)
}

// pimOutcome is what a job reports.
type pimOutcome struct {
	report       any    // printed with --json
	summary      string // the one line printed without it
	itemErrors   []string
	embedError   string
	sourceErrors map[string]string
}

// run runs `steward NAME VERB [--json] [--no-embed]`. A source that could
// not be read fails the command, after the report, with the reason.
func (p pimConnector[C]) run(ctx context.Context, env *cliEnv, args []string, j pimJob[C]) error {
	if len(args) == 0 || args[0] != j.verb {
		fmt.Fprintf(env.Stderr, "Usage: steward %s %s [--json] [--no-embed]\n", p.name, j.verb)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errUsage
	}
	fs := newFlagSet(env, p.name+" "+j.verb, "[--json] [--no-embed]", j.description)
	asJSON := fs.Bool("json", false, j.jsonHelp)
	noEmbed := fs.Bool("no-embed", false, "skip embeddings for this run")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg, configPath, indexPath, err := p.files(env)
	if err != nil {
		return err
	}
	c, err := p.loadConfig(configPath)
	if err != nil {
		return asNotConfigured(err, localsource.ErrNotConfigured)
	}
	var emb vecindex.Embedder
	if !*noEmbed {
		emb = newLocalEmbedder(cfg, p.embedSetting(c), p.name, "index-embed", 30*time.Second)
	}
	out, err := j.build(ctx, c, indexPath, emb, env.Log)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.Stdout, out.report); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(env.Stdout, out.summary)
		pimPrintProblems(env.Stdout, out.itemErrors, out.embedError)
	}
	return pimSourceFailure(p.name, out.sourceErrors)
}

// queryEmbedder returns the index path and the embedder for an MCP
// server's queries. A configuration that does not load leaves the gateway
// default: the server must start even so, and its tools say what is wrong.
func (p pimConnector[C]) queryEmbedder(env *cliEnv) (indexPath string, emb vecindex.Embedder, err error) {
	cfg, configPath, indexPath, err := p.files(env)
	if err != nil {
		return "", nil, err
	}
	setting := ""
	if c, err := p.loadConfig(configPath); err == nil {
		setting = p.embedSetting(c)
	}
	return indexPath, newLocalEmbedder(cfg, setting, p.name+"-mcp", "query-embed", 10*time.Second), nil
}

// unconfigured returns why no source is configured now, or nil when one
// is (or the configuration fails otherwise: the tools report that).
func (p pimConnector[C]) unconfigured(env *cliEnv) error {
	_, configPath, _, err := p.files(env)
	if err != nil {
		return nil
	}
	if _, err := p.loadConfig(configPath); errors.Is(err, localsource.ErrNotConfigured) {
		return err
	}
	return nil
}

// unbuiltBecauseUnconfigured wraps a connector's service opener: while its
// index is not built (an error matching notBuilt) and no source is
// configured (unconfigured, asked at that moment, says why), the error
// says so — the index cannot be built before a source is — and still
// matches notBuilt, so search preparation skips it with that reason.
func unbuiltBecauseUnconfigured[S any](open func(context.Context) (S, error), notBuilt error, unconfigured func() error) func(context.Context) (S, error) {
	return func(ctx context.Context) (S, error) {
		svc, err := open(ctx)
		if errors.Is(err, notBuilt) {
			if why := unconfigured(); why != nil {
				err = unconfiguredIndexError{reason: why, notBuilt: notBuilt}
			}
		}
		return svc, err
	}
}

// unconfiguredIndexError is an index not built because no source is
// configured.
type unconfiguredIndexError struct{ reason, notBuilt error }

// Error is the reason's first sentence: the configuration example after it
// is the job's advice, too long for a search tool's error or a preparation
// line.
func (e unconfiguredIndexError) Error() string {
	return localsource.NotConfiguredLine(e.reason.Error())
}

func (e unconfiguredIndexError) Unwrap() []error { return []error{e.notBuilt, e.reason} }

// newLocalEmbedder returns the embedder for a calendar.yaml/contacts.yaml
// "embed" setting: "" or "gateway" uses GATEWAY_BASE_URL with
// GATEWAY_API_KEY, "off" returns nil, and a URL is used without the key
// (a shared key is never sent to a remote override).
func newLocalEmbedder(cfg *config.Config, setting, service, action string, timeout time.Duration) vecindex.Embedder {
	base, key := "", ""
	switch setting {
	case "off":
		return nil
	case "", "gateway":
		base = cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1")
		key = cfg.String("GATEWAY_API_KEY", "")
	default:
		base = strings.TrimRight(setting, "/")
	}
	return search.NewEmbedder(search.EmbedderOptions{BaseURL: base, APIKey: key, Model: "local-embed",
		Attribution: llm.Attribution{Service: service, Action: action}, Timeout: timeout})
}

func pimPrintProblems(w io.Writer, itemErrors []string, embedError string) {
	for i, e := range itemErrors {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more item errors\n", len(itemErrors)-20)
			break
		}
		fmt.Fprintf(w, "  skipped: %s\n", e)
	}
	if embedError != "" {
		fmt.Fprintf(w, "  embeddings: %s\n", embedError)
	}
}

// pimSourceFailure turns unreadable sources into the command's error, so a
// permission problem is never mistaken for an empty calendar.
func pimSourceFailure(what string, errs map[string]string) error {
	if len(errs) == 0 {
		return nil
	}
	var parts []string
	for name, e := range errs {
		parts = append(parts, name+": "+e)
	}
	return fmt.Errorf("%d %s source(s) could not be read (their indexed data is kept):\n  %s", len(errs), what, strings.Join(parts, "\n  "))
}

// --- benchmarks ---------------------------------------------------------

// pimVector is a deterministic unit vector for text, standing in for
// local-embed in benchmarks (the spec's figures use bge-m3 at 1,024 dims).
func pimVector(text string, dim int) []float32 {
	h := sha256.Sum256([]byte(text))
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])))
	v := make([]float32, dim)
	var n float64
	for i := range v {
		f := r.NormFloat64()
		v[i] = float32(f)
		n += f * f
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

type pimVectorEmbedder struct{ dim int }

func (p pimVectorEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = pimVector(t, p.dim)
	}
	return out, nil
}

// pimBenchFlags are the options shared by the calendar and contacts suites.
type pimBenchFlags struct {
	scales  []int
	dim     int
	samples int
	out     string
	keep    bool
}

func parsePimBenchFlags(env *cliEnv, name, description string, args []string) (*pimBenchFlags, error) {
	fs := newFlagSet(env, "bench "+name, "[options]", description)
	scales := fs.String("scales", "1,10", "comma-separated multiples of the spec's record count")
	dim := fs.Int("dim", 1024, "vector dimension")
	samples := fs.Int("samples", 30, "warm samples per case (after one first query)")
	out := fs.String("out", "", "JSON report path (default: bench-"+name+"-DATE.json in the current directory)")
	keep := fs.Bool("keep", false, "keep the generated indexes (their folder is printed) for inspection")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	f := &pimBenchFlags{dim: *dim, samples: *samples, out: *out, keep: *keep}
	for _, s := range strings.Split(*scales, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 || n > 100 {
			return nil, fmt.Errorf("--scales: %q is not a multiple from 1 to 100", s)
		}
		f.scales = append(f.scales, n)
	}
	if f.dim < 1 || f.dim > 8192 || f.samples < 3 || f.samples > 10000 {
		return nil, errors.New("--dim must be 1–8192 and --samples 3–10000")
	}
	if f.out == "" {
		f.out = fmt.Sprintf("bench-%s-%s.json", name, time.Now().UTC().Format("20060102-150405"))
	}
	return f, nil
}

// pimBenchSuite is one connector's benchmark.
type pimBenchSuite struct {
	name        string // "calendar": `steward bench calendar`
	records     int    // the spec's record count, scale 1
	noun        string // what the records are ("events")
	description string // the command's help text
	// write generates n synthetic records as source files under dir and
	// returns the source's path.
	write func(dir string, n int) (string, error)
	// index reads the source at path into a new index at indexPath with
	// emb, failing unless all n records were indexed and embedded.
	index func(ctx context.Context, path, indexPath string, n int, emb vecindex.Embedder) error
	// cases are the spec's queries; query is the encoded query vector.
	cases func(query []byte) []pimSQLCase
}

// runPimBench builds the suite's index at each scale through the real
// indexing code, times its cases on a read-only connection and writes the
// JSON report.
func runPimBench(ctx context.Context, env *cliEnv, s pimBenchSuite, args []string) error {
	f, err := parsePimBenchFlags(env, s.name, s.description, args)
	if err != nil {
		return err
	}
	report := newPimBenchReport(s.name, f)
	for _, scale := range f.scales {
		n := s.records * scale
		dir, err := os.MkdirTemp("", "steward-bench-"+s.name+"-")
		if err != nil {
			return err
		}
		if f.keep {
			fmt.Fprintf(env.Stderr, "keeping %s\n", dir)
		} else {
			defer os.RemoveAll(dir)
		}
		fmt.Fprintf(env.Stderr, "%s ×%d: generating %d %s…\n", s.name, scale, n, s.noun)
		src, err := s.write(dir, n)
		if err != nil {
			return err
		}
		indexPath := filepath.Join(dir, s.name+"-index.sqlitedb")
		start := time.Now()
		if err := s.index(ctx, src, indexPath, n, pimVectorEmbedder{dim: f.dim}); err != nil {
			return fmt.Errorf("bench %s index: %w", s.name, err)
		}
		built := time.Since(start)
		fmt.Fprintf(env.Stderr, "%s ×%d: indexed and embedded in %s; timing…\n", s.name, scale, built.Round(time.Millisecond))
		db, err := sqlitedb.Open(ctx, indexPath, indexfile.ReadOptions()) // as the connectors open it for search
		if err != nil {
			return err
		}
		query := sqlitedb.EncodeVector(pimVector("Steward benchmark generic query", f.dim))
		sr, err := runPimScale(ctx, env, f, db, indexPath, scale, n, s.cases(query))
		db.Close()
		if err != nil {
			return err
		}
		sr.SyncMs = ms(built)
		report.Scales = append(report.Scales, sr)
	}
	return report.finish(env, f)
}

// pimSQLCase is one timed query of a suite.
type pimSQLCase struct {
	Name string
	Spec string // the spec's row: returned / first / warm median / warm p95
	SQL  string
	Args []any
}

// pimTiming summarises the samples of one case.
type pimTiming struct {
	// BatchRuns is, for batch timings, how many runs each sample averages.
	BatchRuns int       `json:"batchRuns,omitempty"`
	Returned  int       `json:"returned"`
	FirstMs   float64   `json:"firstMs"`
	MedianMs  float64   `json:"warmMedianMs"`
	P95Ms     float64   `json:"warmP95Ms"`
	Samples   []float64 `json:"samplesMs"`
}

type pimCaseResult struct {
	Name string    `json:"name"`
	Spec string    `json:"spec"`
	SQL  string    `json:"sql"`
	Go   pimTiming `json:"go"`

	// GoBatch and C compare the same SQL through both engines on the same
	// file: each warm sample is the mean wall time of a batch of runs, the
	// batches alternating between the two.
	GoBatch   *pimTiming `json:"goBatch,omitempty"`
	C         *pimTiming `json:"c,omitempty"`
	CSkipped  string     `json:"cSkipped,omitempty"`
	RatioVsC  float64    `json:"ratioVsC,omitempty"`
	Within2xC *bool      `json:"within2xC,omitempty"`
}

type pimScaleResult struct {
	Scale      int             `json:"scale"`
	Records    int             `json:"records"`
	IndexBytes int64           `json:"indexBytes"`
	SyncMs     float64         `json:"buildMs"`
	Cases      []pimCaseResult `json:"cases"`
}

type pimBenchReport struct {
	Suite      string           `json:"suite"`
	Date       string           `json:"date"`
	Machine    string           `json:"machine"`
	GoVersion  string           `json:"goVersion"`
	SQLite     string           `json:"sqliteVersion"`
	CSQLite    string           `json:"cSqlite"`
	Dim        int              `json:"dim"`
	Samples    int              `json:"warmSamples"`
	Method     string           `json:"method"`
	Scales     []pimScaleResult `json:"scales"`
	ScaleCheck []string         `json:"scaleChecks"`
}

func newPimBenchReport(suite string, f *pimBenchFlags) *pimBenchReport {
	return &pimBenchReport{Suite: suite, Date: time.Now().UTC().Format(time.RFC3339), Machine: machineDescription(),
		GoVersion: runtime.Version(), Dim: f.dim, Samples: f.samples,
		Method: "Each case: one first query then warm samples in this process (modernc.org/sqlite), the index opened as the connectors open it for search; " +
			"median and nearest-rank p95 exclude the first. Indexes are built through the real sync/index code with deterministic " +
			"synthetic records and vectors. For the C baseline the identical SQL runs through C SQLite of the same release (cgo, " +
			"package sqlitedb/csqlite) on the same file, in this process and through the same harness: batches of k runs (about 10 ms " +
			"each) alternate between the two engines; the ratio compares the medians of the batch means."}
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func summarizeSamples(samples []float64, returned int) pimTiming {
	t := pimTiming{Returned: returned, Samples: samples}
	if len(samples) == 0 {
		return t
	}
	t.FirstMs = samples[0]
	warm := slices.Clone(samples[1:])
	slices.Sort(warm)
	if len(warm) > 0 {
		t.MedianMs = warm[len(warm)/2]
		if len(warm)%2 == 0 {
			t.MedianMs = (warm[len(warm)/2-1] + warm[len(warm)/2]) / 2
		}
		t.P95Ms = warm[int(math.Ceil(0.95*float64(len(warm))))-1]
	}
	return t
}

// runPimScale times every case on db and, when this binary carries it,
// through C SQLite on the same file. The Go and C batches alternate, so load
// from other processes on a shared machine weighs on both alike.
func runPimScale(ctx context.Context, env *cliEnv, f *pimBenchFlags, db *sql.DB, path string, scale, records int, cases []pimSQLCase) (pimScaleResult, error) {
	res := pimScaleResult{Scale: scale, Records: records}
	if st, err := os.Stat(path); err == nil {
		res.IndexBytes = st.Size()
	}
	cdb, cErr := csqlite.Open(ctx, path, indexfile.ReadOptions().TuningPragmas()...)
	if cErr != nil {
		fmt.Fprintf(env.Stderr, "  C baseline skipped: %v\n", cErr)
	} else {
		defer cdb.Close()
	}
	for _, c := range cases {
		cr := pimCaseResult{Name: c.Name, Spec: c.Spec, SQL: c.SQL}
		var samples []float64
		returned := 0
		for i := 0; i <= f.samples; i++ {
			start := time.Now()
			n, err := countRows(ctx, db, c.SQL, c.Args)
			if err != nil {
				return res, fmt.Errorf("%s: %w", c.Name, err)
			}
			samples = append(samples, ms(time.Since(start)))
			returned = n
		}
		cr.Go = summarizeSamples(samples, returned)
		notMet := false // a baseline that fails to run fails the target; one not built in is not compared
		if cErr != nil {
			cr.CSkipped = cErr.Error()
			if !errors.Is(cErr, csqlite.ErrNotBuilt) {
				cr.Within2xC = &notMet
			}
		} else if err := compareWithC(ctx, db, cdb, c, &cr, f.samples); err != nil {
			cr.CSkipped = err.Error()
			cr.Within2xC = &notMet
			fmt.Fprintf(env.Stderr, "  %s: C baseline failed: %v\n", c.Name, err)
		}
		fmt.Fprintf(env.Stderr, "  ×%d %-40s returned %5d  first %8.3f ms  median %8.3f ms  p95 %8.3f ms", scale, c.Name,
			cr.Go.Returned, cr.Go.FirstMs, cr.Go.MedianMs, cr.Go.P95Ms)
		if cr.C != nil {
			fmt.Fprintf(env.Stderr, "  | batches of %d: Go %.3f ms, C %.3f ms (×%.2f)", cr.C.BatchRuns, cr.GoBatch.MedianMs, cr.C.MedianMs, cr.RatioVsC)
		}
		fmt.Fprintln(env.Stderr)
		res.Cases = append(res.Cases, cr)
	}
	return res, nil
}

// compareWithC times batches of the same query alternately through the
// pure-Go engine (db) and C SQLite (cdb). Each batch lasts about 10 ms and
// yields a mean per run; alternating keeps load from other processes on a
// shared machine even between the two.
func compareWithC(ctx context.Context, db, cdb *sql.DB, c pimSQLCase, cr *pimCaseResult, samples int) error {
	n, err := countRows(ctx, cdb, c.SQL, c.Args)
	if err != nil {
		return err
	}
	if n != cr.Go.Returned {
		return fmt.Errorf("C SQLite returned %d rows, the Go engine %d", n, cr.Go.Returned)
	}
	k := min(max(1, int(10/max(cr.Go.MedianMs, 0.001))), 5000)
	batch := func(db *sql.DB) (float64, error) {
		start := time.Now()
		for range k {
			if _, err := countRows(ctx, db, c.SQL, c.Args); err != nil {
				return 0, err
			}
		}
		return math.Round(float64(time.Since(start).Nanoseconds())/float64(k)/10) / 100000, nil
	}
	var goMeans, cMeans []float64
	for range samples + 1 {
		g, err := batch(db)
		if err != nil {
			return err
		}
		cm, err := batch(cdb)
		if err != nil {
			return err
		}
		goMeans, cMeans = append(goMeans, g), append(cMeans, cm)
	}
	goT, cT := summarizeSamples(goMeans, cr.Go.Returned), summarizeSamples(cMeans, n)
	goT.BatchRuns, cT.BatchRuns = k, k
	cr.GoBatch, cr.C = &goT, &cT
	if cT.MedianMs > 0 {
		var ok bool
		cr.RatioVsC, ok = pimRatioVsC(goT.MedianMs, cT.MedianMs)
		cr.Within2xC = &ok
	}
	return nil
}

// pimRatioVsC is the Go engine's median over C SQLite's, rounded to two
// places for the report, and whether it is within the 2× target — decided
// on the exact ratio, so 2.004 × is over.
func pimRatioVsC(goMedian, cMedian float64) (rounded float64, within bool) {
	r := goMedian / cMedian
	return math.Round(r*100) / 100, r <= 2
}

// pimScaleChecks compares each case's warm median at every larger scale
// with the smallest scale's: growing the data k times may grow the median at
// most k times ("within"), else "OVER". A case without a base median is
// "OVER" too, never left out.
func pimScaleChecks(scales []pimScaleResult) []string {
	base := map[string]float64{}
	baseScale := 0
	for _, s := range scales {
		if baseScale == 0 || s.Scale < baseScale {
			baseScale = s.Scale
		}
	}
	for _, s := range scales {
		if s.Scale == baseScale {
			for _, c := range s.Cases {
				base[c.Name] = c.Go.MedianMs
			}
		}
	}
	var out []string
	for _, s := range scales {
		if s.Scale == baseScale {
			continue
		}
		factor := float64(s.Scale) / float64(baseScale)
		for _, c := range s.Cases {
			b := base[c.Name]
			if b <= 0 {
				out = append(out, fmt.Sprintf("%s: ×%g data → no base median (OVER ×%g)", c.Name, factor, factor))
				continue
			}
			growth := c.Go.MedianMs / b
			verdict := "within"
			if growth > factor {
				verdict = "OVER"
			}
			out = append(out, fmt.Sprintf("%s: ×%g data → ×%.2f warm median (%s ×%g)", c.Name, factor, growth, verdict, factor))
		}
	}
	return out
}

func countRows(ctx context.Context, db *sql.DB, query string, args []any) (int, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// finish adds the 10×-scale check, writes the JSON report and prints a summary.
func (r *pimBenchReport) finish(env *cliEnv, f *pimBenchFlags) error {
	r.CSQLite = "none: " + csqlite.ErrNotBuilt.Error()
	if csqlite.Built {
		r.CSQLite = "C SQLite " + csqlite.Version() + " with sqlite-vec through cgo (package sqlitedb/csqlite)"
	}
	if db, err := sql.Open("sqlite", ":memory:"); err == nil {
		db.QueryRow("SELECT sqlite_version()").Scan(&r.SQLite)
		db.Close()
	}
	r.ScaleCheck = pimScaleChecks(r.Scales)
	out, err := os.Create(f.out)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := writeJSON(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s benchmark, %s, %s\n", r.Suite, r.Date, r.Machine)
	fmt.Fprintf(env.Stdout, "%-6s %-40s %8s %10s %10s %10s %10s %10s %7s   spec (returned / first / median / p95)\n",
		"scale", "case", "returned", "first ms", "median ms", "p95 ms", "Go batch", "C batch", "vs C")
	for _, s := range r.Scales {
		for _, c := range s.Cases {
			goB, cMed, ratio := "-", "-", "-"
			if c.C != nil {
				goB, cMed, ratio = fmt.Sprintf("%.3f", c.GoBatch.MedianMs), fmt.Sprintf("%.3f", c.C.MedianMs), fmt.Sprintf("×%.2f", c.RatioVsC)
			}
			fmt.Fprintf(env.Stdout, "×%-5d %-40s %8d %10.3f %10.3f %10.3f %10s %10s %7s   %s\n", s.Scale, c.Name, c.Go.Returned, c.Go.FirstMs,
				c.Go.MedianMs, c.Go.P95Ms, goB, cMed, ratio, c.Spec)
		}
	}
	for _, l := range r.ScaleCheck {
		fmt.Fprintln(env.Stdout, "  "+l)
	}
	fmt.Fprintf(env.Stdout, "report: %s\n", f.out)
	return nil
}
