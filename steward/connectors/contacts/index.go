package contacts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/indexfile"
	"github.com/agentstack/agentstack/search/trigram"
	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// migrations is the index schema.
//
// records keeps each source record as read (so a source that fails to read
// keeps contributing its last known records); people is the merged view
// with the sidecar uid; person_sources maps native person ids back to it.
var migrations = []string{`
CREATE TABLE records (
	source    TEXT NOT NULL,
	source_id TEXT NOT NULL,
	native_id TEXT NOT NULL,
	path      TEXT NOT NULL DEFAULT '',
	data      TEXT NOT NULL,
	PRIMARY KEY (source, source_id, native_id)
);
CREATE TABLE people (
	id            INTEGER PRIMARY KEY,
	uid           TEXT NOT NULL UNIQUE,
	name          TEXT NOT NULL,
	primary_email TEXT NOT NULL DEFAULT '',
	data          TEXT NOT NULL,
	content_hash  TEXT NOT NULL,
	embedded_hash TEXT NOT NULL DEFAULT ''
);
CREATE TABLE person_sources (
	person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
	source    TEXT NOT NULL,
	source_id TEXT NOT NULL,
	native_id TEXT NOT NULL
);
CREATE INDEX person_sources_native ON person_sources(native_id);
CREATE INDEX person_sources_person ON person_sources(person_id);
CREATE TABLE person_emails (
	email     TEXT NOT NULL,
	person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
	PRIMARY KEY (email, person_id)
);
CREATE INDEX person_emails_person ON person_emails(person_id);
CREATE TABLE sync_state (
	id           INTEGER PRIMARY KEY CHECK (id = 1),
	generation   INTEGER NOT NULL,
	completed_at INTEGER NOT NULL,
	complete     INTEGER NOT NULL,
	report       TEXT NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Text is stored folded (lower case, no diacritics) for plain trigram.
CREATE VIRTUAL TABLE people_fts USING fts5(name, nickname, organization, title, notes, emails, phones, tokenize = 'trigram');
`}

// Index is the contacts index (STEWARD_HOME/contacts-index.sqlitedb).
type Index struct {
	db       *sql.DB
	text     *trigram.Index
	vectors  *vecindex.Store
	readOnly bool
	// beforeCommit runs just before the index transaction commits (tests).
	beforeCommit func() error
}

// ErrNoIndex reports a read before the first `steward contacts index`.
var ErrNoIndex = errors.New("contacts index not built yet: run `steward contacts index`")

// files describes the index file to indexfile.
var files = indexfile.Options{Name: "contacts index", Migrations: migrations, NotBuilt: ErrNoIndex}

// OpenIndex opens (creating if needed) the index at path for indexing.
func OpenIndex(ctx context.Context, path string) (*Index, error) {
	db, err := indexfile.Open(ctx, path, files)
	if err != nil {
		return nil, err
	}
	return &Index{db: db, text: newText(db), vectors: newVectors(db)}, nil
}

// OpenIndexReadOnly opens an existing index for searching.
func OpenIndexReadOnly(ctx context.Context, path string) (*Index, error) {
	db, err := indexfile.OpenReadOnly(ctx, path, files)
	if err != nil {
		return nil, err
	}
	return &Index{db: db, text: newText(db), vectors: newVectors(db), readOnly: true}, nil
}

// newText returns the keyword side of the index open in db. Phone numbers
// are stored as typed; the other columns folded.
func newText(db *sql.DB) *trigram.Index {
	return trigram.New(db, trigram.Options{
		Table: "people_fts", Columns: []string{"name", "nickname", "organization", "title", "notes", "emails", "phones"},
		Weights: []float64{10, 8, 5, 4, 1, 3, 1}, ScanLimit: 1_000_000,
	})
}

// Close closes the index.
func (x *Index) Close() error { return x.db.Close() }

// DB exposes the connection for benchmarks and diagnostics.
func (x *Index) DB() *sql.DB { return x.db }

// IndexOptions configure one indexing run.
type IndexOptions struct {
	Embedder Embedder
	Apple    AppleOptions
	Log      *slog.Logger
	Now      func() time.Time
}

// Report says what one indexing run did.
type Report struct {
	Generation int64 `json:"generation"`
	// StartedAt is when the run began reading: write confirmation only
	// takes evidence from a run that started after the write completed.
	StartedAt    time.Time         `json:"startedAt"`
	Complete     bool              `json:"complete"`
	Records      int               `json:"records"`
	People       int               `json:"people"`
	Merged       int               `json:"merged"` // records folded into another by a shared email
	Added        int               `json:"added"`
	Updated      int               `json:"updated"`
	Unchanged    int               `json:"unchanged"`
	Deleted      int               `json:"deleted"`
	SourceErrors map[string]string `json:"sourceErrors,omitempty"`
	RecordErrors []string          `json:"recordErrors,omitempty"`
	Embedded     int               `json:"embedded"`
	EmbedError   string            `json:"embedError,omitempty"`
}

func readSource(ctx context.Context, src SourceConfig, opts IndexOptions) (*SourceResult, error) {
	switch src.Kind {
	case KindApple:
		return ReadApple(ctx, src, opts.Apple)
	case KindVCard:
		return ReadVCards(ctx, src)
	}
	return nil, fmt.Errorf("source %s: unknown kind %q", src.Name, src.Kind)
}

// Build reads every source, merges the records into people and publishes
// records, people, search text and the completed-run marker in one
// transaction. A source (or file) that fails keeps its previous records.
// Embeddings are added afterwards and may fail without undoing the rest.
func (x *Index) Build(ctx context.Context, cfg *Config, opts IndexOptions) (*Report, error) {
	if x.readOnly {
		return nil, errors.New("contacts index: opened read-only")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	started := now()
	results, failed, err := localsource.ReadAll(ctx, log, "contacts", "records", cfg.Sources, (*SourceConfig).fields,
		func(ctx context.Context, src SourceConfig) (*SourceResult, error) { return readSource(ctx, src, opts) })
	if err != nil {
		return nil, err
	}
	rep := &Report{SourceErrors: failed, StartedAt: started.UTC()}
	for _, src := range cfg.Sources {
		if res, ok := results[src.Name]; ok {
			for _, e := range res.Errors {
				rep.RecordErrors = append(rep.RecordErrors, src.Name+": "+e.Error())
			}
		}
	}
	rep.Complete = len(rep.SourceErrors) == 0 && len(rep.RecordErrors) == 0
	if err := x.publish(ctx, cfg, results, rep, now()); err != nil {
		return nil, err
	}
	log.Info("contacts index published", "people", rep.People, "records", rep.Records, "merged", rep.Merged)
	if opts.Embedder != nil {
		n, err := x.vectors.EmbedPending(ctx, opts.Embedder, log)
		rep.Embedded = n
		if err != nil {
			rep.EmbedError = err.Error()
		}
	}
	return rep, nil
}

// publish writes the records, people and search text of one run, with its
// marker, in one transaction.
func (x *Index) publish(ctx context.Context, cfg *Config, results map[string]*SourceResult, rep *Report, now time.Time) error {
	return indexfile.Publish(ctx, x.db, indexfile.Build{Name: "contacts index", At: now, BeforeCommit: x.beforeCommit,
		Write: func(tx *sql.Tx, gen int64) (bool, any, error) {
			rep.Generation = gen
			err := x.write(ctx, tx, cfg, results, rep)
			return rep.Complete, rep, err
		}})
}

func (x *Index) write(ctx context.Context, tx *sql.Tx, cfg *Config, results map[string]*SourceResult, rep *Report) error {
	configured := map[string]bool{}
	for _, src := range cfg.Sources {
		configured[src.Name] = true
		res, ok := results[src.Name]
		if !ok {
			continue
		}
		if err := replaceRecords(ctx, tx, src.Name, res); err != nil {
			return err
		}
	}
	// Records of sources no longer configured go away.
	var names []any
	for n := range configured {
		names = append(names, n)
	}
	q := `DELETE FROM records`
	if len(names) > 0 {
		q += ` WHERE source NOT IN (?` + strings.Repeat(",?", len(names)-1) + `)`
	}
	if _, err := tx.ExecContext(ctx, q, names...); err != nil {
		return fmt.Errorf("drop records of removed sources: %w", err)
	}
	records, err := loadRecords(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		metaBuildStarted, fmt.Sprint(rep.StartedAt.UnixMilli())); err != nil {
		return fmt.Errorf("record run start: %w", err)
	}
	people := Merge(records)
	rep.Records, rep.People, rep.Merged = len(records), len(people), len(records)-len(people)
	return writePeople(ctx, tx, x.vectors, people, rep)
}

// replaceRecords swaps a source's records for the new ones, keeping those
// from files that failed to read.
func replaceRecords(ctx context.Context, tx *sql.Tx, source string, res *SourceResult) error {
	keep := map[string]bool{}
	for _, p := range res.FailedPaths {
		keep[p] = true
	}
	rows, err := tx.QueryContext(ctx, `SELECT rowid, path FROM records WHERE source = ?`, source)
	if err != nil {
		return fmt.Errorf("list records of %s: %w", source, err)
	}
	var drop []int64
	for rows.Next() {
		var id int64
		var path string
		if err := rows.Scan(&id, &path); err != nil {
			rows.Close()
			return err
		}
		if !keep[path] {
			drop = append(drop, id)
		}
	}
	rows.Close()
	for _, id := range drop {
		if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE rowid = ?`, id); err != nil {
			return fmt.Errorf("replace records of %s: %w", source, err)
		}
	}
	for _, r := range res.Records {
		data, _ := json.Marshal(r)
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (source, source_id, native_id, path, data) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (source, source_id, native_id) DO UPDATE SET path = excluded.path, data = excluded.data`,
			source, r.SourceID, r.NativeID, recordPath(r), string(data)); err != nil {
			return fmt.Errorf("store record %s/%s: %w", source, r.NativeID, err)
		}
	}
	return nil
}

// recordPath is the file a record came from, used to keep records of files
// that fail to read; Apple stores are identified by their source id.
func recordPath(r Record) string { return r.path }

func loadRecords(ctx context.Context, tx *sql.Tx) ([]Record, error) {
	rows, err := tx.QueryContext(ctx, `SELECT data FROM records ORDER BY source, source_id, native_id`)
	if err != nil {
		return nil, fmt.Errorf("load records: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var r Record
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return nil, fmt.Errorf("decode stored record: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// writePeople diffs the merged people against the stored ones by uid, so an
// unchanged person keeps its row id and vector.
func writePeople(ctx context.Context, tx *sql.Tx, vectors *vecindex.Store, people []Person, rep *Report) error {
	type stored struct {
		id   int64
		hash string
	}
	existing := map[string]stored{}
	rows, err := tx.QueryContext(ctx, `SELECT id, uid, content_hash FROM people`)
	if err != nil {
		return fmt.Errorf("load people: %w", err)
	}
	for rows.Next() {
		var s stored
		var uid string
		if err := rows.Scan(&s.id, &uid, &s.hash); err != nil {
			rows.Close()
			return err
		}
		existing[uid] = s
	}
	rows.Close()
	seen := map[string]bool{}
	for i := range people {
		p := &people[i]
		seen[p.UID] = true
		h := p.hash()
		data, _ := json.Marshal(p)
		old, ok := existing[p.UID]
		var id int64
		switch {
		case ok && old.hash == h:
			rep.Unchanged++
			continue
		case ok:
			id = old.id
			if _, err := tx.ExecContext(ctx, `UPDATE people SET name = ?, primary_email = ?, data = ?, content_hash = ? WHERE id = ?`,
				p.Name, p.PrimaryEmail, string(data), h, id); err != nil {
				return fmt.Errorf("update person %s: %w", p.UID, err)
			}
			for _, q := range []string{`DELETE FROM people_fts WHERE rowid = ?`, `DELETE FROM person_sources WHERE person_id = ?`, `DELETE FROM person_emails WHERE person_id = ?`} {
				if _, err := tx.ExecContext(ctx, q, id); err != nil {
					return fmt.Errorf("update person %s: %w", p.UID, err)
				}
			}
			rep.Updated++
		default:
			res, err := tx.ExecContext(ctx, `INSERT INTO people (uid, name, primary_email, data, content_hash) VALUES (?, ?, ?, ?, ?)`,
				p.UID, p.Name, p.PrimaryEmail, string(data), h)
			if err != nil {
				return fmt.Errorf("insert person %s: %w", p.UID, err)
			}
			id, _ = res.LastInsertId()
			rep.Added++
		}
		if err := writePersonDetails(ctx, tx, id, p); err != nil {
			return err
		}
	}
	for uid, s := range existing {
		if seen[uid] {
			continue
		}
		for _, q := range []string{`DELETE FROM people_fts WHERE rowid = ?`, `DELETE FROM people WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, s.id); err != nil {
				return fmt.Errorf("delete person %s: %w", uid, err)
			}
		}
		if err := vectors.Delete(ctx, tx, s.id); err != nil {
			return err
		}
		rep.Deleted++
	}
	return nil
}

func writePersonDetails(ctx context.Context, tx *sql.Tx, id int64, p *Person) error {
	var emails, phones []string
	for _, e := range p.Emails {
		emails = append(emails, e.Value)
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO person_emails (email, person_id) VALUES (?, ?)`, NormalizeEmail(e.Value), id); err != nil {
			return fmt.Errorf("index emails of %s: %w", p.UID, err)
		}
	}
	for _, ph := range p.Phones {
		phones = append(phones, ph.Value)
	}
	for _, s := range p.Sources {
		if _, err := tx.ExecContext(ctx, `INSERT INTO person_sources (person_id, source, source_id, native_id) VALUES (?, ?, ?, ?)`,
			id, s.Source, s.SourceID, s.NativeID); err != nil {
			return fmt.Errorf("index sources of %s: %w", p.UID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO people_fts (rowid, name, nickname, organization, title, notes, emails, phones)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, search.Fold(strings.Join(nonEmpty(p.Name, p.First, p.Last), " ")), search.Fold(p.Nickname),
		search.Fold(strings.Join(nonEmpty(p.Org, p.Department), " ")), search.Fold(p.Title), search.Fold(p.Notes),
		search.Fold(strings.Join(emails, " ")), strings.Join(phones, " ")); err != nil {
		return fmt.Errorf("index search text of %s: %w", p.UID, err)
	}
	return nil
}

// State returns the last completed run, or zero values before the first.
func (x *Index) State(ctx context.Context) (generation int64, completedAt time.Time, complete bool, err error) {
	m, err := indexfile.LastBuild(ctx, x.db)
	if m == nil || err != nil {
		return 0, time.Time{}, false, err
	}
	return m.Generation, m.CompletedAt, m.Complete, nil
}
