package wiki

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
)

// BenchOptions configure RunBenchmark.
type BenchOptions struct {
	Pages, Links int // default 10,000 and 50,000
	Samples      int // warm samples per query (default 30)
	Dir          string
	Progress     io.Writer
}

// BenchTarget is one of the performance targets with its result.
type BenchTarget struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
	Detail string  `json:"detail"`
}

// BenchReport is the JSON report of `steward bench wiki`.
type BenchReport struct {
	Suite     string             `json:"suite"`
	Date      string             `json:"date"`
	GOOS      string             `json:"goos"`
	GOARCH    string             `json:"goarch"`
	CPUs      int                `json:"cpus"`
	Pages     int                `json:"pages"`
	Links     int                `json:"links"`
	Samples   int                `json:"samples"`
	CSQLite   string             `json:"csqlite"`
	Timings   map[string]float64 `json:"timingsMs"`
	Targets   []BenchTarget      `json:"targets"`
	Queries   []string           `json:"queries"`
	Procedure string             `json:"procedure"`
}

// benchWords is the generated vault's vocabulary: pseudo-words, so that
// substring queries hit a known few pages.
func benchWords(r *rand.Rand, n int) []string {
	syl := []string{"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "an", "el", "or", "us", "bra", "cli", "dre", "fro", "gna", "pli", "stu", "tra"}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := 0; k < 2+r.IntN(3); k++ {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		out[i] = b.String()
	}
	return out
}

// GenerateBenchVault writes a vault of pages with links wikilinks in all,
// spread over folders, with frontmatter and shared sources.
func GenerateBenchVault(dir string, pages, links int) error {
	r := rand.New(rand.NewPCG(1, 2))
	words := benchWords(r, 20000)
	types := []string{"entity", "concept", "decision", "person", "organization", "source"}
	title := func(i int) string { return fmt.Sprintf("Page %05d %s", i, words[i%len(words)]) }
	perPage := links / max(pages, 1)
	for i := 0; i < pages; i++ {
		var b strings.Builder
		fmt.Fprintf(&b, "---\ntitle: %s\ntype: %s\nsources: [raw/sources/s%d.md]\ncreated: 2026-01-01\nupdated: 2026-01-01\n---\n# %s\n\n", title(i), types[i%len(types)], i/20, title(i))
		for p := 0; p < 4; p++ {
			for w := 0; w < 40; w++ {
				// Zipf-like: common words often, rare words rarely.
				b.WriteString(words[int(float64(len(words))*r.Float64()*r.Float64()*r.Float64())])
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
		}
		for l := 0; l < perPage; l++ {
			// Mostly links within a neighbourhood of 200 pages, so that
			// communities exist, and some anywhere.
			j := (i + 1 + r.IntN(200)) % pages
			if r.IntN(10) == 0 {
				j = r.IntN(pages)
			}
			fmt.Fprintf(&b, "See [[%s]]. ", title(j))
		}
		b.WriteString("\n")
		p := filepath.Join(dir, PagesDir, fmt.Sprintf("f%02d", i%50), title(i)+".md")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the process's user + system CPU time: on a shared, loaded
// machine it shows the work done apart from the time spent waiting.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RunBenchmark generates the vault and measures the targets:
// rebuild rate, graph + communities build, incremental update, warm search
// against the same SQL through C SQLite and against ripgrep.
func RunBenchmark(ctx context.Context, o BenchOptions) (*BenchReport, error) {
	if o.Pages <= 0 {
		o.Pages = 10000
	}
	if o.Links <= 0 {
		o.Links = 5 * o.Pages
	}
	if o.Samples <= 0 {
		o.Samples = 30
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := &BenchReport{Suite: "wiki", Date: time.Now().UTC().Format(time.RFC3339), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), Pages: o.Pages, Links: o.Links, Samples: o.Samples, Timings: map[string]float64{},
		Procedure: "generated vault (seeded), index rebuilt from files, graph+Louvain built, one page edited and re-indexed per sample, " +
			"substring queries timed warm (median) through the product (modernc) and the same SQL on the same file through C SQLite, and the full search against rg -F -i -l over the vault"}
	vaultDir := filepath.Join(o.Dir, "vault")
	fmt.Fprintf(o.Progress, "generating %d pages with %d links in %s\n", o.Pages, o.Links, vaultDir)
	if err := GenerateBenchVault(vaultDir, o.Pages, o.Links); err != nil {
		return nil, err
	}
	indexDir := filepath.Join(o.Dir, "index")
	start := time.Now()
	s, err := Open(ctx, Options{Dir: vaultDir, IndexDir: indexDir})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	first := time.Since(start)
	start = time.Now()
	cpu0 := cpuTime()
	st, err := s.Reindex(ctx)
	if err != nil {
		return nil, err
	}
	rebuild := time.Since(start)
	rebuildCPU := cpuTime() - cpu0
	rate := float64(st.Total) / rebuild.Seconds()
	rep.Timings["open_and_first_index"] = ms(first)
	rep.Timings["rebuild"] = ms(rebuild)
	rep.Timings["rebuild_cpu"] = ms(rebuildCPU)
	fmt.Fprintf(o.Progress, "rebuild: %d pages in %s (%.0f pages/s)\n", st.Total, rebuild.Round(time.Millisecond), rate)

	var graphTimes, graphCPU []time.Duration
	var g *Graph
	for i := 0; i < 5; i++ {
		start, cpu0 = time.Now(), cpuTime()
		g = BuildGraph(s.vault)
		graphTimes = append(graphTimes, time.Since(start))
		graphCPU = append(graphCPU, cpuTime()-cpu0)
	}
	rep.Links = len(g.Edges)
	gm := median(graphTimes)
	rep.Timings["graph_median"] = ms(gm)
	rep.Timings["graph_cpu_median"] = ms(median(graphCPU))
	fmt.Fprintf(o.Progress, "graph: %d nodes, %d edges, %d communities, modularity %.3f in %s\n", len(g.Nodes), len(g.Edges), len(g.Communities), g.Modularity, gm.Round(time.Millisecond))

	var upd []time.Duration
	pages := s.vault.Pages()
	for i := 0; i < o.Samples; i++ {
		pg := pages[(i*7919)%len(pages)]
		full := filepath.Join(vaultDir, filepath.FromSlash(pg.Path))
		b, _ := os.ReadFile(full)
		b = append(b, fmt.Sprintf("\nEdited %d.\n", i)...)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return nil, err
		}
		start = time.Now()
		if err := s.Update(ctx, pg.Path); err != nil {
			return nil, err
		}
		upd = append(upd, time.Since(start))
	}
	um := median(upd)
	rep.Timings["incremental_update_median"] = ms(um)

	// Substring queries: fragments of mid-frequency words.
	r := rand.New(rand.NewPCG(1, 2))
	words := benchWords(r, 20000)
	var queries []string
	for i := 0; len(queries) < 10; i++ {
		w := words[2000+i*137]
		if len(w) >= 7 {
			queries = append(queries, w[1:len(w)-1])
		}
	}
	rep.Queries = queries
	timeSQL := func(db *sql.DB) (time.Duration, []int, error) {
		var all []time.Duration
		var counts []int
		for _, q := range queries {
			match := search.FTSQuery(q, false, 3)
			run := func() (int, error) {
				rows, err := db.QueryContext(ctx, SubstringSQL, match, 20)
				if err != nil {
					return 0, err
				}
				n := 0
				for rows.Next() {
					n++
				}
				rows.Close()
				return n, rows.Err()
			}
			n, err := run() // warm-up
			if err != nil {
				return 0, nil, err
			}
			counts = append(counts, n)
			for i := 0; i < o.Samples; i++ {
				start := time.Now()
				if _, err := run(); err != nil {
					return 0, nil, err
				}
				all = append(all, time.Since(start))
			}
		}
		return median(all), counts, nil
	}
	indexPath := filepath.Join(indexDir, IndexFileName)
	ro, err := sqlitedb.Open(ctx, indexPath, sqlitedb.Options{ReadOnly: true}.SearchTuning())
	if err != nil {
		return nil, err
	}
	defer ro.Close()
	goMed, goCounts, err := timeSQL(ro)
	if err != nil {
		return nil, err
	}
	rep.Timings["substring_sql_modernc_median"] = ms(goMed)
	var cMed time.Duration
	cdb, err := csqlite.Open(ctx, indexPath, sqlitedb.Options{ReadOnly: true}.SearchTuning().TuningPragmas()...)
	switch {
	case errors.Is(err, csqlite.ErrNotBuilt):
		rep.CSQLite = "not built (build with -tags 'csqlite fts5')"
	case err != nil:
		return nil, err
	default:
		defer cdb.Close()
		rep.CSQLite = csqlite.Version()
		var cCounts []int
		if cMed, cCounts, err = timeSQL(cdb); err != nil {
			return nil, err
		}
		rep.Timings["substring_sql_c_median"] = ms(cMed)
		if fmt.Sprint(cCounts) != fmt.Sprint(goCounts) {
			return nil, fmt.Errorf("C SQLite and modernc disagree on result counts: %v vs %v", cCounts, goCounts)
		}
	}

	var full []time.Duration
	for _, q := range queries {
		if _, err := s.Search(ctx, SearchRequest{Query: q, Limit: 10}); err != nil {
			return nil, err
		}
		for i := 0; i < o.Samples; i++ {
			start := time.Now()
			if _, err := s.Search(ctx, SearchRequest{Query: q, Limit: 10}); err != nil {
				return nil, err
			}
			full = append(full, time.Since(start))
		}
	}
	fm := median(full)
	rep.Timings["search_full_median"] = ms(fm)
	var rgMed time.Duration
	rgDetail := ""
	if rg, err := exec.LookPath("rg"); err == nil {
		var rgt []time.Duration
		for _, q := range queries {
			exec.Command(rg, "-F", "-i", "-l", q, vaultDir).Run() // warm the page cache
			for i := 0; i < max(3, o.Samples/5); i++ {
				start := time.Now()
				exec.Command(rg, "-F", "-i", "-l", q, vaultDir).Run()
				rgt = append(rgt, time.Since(start))
			}
		}
		rgMed = median(rgt)
		rep.Timings["rg_median"] = ms(rgMed)
	} else {
		rgDetail = "rg not installed"
	}

	rep.Targets = []BenchTarget{
		{Name: "index rebuild from files", Value: rate, Target: "≥ 1,000 pages/s", Met: rate >= 1000,
			Detail: fmt.Sprintf("%d pages in %s (process CPU %s: %.0f pages per CPU-second)", st.Total, rebuild.Round(time.Millisecond),
				rebuildCPU.Round(time.Millisecond), float64(st.Total)/rebuildCPU.Seconds())},
		{Name: "full graph + communities", Value: ms(gm), Target: "< 2 s", Met: gm < 2*time.Second,
			Detail: fmt.Sprintf("%d nodes, %d edges, %d communities, modularity %.3f", len(g.Nodes), len(g.Edges), len(g.Communities), g.Modularity)},
		{Name: "incremental update after one edit", Value: ms(um), Target: "< 50 ms", Met: um < 50*time.Millisecond,
			Detail: fmt.Sprintf("median of %d edits", len(upd))},
	}
	if cMed > 0 {
		ratio := float64(goMed) / float64(cMed)
		rep.Targets = append(rep.Targets, BenchTarget{Name: "warm substring SQL vs C SQLite", Value: ratio, Target: "≤ 2 ×", Met: ratio <= 2,
			Detail: fmt.Sprintf("modernc %.3f ms, C %.3f ms (SQLite %s)", ms(goMed), ms(cMed), rep.CSQLite)})
	} else {
		rep.Targets = append(rep.Targets, BenchTarget{Name: "warm substring SQL vs C SQLite", Target: "≤ 2 ×", Detail: rep.CSQLite})
	}
	if rgMed > 0 {
		ratio := float64(fm) / float64(rgMed)
		rep.Targets = append(rep.Targets, BenchTarget{Name: "warm search vs rg (substring)", Value: ratio, Target: "≤ 1 ×", Met: ratio <= 1,
			Detail: fmt.Sprintf("search %.3f ms (FTS5 + trigram + RRF + graph expansion), rg -F -i -l %.3f ms", ms(fm), ms(rgMed))})
	} else {
		rep.Targets = append(rep.Targets, BenchTarget{Name: "warm search vs rg (substring)", Target: "≤ 1 ×", Detail: rgDetail})
	}
	return rep, nil
}
