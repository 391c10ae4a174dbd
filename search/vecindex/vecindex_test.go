package vecindex_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/search/vecindex/vecindextest"
	"github.com/agentstack/agentstack/sqlitedb"
)

// schema is the smallest index vecindex works with: rows with the two
// hashes and a key/value meta table.
var schema = []string{`
CREATE TABLE notes (
	id            INTEGER PRIMARY KEY,
	title         TEXT NOT NULL,
	body          TEXT NOT NULL,
	content_hash  TEXT NOT NULL,
	embedded_hash TEXT NOT NULL DEFAULT ''
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`}

var topics = [][]string{
	{"dinner", "lunch", "restaurant", "trattoria"},
	{"audit", "certification", "iso"},
	{"piano", "music", "lesson"},
}

type fixture struct {
	t     *testing.T
	db    *sql.DB
	store *vecindex.Store
}

func newFixture(t *testing.T, titles ...string) *fixture {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "index.sqlitedb"), sqlitedb.Options{Migrations: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := vecindex.New(db, vecindex.Options{
		Rows: "notes", Vectors: "notes_vec", Meta: "meta", TextColumns: []string{"title", "body"},
		Text: func(c []string) (string, error) {
			if strings.Contains(c[1], "CORRUPT") {
				return "", errors.New("undecodable body")
			}
			return c[0] + "\n" + c[1], nil
		},
		Item: "note", Items: "notes", Name: "notes",
	})
	f := &fixture{t: t, db: db, store: store}
	for _, title := range titles {
		f.put(title, "")
	}
	return f
}

// put inserts or changes a note; a new content hash makes it pending.
func (f *fixture) put(title, body string) int64 {
	f.t.Helper()
	res, err := f.db.Exec(`INSERT INTO notes (title, body, content_hash) VALUES (?, ?, ?)`, title, body, title+"|"+body)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

func (f *fixture) count(q string) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow(q).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (f *fixture) pending() int {
	return f.count(`SELECT count(*) FROM notes WHERE embedded_hash <> content_hash`)
}

func TestEmbedPending(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		titles    []string
		emb       vecindex.Embedder
		wantDone  int
		wantErr   []string // substrings of the error; nil for success
		wantLeft  int      // rows still pending afterwards
		wantStore int      // vectors stored
	}{
		{name: "all embed", titles: []string{"Dinner", "ISO audit", "Piano lesson"}, emb: &vecindextest.Scripted{Dim: 4},
			wantDone: 3, wantStore: 3},
		{name: "nothing pending", emb: &vecindextest.Scripted{Dim: 4}},
		{name: "poisoned input loses only itself", titles: []string{"Alpha", "POISON pill", "Gamma"},
			emb: &vecindextest.Scripted{Dim: 4, Reject: "POISON"}, wantDone: 2, wantLeft: 1, wantStore: 2,
			wantErr: []string{"1 of 3 notes not embedded", "embed note 2", "input rejected"}},
		{name: "endpoint down", titles: []string{"Alpha", "Beta"}, emb: &vecindextest.Scripted{Dim: 4, Down: true},
			wantLeft: 2, wantErr: []string{"embedding endpoint unavailable, 2 notes pending", "connection refused"}},
		{name: "more than one batch", titles: slices.Repeat([]string{"Dinner at the trattoria"}, vecindex.BatchSize*2+5),
			emb: &vecindextest.Scripted{Dim: 8}, wantDone: vecindex.BatchSize*2 + 5, wantStore: vecindex.BatchSize*2 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.titles...)
			done, err := f.store.EmbedPending(ctx, tc.emb, nil)
			if done != tc.wantDone {
				t.Errorf("done %d, want %d", done, tc.wantDone)
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != nil && err == nil:
				t.Errorf("no error, want one mentioning %q", tc.wantErr)
			case err != nil:
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			}
			if left := f.pending(); left != tc.wantLeft {
				t.Errorf("%d rows still pending, want %d", left, tc.wantLeft)
			}
			if tc.wantStore > 0 {
				if n := f.count(`SELECT count(*) FROM notes_vec`); n != tc.wantStore {
					t.Errorf("%d vectors stored, want %d", n, tc.wantStore)
				}
			}
		})
	}
}

func TestEmbedPendingOnlyChangedRows(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "Dinner", "Piano lesson")
	emb := &vecindextest.Topics{Topics: topics}
	if n, err := f.store.EmbedPending(ctx, emb, nil); n != 2 || err != nil {
		t.Fatalf("first run: %d, %v", n, err)
	}
	emb.Calls.Store(0)
	if n, err := f.store.EmbedPending(ctx, emb, nil); n != 0 || err != nil || emb.Calls.Load() != 1 {
		t.Errorf("unchanged rows: embedded %d (%v) with %d calls, want 0 with only the dimension check", n, err, emb.Calls.Load())
	}
	f.db.Exec(`UPDATE notes SET title = 'Lunch', content_hash = 'changed' WHERE id = 1`)
	if n, err := f.store.EmbedPending(ctx, emb, nil); n != 1 || err != nil {
		t.Errorf("one changed row: embedded %d, %v", n, err)
	}
	near, err := f.store.SearchText(ctx, emb, "lunch", 1)
	if err != nil || len(near) != 1 || near[0].ID != 1 {
		t.Errorf("the changed row's new vector is not the one searched: %+v %v", near, err)
	}
}

func TestEmbedPendingDimensionChangeReembedsEverything(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "Alpha", "Beta", "Gamma")
	if n, err := f.store.EmbedPending(ctx, &vecindextest.Scripted{Dim: 4}, nil); n != 3 || err != nil {
		t.Fatalf("first model: %d, %v", n, err)
	}
	n, err := f.store.EmbedPending(ctx, &vecindextest.Scripted{Dim: 6}, nil)
	dim, derr := f.store.Dim(ctx)
	if n != 3 || err != nil || dim != 6 || derr != nil {
		t.Errorf("new model: embedded %d (%v), dimension %d (%v); want all 3 again at 6", n, err, dim, derr)
	}
	if got := f.count(`SELECT count(*) FROM notes_vec`); got != 3 {
		t.Errorf("%d vectors after the reset, want 3 (no mix of dimensions)", got)
	}
	// A model that is down during the check changes nothing.
	if n, err := f.store.EmbedPending(ctx, &vecindextest.Scripted{Dim: 8, Down: true}, nil); n != 0 || err != nil {
		t.Errorf("down during the dimension check: %d, %v", n, err)
	}
	if dim, _ := f.store.Dim(ctx); dim != 6 {
		t.Errorf("dimension %d after a failed check, want 6", dim)
	}
}

func TestEmbedPendingBadStoredRow(t *testing.T) {
	f := newFixture(t, "Alpha")
	id := f.put("Beta", "CORRUPT")
	_, err := f.store.EmbedPending(context.Background(), &vecindextest.Scripted{Dim: 4}, nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("note %d", id)) || !strings.Contains(err.Error(), "undecodable") {
		t.Errorf("a row whose text cannot be made: %v, want an error naming note %d", err, id)
	}
}

func TestEmbedPendingCancelled(t *testing.T) {
	f := newFixture(t, "Alpha")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.store.EmbedPending(ctx, &vecindextest.Scripted{Dim: 4, Down: true}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v, want context.Canceled", err)
	}
}

func TestNearestAndSearchText(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "Dinner at the trattoria", "ISO audit", "Piano lesson", "Lunch")
	emb := &vecindextest.Topics{Topics: topics}
	if _, err := f.store.SearchText(ctx, emb, "dinner", 3); err != nil {
		t.Fatalf("search before any vector: %v", err)
	}
	if near, _ := f.store.SearchText(ctx, emb, "dinner", 3); near != nil {
		t.Errorf("no vectors yet, got %+v", near)
	}
	if _, err := f.store.EmbedPending(ctx, emb, nil); err != nil {
		t.Fatal(err)
	}
	offline := &vecindextest.Topics{Topics: topics}
	offline.Fail.Store(true)
	for _, tc := range []struct {
		name    string
		emb     vecindex.Embedder
		text    string
		k       int
		want    []int64
		wantErr string
	}{
		{name: "nearest first", emb: emb, text: "restaurant", k: 2, want: []int64{4, 1}}, // "Lunch" is all food, the dinner note a little less
		{name: "k bounds the answer", emb: emb, text: "music", k: 1, want: []int64{3}},
		{name: "no embedder", emb: nil, text: "music", k: 3},
		{name: "embedder offline", emb: offline, text: "music", k: 3, wantErr: "semantic search unavailable, results are keyword matches only"},
		{name: "other dimension", emb: &vecindextest.Scripted{Dim: 9}, text: "music", k: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near, err := f.store.SearchText(ctx, tc.emb, tc.text, tc.k)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || near != nil {
					t.Errorf("got %+v, %v; want no rows and %q", near, err, tc.wantErr)
				}
				return
			}
			var ids []int64
			for i, n := range near {
				ids = append(ids, n.ID)
				if i > 0 && n.Distance < near[i-1].Distance {
					t.Errorf("not nearest first: %+v", near)
				}
			}
			if err != nil || !slices.Equal(ids, tc.want) {
				t.Errorf("got %v (%v), want %v", ids, err, tc.want)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "Alpha", "Beta")
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx, tx, 1); err != nil {
		t.Errorf("delete before the vector table exists: %v", err)
	}
	tx.Rollback()
	if _, err := f.store.EmbedPending(ctx, &vecindextest.Scripted{Dim: 4}, nil); err != nil {
		t.Fatal(err)
	}
	tx, err = f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx, tx, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM notes_vec WHERE rowid = 1`); n != 0 {
		t.Error("vector of row 1 survived its deletion")
	}
	if n := f.count(`SELECT count(*) FROM notes_vec`); n != 1 {
		t.Errorf("%d vectors left, want 1", n)
	}
}

func TestNewPanicsOnUnsafeNames(t *testing.T) {
	text := func(c []string) (string, error) { return c[0], nil }
	for _, tc := range []struct {
		name string
		opts vecindex.Options
		ok   bool
	}{
		{"plain names", vecindex.Options{Rows: "notes", Vectors: "notes_vec", Meta: "meta", TextColumns: []string{"title"}, Text: text}, true},
		{"injection in a table", vecindex.Options{Rows: "notes; DROP TABLE meta", Vectors: "v", Meta: "meta", TextColumns: []string{"title"}, Text: text}, false},
		{"quoted column", vecindex.Options{Rows: "notes", Vectors: "v", Meta: "meta", TextColumns: []string{`"title"`}, Text: text}, false},
		{"empty vector table", vecindex.Options{Rows: "notes", Meta: "meta", TextColumns: []string{"title"}, Text: text}, false},
		{"no text", vecindex.Options{Rows: "notes", Vectors: "v", Meta: "meta", TextColumns: []string{"title"}}, false},
		{"no columns", vecindex.Options{Rows: "notes", Vectors: "v", Meta: "meta", Text: text}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); (p == nil) != tc.ok {
					t.Errorf("New panicked with %v, want ok=%t", p, tc.ok)
				}
			}()
			vecindex.New(nil, tc.opts)
		})
	}
}

func TestFuse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lexical []int64
		vector  []vecindex.Neighbor
		want    []int64
	}{
		{name: "lexical only", lexical: []int64{3, 1, 2}, want: []int64{3, 1, 2}},
		{name: "both lists agree on the top", lexical: []int64{3, 1}, vector: []vecindex.Neighbor{{ID: 3}, {ID: 7}}, want: []int64{3, 1, 7}},
		{name: "found by both beats found by one", lexical: []int64{1, 2}, vector: []vecindex.Neighbor{{ID: 2}, {ID: 9}}, want: []int64{2, 1, 9}},
		{name: "vector only", vector: []vecindex.Neighbor{{ID: 5}, {ID: 4}}, want: []int64{5, 4}},
		{name: "nothing", want: []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order, scores := vecindex.Fuse(tc.lexical, tc.vector)
			if !slices.Equal(order, tc.want) {
				t.Errorf("order %v, want %v", order, tc.want)
			}
			for i := 1; i < len(order); i++ {
				if scores[order[i]] > scores[order[i-1]] {
					t.Errorf("scores not descending: %v %v", order, scores)
				}
			}
		})
	}
}

// recorder records the texts it is asked to embed.
type recorder struct{ texts []string }

func (r *recorder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	r.texts = append(r.texts, texts...)
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

func TestEmbeddedTextIsBounded(t *testing.T) {
	long := strings.Repeat("è", vecindex.DefaultMaxChars+10)
	for _, tc := range []struct {
		name     string
		maxChars int
		body     string
		want     string
	}{
		{name: "short text whole", body: "body", want: "Title\nbody"},
		{name: "default bound, in characters not bytes", body: long, want: "Title\n" + long[:2*(vecindex.DefaultMaxChars-6)]},
		{name: "own bound", maxChars: 4, body: "body", want: "Titl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "index.sqlitedb"), sqlitedb.Options{Migrations: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			store := vecindex.New(db, vecindex.Options{Rows: "notes", Vectors: "notes_vec", Meta: "meta", TextColumns: []string{"title", "body"},
				Text: func(c []string) (string, error) { return c[0] + "\n" + c[1], nil }, MaxChars: tc.maxChars})
			db.Exec(`INSERT INTO notes (title, body, content_hash) VALUES ('Title', ?, 'h')`, tc.body)
			rec := &recorder{}
			if n, err := store.EmbedPending(context.Background(), rec, nil); n != 1 || err != nil {
				t.Fatalf("embedded %d, %v", n, err)
			}
			if len(rec.texts) != 1 || rec.texts[0] != tc.want {
				t.Errorf("embedded %d texts, first %d characters, want %d", len(rec.texts), len([]rune(rec.texts[0])), len([]rune(tc.want)))
			}
		})
	}
}
