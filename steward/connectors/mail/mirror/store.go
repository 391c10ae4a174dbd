// Package mirror keeps the local mail mirror: STEWARD_HOME/mail/mail.db (a
// SQLite file of accounts, mailboxes, messages with every physical path,
// threads, attachment metadata, FTS5 and trigram indexes and embedding state)
// and STEWARD_HOME/mail/blobs (attachment bytes by SHA-256).
//
// Message rows are the normalised record; every index is derived from them
// and can be rebuilt (Reindex). Files on disk are the truth: Sync in
// reconcile mode converges the mirror on them, and a watch only speeds that up.
package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// DefaultEmbedMaxChars is the cap on an embedding's source text (MAIL_EMBED_MAX_CHARS).
const DefaultEmbedMaxChars = 2000

// Paths returns the mirror's database file and blob folder under home.
func Paths(home string) (db, blobs string) {
	return filepath.Join(home, "mail", "mail.db"), filepath.Join(home, "mail", "blobs")
}

// Options configure a Store.
type Options struct {
	// DBPath is the mail.db file; BlobDir the attachment store.
	DBPath, BlobDir string
	// Accounts are the configured accounts; their rows are created on Open.
	Accounts []mail.Account
	// EmbedMaxChars caps the embedding source text (default 2,000 characters).
	EmbedMaxChars int
	Log           *slog.Logger
	// Classifier, when set, names the role of mailboxes that neither
	// mail.yaml nor the name table can tell (MAIL_CLASSIFY_ENDPOINT);
	// ClassifyModel is recorded with each answer.
	Classifier    mail.MailboxClassifier
	ClassifyModel string
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// Store is an open mirror.
type Store struct {
	db       *sql.DB
	blobs    *Blobs
	log      *slog.Logger
	now      func() time.Time
	maxChars int

	classifier    mail.MailboxClassifier
	classifyModel string

	mu       sync.Mutex
	accounts map[string]*accountState // by name
	// writeMu serialises the jobs that write message rows (sync, watch,
	// reindex); it also guards the mailbox caches.
	writeMu sync.Mutex
	stmts   stmtCache
}

type accountState struct {
	id        int64
	cfg       mail.Account
	mailboxes map[string]mailboxInfo // by name
	// configured are mail.yaml's roles; cfg.Roles adds the model's.
	configured map[string]string
}

type mailboxInfo struct {
	id   int64
	role mail.Role
}

// Open opens (creating and migrating if needed) the mirror.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.DBPath == "" || opts.BlobDir == "" {
		return nil, errors.New("open mail mirror: database path and blob folder are required")
	}
	// A 64 MiB page cache keeps index pages of a large archive warm while
	// ingesting; set with the connection's other pragmas, it costs no
	// statement of its own.
	db, err := sqlitedb.Open(ctx, opts.DBPath, sqlitedb.Options{Migrations: migrations, CacheKiB: 64 << 10})
	if err != nil {
		return nil, fmt.Errorf("open mail mirror: %w", err)
	}
	// Let FTS5 gather 32 MiB of pending terms per table before it writes a
	// segment: fewer, larger segments mean far less merging during a backfill.
	for _, t := range []string{"message_fts", "message_tri"} {
		// Set once: a write at every open would cost a commit to each
		// short-lived command (an unchanged reconcile is mostly start-up).
		var cur int64
		db.QueryRowContext(ctx, "SELECT v FROM "+t+"_config WHERE k = 'hashsize'").Scan(&cur)
		if cur == 33554432 {
			continue
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+t+"("+t+", rank) VALUES('hashsize', 33554432)"); err != nil {
			db.Close()
			return nil, fmt.Errorf("open mail mirror: %w", err)
		}
	}
	blobs, err := NewBlobs(opts.BlobDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, blobs: blobs, log: opts.Log, now: opts.Now, maxChars: opts.EmbedMaxChars, accounts: map[string]*accountState{},
		classifier: opts.Classifier, classifyModel: opts.ClassifyModel}
	s.stmts.db = db
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxChars <= 0 {
		s.maxChars = DefaultEmbedMaxChars
	}
	if err := s.loadAccounts(ctx, opts.Accounts); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.ensureEmbedHashes(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// A killed writer can leave queued index changes; applying an empty
	// queue would still open both FTS5 tables and start a write, which is
	// most of an unchanged reconcile's database time.
	var queued bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM fts_queue)").Scan(&queued); err != nil {
		db.Close()
		return nil, fmt.Errorf("open mail mirror: %w", err)
	}
	if queued {
		if err := s.flushFTS(ctx, db); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.stmts.close()
	return s.db.Close()
}

// flushFTS applies the queued index changes; call it before every commit of
// a transaction that may have changed message text or deletion state.
func (s *Store) flushFTS(ctx context.Context, q execer) error {
	for _, stmt := range strings.Split(strings.TrimSpace(flushFTSSQL), ";\n") {
		if _, err := q.ExecContext(ctx, strings.TrimSuffix(strings.TrimSpace(stmt), ";")); err != nil {
			return fmt.Errorf("update mail text indexes: %w", err)
		}
	}
	return nil
}

// commit flushes the index queue and commits tx.
func (s *Store) commit(ctx context.Context, tx *sql.Tx) error {
	if err := s.flushFTS(ctx, s.q(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

// q wraps a write transaction with the statement cache.
func (s *Store) q(tx *sql.Tx) execer { return txq{tx: tx, cache: &s.stmts} }

// DB returns the read-write connection pool (one connection: SQLite has one writer).
func (s *Store) DB() *sql.DB { return s.db }

// Blobs returns the attachment store.
func (s *Store) Blobs() *Blobs { return s.blobs }

// Account returns the configuration of the named account.
func (s *Store) Account(name string) (mail.Account, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[name]
	if !ok {
		return mail.Account{}, false
	}
	return a.cfg, true
}

func (s *Store) loadAccounts(ctx context.Context, accts []mail.Account) error {
	for _, a := range accts {
		st := &accountState{cfg: a, mailboxes: map[string]mailboxInfo{}}
		// Only a new or changed account is written: every short-lived
		// command opens the mirror, and a write costs it a WAL commit.
		var kind, root string
		err := s.db.QueryRowContext(ctx, "SELECT id, kind, root FROM accounts WHERE name = ?", a.Name).Scan(&st.id, &kind, &root)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("register account %s: %w", a.Name, err)
		}
		if err != nil || kind != a.Kind || root != a.Root {
			if _, err := s.db.ExecContext(ctx, `INSERT INTO accounts(name, kind, root) VALUES(?, ?, ?)
			ON CONFLICT(name) DO UPDATE SET kind = excluded.kind, root = excluded.root`, a.Name, a.Kind, a.Root); err != nil {
				return fmt.Errorf("register account %s: %w", a.Name, err)
			}
			if err := s.db.QueryRowContext(ctx, "SELECT id FROM accounts WHERE name = ?", a.Name).Scan(&st.id); err != nil {
				return fmt.Errorf("register account %s: %w", a.Name, err)
			}
		}
		rows, err := s.db.QueryContext(ctx, "SELECT id, name, role FROM mailboxes WHERE account_id = ?", st.id)
		if err != nil {
			return fmt.Errorf("load mailboxes of %s: %w", a.Name, err)
		}
		for rows.Next() {
			var id int64
			var name, role string
			if err := rows.Scan(&id, &name, &role); err != nil {
				rows.Close()
				return err
			}
			st.mailboxes[name] = mailboxInfo{id: id, role: mail.Role(role)}
		}
		rows.Close()
		if err := s.loadClasses(ctx, st); err != nil {
			return err
		}
		s.accounts[a.Name] = st
	}
	return nil
}

// mailbox returns the mailbox row for name, creating it or updating its role.
func (s *Store) mailbox(ctx context.Context, q execer, acct *accountState, name string, role mail.Role) (mailboxInfo, error) {
	if mb, ok := acct.mailboxes[name]; ok && mb.role == role {
		return mb, nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO mailboxes(account_id, name, role) VALUES(?, ?, ?)
		ON CONFLICT(account_id, name) DO UPDATE SET role = excluded.role`, acct.id, name, string(role)); err != nil {
		return mailboxInfo{}, fmt.Errorf("register mailbox %s/%s: %w", acct.cfg.Name, name, err)
	}
	var mb mailboxInfo
	if err := q.QueryRowContext(ctx, "SELECT id FROM mailboxes WHERE account_id = ? AND name = ?", acct.id, name).Scan(&mb.id); err != nil {
		return mailboxInfo{}, err
	}
	mb.role = role
	acct.mailboxes[name] = mb
	return mb, nil
}

// forgetMailboxes empties the mailbox caches after a rollback.
func (s *Store) forgetMailboxes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		a.mailboxes = map[string]mailboxInfo{}
	}
}

// execer is what both *sql.DB and *sql.Tx provide.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) meta(ctx context.Context, q execer, key string) (string, error) {
	return metaValue(ctx, q, key)
}

// metaValue reads a meta key; a missing key is "".
func metaValue(ctx context.Context, q execer, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (s *Store) setMeta(ctx context.Context, q execer, key, value string) error {
	_, err := q.ExecContext(ctx, "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
	return err
}

// Stats summarises the mirror.
type Stats struct {
	Messages      int64  `json:"messages"`
	Deleted       int64  `json:"deleted"`
	Threads       int64  `json:"threads"`
	Paths         int64  `json:"paths"`
	Attachments   int64  `json:"attachments"`
	PartialBodies int64  `json:"partialBodies"`
	NoBodies      int64  `json:"noBodies"`
	Embedded      int64  `json:"embedded"`
	PendingEmbeds int64  `json:"pendingEmbeddings"`
	IngestErrors  int64  `json:"ingestErrors"`
	VectorDim     int    `json:"vectorDimension,omitempty"`
	VectorModel   string `json:"vectorModel,omitempty"`
}

// Stats counts what the mirror holds.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM messages WHERE deleted_at IS NULL),
		(SELECT count(*) FROM messages WHERE deleted_at IS NOT NULL),
		(SELECT count(*) FROM threads WHERE message_count > 0),
		(SELECT count(*) FROM message_paths),
		(SELECT count(*) FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.deleted_at IS NULL),
		(SELECT count(*) FROM messages WHERE deleted_at IS NULL AND body_state = 'partial'),
		(SELECT count(*) FROM messages WHERE deleted_at IS NULL AND body_state = 'none'),
		(SELECT count(*) FROM embed_state e JOIN messages m ON m.id = e.message_id WHERE m.deleted_at IS NULL AND e.source_hash = m.embed_hash),
		(SELECT count(*) FROM ingest_errors)`).Scan(&st.Messages, &st.Deleted, &st.Threads, &st.Paths, &st.Attachments,
		&st.PartialBodies, &st.NoBodies, &st.Embedded, &st.IngestErrors)
	if err != nil {
		return st, fmt.Errorf("count mirror: %w", err)
	}
	st.PendingEmbeds = st.Messages - st.Embedded
	dim, _ := s.meta(ctx, s.db, "vec_dim")
	fmt.Sscan(dim, &st.VectorDim)
	st.VectorModel, _ = s.meta(ctx, s.db, "vec_model")
	return st, nil
}

// IngestError is a file that could not be mirrored.
type IngestError struct {
	Path    string    `json:"path"`
	Account string    `json:"account"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
}

// IngestErrors lists files that could not be read, newest first.
func (s *Store) IngestErrors(ctx context.Context, limit int) ([]IngestError, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT path, account, error, at FROM ingest_errors ORDER BY at DESC, path LIMIT ?", limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []IngestError
	for rows.Next() {
		var e IngestError
		var at int64
		if err := rows.Scan(&e.Path, &e.Account, &e.Error, &at); err != nil {
			return nil, err
		}
		e.At = time.Unix(at, 0)
		out = append(out, e)
	}
	return out, rows.Err()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func joinAddrs(list []string) string { return strings.Join(list, ", ") }
