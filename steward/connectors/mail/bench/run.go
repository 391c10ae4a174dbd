package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/search"
)

// RunOptions configure a benchmark run.
type RunOptions struct {
	// Dir is the working folder (archive, databases); a temporary one when empty.
	Dir string
	// Keep leaves Dir in place (a temporary Dir is removed otherwise).
	Keep bool
	// Messages scales the archive (default 78,000).
	Messages int
	// Dim is the vector dimension (default 1,024).
	Dim int
	// Samples is the number of warm samples per case (default 30).
	Samples int
	// Self is the steward executable, run for the backfill and for every case.
	Self string
	// Log receives progress lines.
	Log io.Writer
}

// Report is the JSON the benchmark writes.
type Report struct {
	Date      string         `json:"date"`
	Command   string         `json:"command"`
	Machine   Machine        `json:"machine"`
	Dataset   Dataset        `json:"dataset"`
	Backfill  BackfillResult `json:"backfill"`
	Embedding EmbedResult    `json:"embedding"`
	Cases     []CaseResult   `json:"cases"`
	Vector    VectorResult   `json:"vector"`
	Checks    []Check        `json:"checks"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Go      string `json:"go"`
	CSQLite string `json:"cSqlite,omitempty"`
}

// Dataset describes the generated archive and mirror.
type Dataset struct {
	Messages        int     `json:"activeMessages"`
	Files           int     `json:"files"`
	Threads         int64   `json:"threads"`
	PartialOrNone   float64 `json:"partialOrNoneShare"`
	Attachments     int64   `json:"attachments"`
	Vectors         int64   `json:"vectors"`
	Dimension       int     `json:"dimension"`
	MaildirBytes    int64   `json:"maildirBytes"`
	DatabaseBytes   int64   `json:"databaseBytes"`
	BlobBytes       int64   `json:"blobBytes"`
	GenerateSeconds float64 `json:"generateSeconds"`
}

// BackfillResult compares the backfill with notmuch new.
type BackfillResult struct {
	StewardSeconds float64 `json:"stewardSeconds"`
	MessagesPerSec float64 `json:"stewardMessagesPerSecond"`
	NotmuchSeconds float64 `json:"notmuchSeconds,omitempty"`
	NotmuchVersion string  `json:"notmuchVersion,omitempty"`
	Ratio          float64 `json:"stewardOverNotmuch,omitempty"`
	Note           string  `json:"note,omitempty"`
}

// EmbedResult reports storing the synthetic vectors through the embedding job.
type EmbedResult struct {
	Seconds  float64 `json:"seconds"`
	Embedded int     `json:"embedded"`
}

// CaseResult is one case's figures, with C SQLite's beside SQL-bound ones.
type CaseResult struct {
	Case
	Timing
	C *Timing `json:"cSqlite,omitempty"`
	// Cold is, for SQL cases, the same measurement on a connection that
	// skipped the start-up warm-up.
	Cold *Timing `json:"cold,omitempty"`
	// CError says why an SQL case has no C SQLite figures: the baseline
	// was not built in or its run failed. Either fails the case's check.
	CError string `json:"cSqliteError,omitempty"`
	// CRatio is this run's warm median over C SQLite's.
	CRatio     float64 `json:"medianOverC,omitempty"`
	FirstRatio float64 `json:"firstOverMedian"`
}

// VectorResult compares the in-memory index with sqlite-vec's exact scan.
type VectorResult struct {
	IndexMedianMS float64 `json:"indexMedianMs"`
	Vec0MedianMS  float64 `json:"vec0MedianMs"`
	Speedup       float64 `json:"speedup"`
	RecallAt50    float64 `json:"recallAt50"`
	Queries       int     `json:"recallQueries"`
}

// Check is one target of the issue, evaluated on this run.
type Check struct {
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

func (o *RunOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Run generates the archive, runs every measurement and returns the report.
func Run(ctx context.Context, o RunOptions) (*Report, error) {
	if o.Messages <= 0 {
		o.Messages = 78000
	}
	if o.Dim <= 0 {
		o.Dim = 1024
	}
	if o.Samples <= 0 {
		o.Samples = 30
	}
	if o.Self == "" {
		return nil, errors.New("bench: the steward executable is required to run cases in fresh processes")
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "steward-bench-mail-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
		if !o.Keep {
			defer os.RemoveAll(d)
		}
	}
	rep := &Report{Date: time.Now().Format(time.RFC3339), Machine: machine()}

	o.logf("generating %d messages in %s", o.Messages, o.Dir)
	start := time.Now()
	man, err := Generate(ctx, GenOptions{Dir: o.Dir, Messages: o.Messages, Progress: func(d, t int) {
		if d%10000 == 0 {
			o.logf("  generated %d/%d", d, t)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("generate archive: %w", err)
	}
	rep.Dataset = Dataset{Messages: man.Messages, Files: man.Files, Dimension: o.Dim, GenerateSeconds: time.Since(start).Seconds(),
		MaildirBytes: dirBytes(man.Root)}

	home := filepath.Join(o.Dir, "home")
	dbPath, blobDir := mirror.Paths(home)
	if err := backfill(ctx, &o, rep, man, home); err != nil {
		return nil, err
	}
	notmuch(ctx, &o, rep, man)

	// Body states as in the reference archive, then vectors through the embedding job.
	store, err := mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobDir,
		Accounts: []mail.Account{{Name: "bench", Kind: mail.KindMaildir, Root: man.Root, Layout: mail.LayoutAuto}}})
	if err != nil {
		return nil, err
	}
	if err := markBodies(ctx, store, man); err != nil {
		store.Close()
		return nil, err
	}
	o.logf("embedding %d messages (%d dimensions, synthetic topic vectors)", man.Messages, o.Dim)
	emb := &TopicEmbedder{Dim: o.Dim}
	start = time.Now()
	est, err := store.Embed(ctx, mirror.EmbedOptions{Embedder: emb, Batch: 64, Progress: func(s mirror.EmbedStats) {
		if s.Embedded%10240 == 0 {
			o.logf("  embedded %d, %d pending", s.Embedded, s.Pending)
		}
	}})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("embed: %w", err)
	}
	rep.Embedding = EmbedResult{Seconds: time.Since(start).Seconds(), Embedded: est.Embedded}
	st, err := store.Stats(ctx)
	if err != nil {
		store.Close()
		return nil, err
	}
	store.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	store.Close()
	rep.Dataset.Threads, rep.Dataset.Attachments, rep.Dataset.Vectors = st.Threads, st.Attachments, st.Embedded
	rep.Dataset.PartialOrNone = float64(st.PartialBodies+st.NoBodies) / float64(max(st.Messages, 1))
	rep.Dataset.DatabaseBytes = fileBytes(dbPath) + fileBytes(dbPath+"-wal")
	rep.Dataset.BlobBytes = dirBytes(blobDir)

	qv, _ := emb.Embed(ctx, []string{"project"})
	query := mail.Normalize(qv[0])
	qpath := filepath.Join(o.Dir, "query.vec")
	if err := os.WriteFile(qpath, sqlitedb.EncodeVector(query), 0o600); err != nil {
		return nil, err
	}

	cases := Cases(man.SubjectWord, man.BodyWord)
	rep.Machine.CSQLite = cSQLiteDescription()
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o.logf("case %s (fresh process)", c.Name)
		co := CaseOptions{Engine: EngineGo, DBPath: dbPath, Samples: o.Samples}
		t, err := runChild(ctx, o.Self, c.Name, co, qpath, man)
		if err != nil {
			return nil, err
		}
		cr := CaseResult{Case: c, Timing: *t}
		if c.kind == "sql" {
			// The same case on a connection that skipped the start-up
			// warm-up, for the record (the reference's SQL rows were cold).
			co.Cold = true
			if cr.Cold, err = runChild(ctx, o.Self, c.Name, co, qpath, man); err != nil {
				return nil, err
			}
			co.Cold = false
		}
		if cr.MedianMS > 0 {
			cr.FirstRatio = cr.FirstMS / cr.MedianMS
		}
		if c.kind == "sql" && !csqlite.Built {
			cr.CError = csqlite.ErrNotBuilt.Error()
		}
		if c.kind == "sql" && csqlite.Built {
			o.logf("case %s through C SQLite (fresh process)", c.Name)
			co.Engine = EngineC
			ct, err := runChild(ctx, o.Self, c.Name, co, qpath, man)
			if err != nil {
				o.logf("  C SQLite run failed: %v", err)
				cr.CError = "C SQLite run failed: " + err.Error()
			} else {
				cr.C = ct
				if ct.MedianMS > 0 {
					cr.CRatio = cr.MedianMS / ct.MedianMS
				}
			}
		}
		rep.Cases = append(rep.Cases, cr)
	}
	o.logf("measuring recall@50 against exact search")
	rep.Vector, err = recall(ctx, dbPath, emb, query, rep.Cases)
	if err != nil {
		return nil, err
	}
	rep.Checks = checks(rep)
	return rep, nil
}

func backfill(ctx context.Context, o *RunOptions, rep *Report, man *Manifest, home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cfg := filepath.Join(o.Dir, "mail.yaml")
	yaml := fmt.Sprintf("accounts:\n  - name: bench\n    kind: maildir\n    root: %q\n    addresses: [me@example.com]\n", man.Root)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return err
	}
	o.logf("steward mail backfill of %d files (embeddings off)", man.Files)
	cmd := exec.CommandContext(ctx, o.Self, "mail", "backfill", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+home, "MAIL_CONFIG="+cfg, "MAIL_EMBED_ENDPOINT=off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("steward mail backfill: %v: %s", err, tail(errb.String()))
	}
	secs := time.Since(start).Seconds()
	var st mirror.SyncStats
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return fmt.Errorf("steward mail backfill output: %w", err)
	}
	if st.Errors > 0 {
		return fmt.Errorf("backfill reported %d errors", st.Errors)
	}
	rep.Backfill = BackfillResult{StewardSeconds: secs, MessagesPerSec: float64(st.Scanned) / secs}
	o.logf("  %.1f s, %.0f files/s", secs, rep.Backfill.MessagesPerSec)
	return nil
}

// notmuch times `notmuch new` on the same Maildir with its database
// outside the tree.
func notmuch(ctx context.Context, o *RunOptions, rep *Report, man *Manifest) {
	bin, err := exec.LookPath("notmuch")
	if err != nil {
		rep.Backfill.Note = "notmuch is not installed (apt-get install notmuch); the comparison was skipped"
		o.logf("  %s", rep.Backfill.Note)
		return
	}
	if v, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		rep.Backfill.NotmuchVersion = strings.TrimSpace(string(v))
	}
	dbDir := filepath.Join(o.Dir, "notmuch-db")
	os.MkdirAll(dbDir, 0o700)
	cfg := filepath.Join(o.Dir, "notmuch-config")
	conf := fmt.Sprintf("[database]\npath=%s\nmail_root=%s\n\n[user]\nname=Bench\nprimary_email=me@example.com\n\n[new]\ntags=unread;inbox;\nignore=\n\n[maildir]\nsynchronize_flags=true\n", dbDir, man.Root)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		rep.Backfill.Note = err.Error()
		return
	}
	o.logf("notmuch new on the same Maildir")
	cmd := exec.CommandContext(ctx, bin, "--config="+cfg, "new", "--quiet")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		rep.Backfill.Note = fmt.Sprintf("notmuch new failed: %v: %s", err, tail(errb.String()))
		return
	}
	rep.Backfill.NotmuchSeconds = time.Since(start).Seconds()
	rep.Backfill.Ratio = rep.Backfill.StewardSeconds / rep.Backfill.NotmuchSeconds
	o.logf("  %.1f s", rep.Backfill.NotmuchSeconds)
}

// markBodies gives the mirror the reference archive's share of partial and
// missing bodies: a Maildir has only complete files, so the states Apple
// Mail's .partial.emlx would produce are set on the generated messages.
func markBodies(ctx context.Context, s *mirror.Store, man *Manifest) error {
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for state, ids := range map[string][]string{"partial": man.Partial, "none": man.None} {
		for len(ids) > 0 {
			n := min(len(ids), 5000)
			list, _ := json.Marshal(ids[:n])
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET body_state = ? WHERE account_id = (SELECT id FROM accounts WHERE name = 'bench')
				AND message_id IN (SELECT value FROM json_each(?))`, state, string(list)); err != nil {
				return err
			}
			ids = ids[n:]
		}
	}
	return tx.Commit()
}

// cSQLiteDescription names the C baseline, or says why there is none.
func cSQLiteDescription() string {
	if !csqlite.Built {
		return "none: " + csqlite.ErrNotBuilt.Error()
	}
	return "C SQLite " + csqlite.Version() + " through cgo (github.com/mattn/go-sqlite3), same harness and connection settings"
}

// runChild runs one case in a fresh `steward bench mail --run-case` process;
// the query vector is read from qpath there.
func runChild(ctx context.Context, self, name string, o CaseOptions, qpath string, man *Manifest) (*Timing, error) {
	args := []string{"bench", "mail", "--run-case", name, "--engine", string(o.Engine), "--db", o.DBPath, "--query-vector", qpath,
		"--samples", fmt.Sprint(o.Samples), "--subject-word", man.SubjectWord, "--body-word", man.BodyWord}
	if o.Cold {
		args = append(args, "--cold")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("case %s: %v: %s", name, err, tail(errb.String()))
	}
	var t Timing
	if err := json.Unmarshal(out.Bytes(), &t); err != nil {
		return nil, fmt.Errorf("case %s output: %w", name, err)
	}
	return &t, nil
}

// RunNamedCase is the child side of runChild: o.Query is read from qpath.
func RunNamedCase(ctx context.Context, name string, o CaseOptions, qpath, subjectWord, bodyWord string, w io.Writer) error {
	c, ok := findCase(Cases(subjectWord, bodyWord), name)
	if !ok {
		return fmt.Errorf("unknown case %q (have: %s)", name, CaseNames())
	}
	raw, err := os.ReadFile(qpath)
	if err != nil {
		return err
	}
	q, err := sqlitedb.DecodeVector(raw)
	if err != nil {
		return err
	}
	o.Query = q
	t, err := RunCase(ctx, c, o)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(t)
}

// recall compares the index's top 50 with sqlite-vec's exact top 50 for the
// benchmark query and 19 more drawn from message texts.
func recall(ctx context.Context, dbPath string, emb *TopicEmbedder, query []float32, cases []CaseResult) (VectorResult, error) {
	var vr VectorResult
	for _, c := range cases {
		switch c.Name {
		case "knn50_index_prepared":
			vr.IndexMedianMS = c.MedianMS
		case "knn50_vec0_exact":
			vr.Vec0MedianMS = c.MedianMS
		}
	}
	if vr.IndexMedianMS > 0 {
		vr.Speedup = vr.Vec0MedianMS / vr.IndexMedianMS
	}
	e, err := search.Open(ctx, search.Options{DBPath: dbPath, SemanticOff: "recall"})
	if err != nil {
		return vr, err
	}
	defer e.Close()
	queries := [][]float32{query}
	rows, err := e.DB().QueryContext(ctx, "SELECT subject || ' ' || substr(body, 1, 300) FROM messages ORDER BY random() LIMIT 19")
	if err != nil {
		return vr, err
	}
	for rows.Next() {
		var text string
		rows.Scan(&text)
		v, _ := emb.Embed(ctx, []string{text})
		queries = append(queries, mail.Normalize(v[0]))
	}
	rows.Close()
	var total float64
	for _, q := range queries {
		got, err := e.KNN(ctx, q, 50)
		if err != nil {
			return vr, err
		}
		exact := map[int64]bool{}
		erows, err := e.DB().QueryContext(ctx, "SELECT rowid FROM message_vec WHERE embedding MATCH ? AND k = 50", sqlitedb.EncodeVector(q))
		if err != nil {
			return vr, err
		}
		for erows.Next() {
			var id int64
			erows.Scan(&id)
			exact[id] = true
		}
		erows.Close()
		hit := 0
		for _, id := range got {
			if exact[id] {
				hit++
			}
		}
		total += float64(hit) / float64(max(len(exact), 1))
	}
	vr.Queries = len(queries)
	vr.RecallAt50 = total / float64(len(queries))
	return vr, nil
}

func checks(rep *Report) []Check {
	var out []Check
	b := rep.Backfill
	if b.NotmuchSeconds > 0 {
		out = append(out, Check{Target: "backfill at least as fast as notmuch new", Pass: b.StewardSeconds <= b.NotmuchSeconds,
			Detail: fmt.Sprintf("steward %.1f s, notmuch %.1f s (ratio %.2f)", b.StewardSeconds, b.NotmuchSeconds, b.Ratio)})
	} else {
		out = append(out, Check{Target: "backfill at least as fast as notmuch new", Detail: b.Note})
	}
	for _, c := range rep.Cases {
		switch {
		case c.C != nil:
			out = append(out, Check{Target: c.Name + ": warm median within 2× of C SQLite", Pass: c.C.MedianMS > 0 && c.CRatio <= 2,
				Detail: fmt.Sprintf("%.3f ms vs %.3f ms (%.2f×)", c.MedianMS, c.C.MedianMS, c.CRatio)})
		case c.kind == "sql":
			detail := c.CError
			if detail == "" {
				detail = "no C SQLite figures"
			}
			out = append(out, Check{Target: c.Name + ": warm median within 2× of C SQLite", Detail: detail})
		}
		if c.Informational {
			continue // its first query builds the index on purpose; reported, not held to the target
		}
		out = append(out, Check{Target: c.Name + ": first query within 10× the warm median", Pass: c.MedianMS > 0 && c.FirstRatio <= 10,
			Detail: fmt.Sprintf("first %.3f ms, median %.3f ms (%.1f×)", c.FirstMS, c.MedianMS, c.FirstRatio)})
	}
	v := rep.Vector
	out = append(out, Check{Target: "KNN cap 50 at least 2× faster than sqlite-vec exact vec0", Pass: v.Speedup >= 2,
		Detail: fmt.Sprintf("%.2f ms vs %.2f ms (%.1f×)", v.IndexMedianMS, v.Vec0MedianMS, v.Speedup)})
	out = append(out, Check{Target: "recall@50 ≥ 0.95 against exact search", Pass: v.RecallAt50 >= 0.95,
		Detail: fmt.Sprintf("%.3f over %d queries", v.RecallAt50, v.Queries)})
	return out
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					m.CPU = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	return m
}

func fileBytes(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	return s
}

// Summary formats the report for a terminal.
func (r *Report) Summary() string {
	var b strings.Builder
	d := r.Dataset
	fmt.Fprintf(&b, "mail benchmark %s on %d × %s\n", r.Date, r.Machine.CPUs, r.Machine.CPU)
	fmt.Fprintf(&b, "dataset: %d active messages, %d threads, %.1f%% partial/none bodies, %d attachments, %d vectors × %d; database %.2f GiB\n",
		d.Messages, d.Threads, 100*d.PartialOrNone, d.Attachments, d.Vectors, d.Dimension, float64(d.DatabaseBytes)/(1<<30))
	fmt.Fprintf(&b, "backfill: steward %.1f s (%.0f files/s)", r.Backfill.StewardSeconds, r.Backfill.MessagesPerSec)
	if r.Backfill.NotmuchSeconds > 0 {
		fmt.Fprintf(&b, ", notmuch new %.1f s", r.Backfill.NotmuchSeconds)
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "%-28s %8s %10s %10s %10s %10s %10s %10s\n", "case", "returned", "first ms", "median ms", "p95 ms", "cold first", "C median", "C first")
	for _, c := range r.Cases {
		cold, cm, cf := "—", "—", "—"
		if c.Cold != nil {
			cold = fmt.Sprintf("%.3f", c.Cold.FirstMS)
		}
		if c.C != nil {
			cm, cf = fmt.Sprintf("%.3f", c.C.MedianMS), fmt.Sprintf("%.3f", c.C.FirstMS)
		}
		fmt.Fprintf(&b, "%-28s %8d %10.3f %10.3f %10.3f %10s %10s %10s\n", c.Name, c.Returned, c.FirstMS, c.MedianMS, c.P95MS, cold, cm, cf)
	}
	fmt.Fprintf(&b, "vector: index %.2f ms vs vec0 %.2f ms (%.1f×), recall@50 %.3f\n", r.Vector.IndexMedianMS, r.Vector.Vec0MedianMS, r.Vector.Speedup, r.Vector.RecallAt50)
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "[%s] %s: %s\n", mark, c.Target, c.Detail)
	}
	return b.String()
}
