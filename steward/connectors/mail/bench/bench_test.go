package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/sqlitedb/csqlite"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
)

// A smoke-sized run of every case, in-process: the generator, the body
// marking, the embedding path and each measurement work together.
func TestBenchSmoke(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	man, err := Generate(ctx, GenOptions{Dir: dir, Messages: 400})
	if err != nil {
		t.Fatal(err)
	}
	if man.Messages != 400 || man.Files < 400 || len(man.Partial) == 0 || len(man.None) == 0 || man.Attachments == 0 {
		t.Fatalf("manifest %+v", man)
	}
	dbPath, blobs := mirror.Paths(filepath.Join(dir, "home"))
	s, err := mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobs,
		Accounts: []mail.Account{{Name: "bench", Kind: mail.KindMaildir, Root: man.Root, Layout: mail.LayoutAuto}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Sync(ctx, mirror.SyncOptions{Mode: mirror.Backfill})
	if err != nil || st.Errors != 0 || st.New != 400 {
		t.Fatalf("backfill %+v %v", st, err)
	}
	if err := markBodies(ctx, s, man); err != nil {
		t.Fatal(err)
	}
	emb := &TopicEmbedder{Dim: 64}
	if _, err := s.Embed(ctx, mirror.EmbedOptions{Embedder: emb}); err != nil {
		t.Fatal(err)
	}
	stats, _ := s.Stats(ctx)
	share := float64(stats.PartialBodies+stats.NoBodies) / float64(stats.Messages)
	if stats.Messages != 400 || share < 0.3 || share > 0.6 || stats.Embedded != 400 {
		t.Errorf("stats %+v (partial/none share %.2f)", stats, share)
	}
	qv, _ := emb.Embed(ctx, []string{"project"})
	q := mail.Normalize(qv[0])
	var results []CaseResult
	for _, c := range Cases(man.SubjectWord, man.BodyWord) {
		tm, err := RunCase(ctx, c, CaseOptions{Engine: EngineGo, DBPath: dbPath, Query: q, Samples: 3})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(tm.SamplesMS) != 3 || tm.MedianMS <= 0 || tm.P95MS < tm.MedianMS {
			t.Errorf("%s timing %+v", c.Name, tm)
		}
		want := map[string]int{"knn50_index_prepared": 50, "knn50_vec0_exact": 50, "absent_trigram": 0, "absent_like": 0,
			"lexical_search12": 12, "hybrid12_prepared": 12}
		if n, ok := want[c.Name]; ok && tm.Returned != n {
			t.Errorf("%s returned %d, want %d", c.Name, tm.Returned, n)
		}
		if c.kind == "sql" {
			// SQL cases run on a connection warmed as the engine warms its
			// own, unless asked for a cold one.
			cold, err := RunCase(ctx, c, CaseOptions{Engine: EngineGo, DBPath: dbPath, Samples: 1, Cold: true})
			if err != nil || tm.PrepareMS <= 0 || cold.PrepareMS != 0 || cold.Returned != tm.Returned {
				t.Errorf("%s: warmed %+v, cold %+v, %v", c.Name, tm, cold, err)
			}
			// The C baseline answers the same SQL alike, or says how to build it in.
			ct, err := RunCase(ctx, c, CaseOptions{Engine: EngineC, DBPath: dbPath, Query: q, Samples: 1})
			switch {
			case !csqlite.Built && !errors.Is(err, csqlite.ErrNotBuilt):
				t.Errorf("%s through C without the build tags: %v, want ErrNotBuilt", c.Name, err)
			case csqlite.Built && (err != nil || ct.Returned != tm.Returned):
				t.Errorf("%s through C: %+v, %v; want %d rows like the Go engine", c.Name, ct, err, tm.Returned)
			}
		}
		results = append(results, CaseResult{Case: c, Timing: *tm})
	}
	vr, err := recall(ctx, dbPath, emb, q, results)
	if err != nil {
		t.Fatal(err)
	}
	if vr.RecallAt50 < 0.95 || vr.Queries != 20 {
		t.Errorf("recall %+v", vr)
	}
	rep := &Report{Cases: results, Vector: vr, Backfill: BackfillResult{Note: "skipped"}}
	rep.Checks = checks(rep)
	firstChecks := 0
	for _, c := range rep.Checks {
		if strings.Contains(c.Target, "first query") {
			firstChecks++
		}
	}
	if !strings.Contains(rep.Summary(), "recall@50") || firstChecks != len(results)-2 {
		t.Errorf("summary/checks incomplete:\n%s", rep.Summary())
	}
}

func TestSummariseNearestRank(t *testing.T) {
	tm := Timing{SamplesMS: []float64{5, 1, 3, 2, 4, 100, 6, 7, 8, 9}}
	tm.summarise()
	if tm.MedianMS != 5.5 || tm.P95MS != 100 {
		t.Errorf("median %v p95 %v", tm.MedianMS, tm.P95MS)
	}
}
