package mirror

// The FTS tables are contentless: a row is removed with the text it was
// indexed with. Triggers therefore queue every change (the old text to
// delete, the new text to insert) in fts_queue, and flushFTS applies the
// queue in one statement per table just before each commit. Applying it
// row by row would make FTS5 flush its in-memory index at every statement
// that opens a statement journal, which costs more than the insert itself.
const (
	ftsQueueNew = `
  INSERT INTO fts_queue(op, id, subject, sender, recipients, cc, body)
    SELECT 'i', new.id, new.subject, new.from_name || ' ' || new.from_addr, new.to_text, new.cc_text, new.body WHERE new.deleted_at IS NULL;`
	ftsQueueOld = `
  INSERT INTO fts_queue(op, id, subject, sender, recipients, cc, body)
    SELECT 'd', old.id, old.subject, old.from_name || ' ' || old.from_addr, old.to_text, old.cc_text, old.body WHERE old.deleted_at IS NULL;`

	// flushFTSSQL moves the queue into both indexes, in queue order so that
	// a row's delete precedes its re-insert.
	flushFTSSQL = `
INSERT INTO message_fts(message_fts, rowid, subject, sender, recipients, body)
  SELECT CASE op WHEN 'd' THEN 'delete' END, id, subject, sender, recipients || ' ' || cc, body FROM fts_queue ORDER BY seq;
INSERT INTO message_tri(message_tri, rowid, sender, recipient, cc, subject, body)
  SELECT CASE op WHEN 'd' THEN 'delete' END, id, sender, recipients, cc, subject, body FROM fts_queue ORDER BY seq;
DELETE FROM fts_queue;`
)

// migrations is the mail.db schema history; never edit a released step, append one.
var migrations = []string{`
CREATE TABLE accounts(
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  root TEXT NOT NULL
);
CREATE TABLE mailboxes(
  id         INTEGER PRIMARY KEY,
  account_id INTEGER NOT NULL REFERENCES accounts(id),
  name       TEXT NOT NULL,
  role       TEXT NOT NULL DEFAULT '',
  UNIQUE(account_id, name)
);
CREATE TABLE threads(
  id            INTEGER PRIMARY KEY,
  account_id    INTEGER NOT NULL REFERENCES accounts(id),
  subject_norm  TEXT NOT NULL DEFAULT '',
  participants  TEXT NOT NULL DEFAULT '',
  first_at      INTEGER NOT NULL DEFAULT 0,
  last_at       INTEGER NOT NULL DEFAULT 0,
  message_count INTEGER NOT NULL DEFAULT 0,
  gm_thread_id  TEXT
);
CREATE INDEX threads_subject ON threads(account_id, subject_norm, last_at);
CREATE INDEX threads_gm ON threads(account_id, gm_thread_id) WHERE gm_thread_id IS NOT NULL;
CREATE TABLE thread_participants(
  thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  addr      TEXT NOT NULL,
  PRIMARY KEY(thread_id, addr)
) WITHOUT ROWID;

-- id is date-ordered (unix seconds << 20 | sequence) so that rowid order is
-- recency order in every index, including the FTS tables.
CREATE TABLE messages(
  id              INTEGER PRIMARY KEY,
  account_id      INTEGER NOT NULL REFERENCES accounts(id),
  identity        TEXT NOT NULL,
  message_id      TEXT NOT NULL DEFAULT '',
  mailbox_id      INTEGER NOT NULL REFERENCES mailboxes(id),
  thread_id       INTEGER REFERENCES threads(id),
  subject         TEXT NOT NULL DEFAULT '',
  subject_norm    TEXT NOT NULL DEFAULT '',
  from_name       TEXT NOT NULL DEFAULT '',
  from_addr       TEXT NOT NULL DEFAULT '',
  to_text         TEXT NOT NULL DEFAULT '',
  cc_text         TEXT NOT NULL DEFAULT '',
  bcc_text        TEXT NOT NULL DEFAULT '',
  in_reply_to     TEXT NOT NULL DEFAULT '',
  refs            TEXT NOT NULL DEFAULT '',
  gm_thread_id    TEXT,
  apple_conv_id   INTEGER,
  remote_id       TEXT,
  date            INTEGER NOT NULL,
  size            INTEGER NOT NULL DEFAULT 0,
  seen            INTEGER NOT NULL DEFAULT 0,
  flagged         INTEGER NOT NULL DEFAULT 0,
  answered        INTEGER NOT NULL DEFAULT 0,
  draft           INTEGER NOT NULL DEFAULT 0,
  forwarded       INTEGER NOT NULL DEFAULT 0,
  junk            INTEGER NOT NULL DEFAULT 0,
  from_me         INTEGER NOT NULL DEFAULT 0,
  has_attachments INTEGER NOT NULL DEFAULT 0,
  body            TEXT NOT NULL DEFAULT '',
  body_state      TEXT NOT NULL DEFAULT 'full',
  content_hash    TEXT NOT NULL DEFAULT '',
  embed_hash      TEXT NOT NULL DEFAULT '',
  warnings        TEXT NOT NULL DEFAULT '',
  ingested_at     INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  deleted_at      INTEGER,
  UNIQUE(account_id, identity)
);
CREATE INDEX messages_thread ON messages(thread_id, date);
CREATE INDEX messages_mailbox ON messages(mailbox_id, id);
CREATE INDEX messages_msgid ON messages(account_id, message_id);
CREATE INDEX messages_size ON messages(size);
CREATE INDEX messages_unread ON messages(id) WHERE seen = 0 AND deleted_at IS NULL;

-- In-Reply-To and References of every message, to find the replies already
-- stored when their parent arrives later (backfill runs newest first).
CREATE TABLE message_refs(
  ref        TEXT NOT NULL,
  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  PRIMARY KEY(ref, message_id)
) WITHOUT ROWID;
CREATE INDEX message_refs_message ON message_refs(message_id);

CREATE TABLE message_paths(
  path       TEXT PRIMARY KEY,
  message_id INTEGER NOT NULL REFERENCES messages(id),
  mailbox_id INTEGER NOT NULL REFERENCES mailboxes(id),
  file_key   TEXT NOT NULL,
  mtime      INTEGER NOT NULL,
  size       INTEGER NOT NULL,
  seen_at    INTEGER NOT NULL
);
CREATE INDEX message_paths_message ON message_paths(message_id);

CREATE TABLE attachments(
  id            INTEGER PRIMARY KEY,
  message_id    INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  part          TEXT NOT NULL,
  filename      TEXT NOT NULL,
  content_type  TEXT NOT NULL,
  size          INTEGER NOT NULL DEFAULT 0,
  sha256        TEXT,
  inline        INTEGER NOT NULL DEFAULT 0,
  declared_size INTEGER,
  UNIQUE(message_id, part)
);
CREATE INDEX attachments_sha ON attachments(sha256) WHERE sha256 IS NOT NULL;

CREATE TABLE ingest_errors(
  path    TEXT PRIMARY KEY,
  account TEXT NOT NULL,
  mtime   INTEGER NOT NULL,
  size    INTEGER NOT NULL,
  error   TEXT NOT NULL,
  at      INTEGER NOT NULL
);

CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- Embedding state: the source hash a vector was made from, and the vector
-- quantised to int8 (4-byte float32 scale, then one byte per dimension) for
-- the in-memory index; the full vector lives in the vec0 table message_vec.
CREATE TABLE embed_state(
  message_id  INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
  source_hash TEXT NOT NULL,
  model       TEXT NOT NULL,
  dim         INTEGER NOT NULL,
  embedded_at INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  q           BLOB NOT NULL
);
CREATE INDEX embed_state_seq ON embed_state(seq);

CREATE VIRTUAL TABLE message_fts USING fts5(subject, sender, recipients, body, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE message_tri USING fts5(sender, recipient, cc, subject, body, content='', tokenize='trigram');

CREATE TABLE fts_queue(
  seq        INTEGER PRIMARY KEY,
  op         TEXT NOT NULL,
  id         INTEGER NOT NULL,
  subject    TEXT NOT NULL,
  sender     TEXT NOT NULL,
  recipients TEXT NOT NULL,
  cc         TEXT NOT NULL,
  body       TEXT NOT NULL
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN` + ftsQueueNew + `
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN` + ftsQueueOld + `
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF subject, from_name, from_addr, to_text, cc_text, body, deleted_at ON messages BEGIN` + ftsQueueOld + ftsQueueNew + `
END;
`, `
-- Roles the model gave mailboxes that neither mail.yaml nor the name table
-- tells ('' = other), cached so each mailbox is classified once.
CREATE TABLE mailbox_classes(
  account_id    INTEGER NOT NULL REFERENCES accounts(id),
  name          TEXT NOT NULL,
  role          TEXT NOT NULL,
  model         TEXT NOT NULL DEFAULT '',
  classified_at INTEGER NOT NULL,
  PRIMARY KEY(account_id, name)
) WITHOUT ROWID;
`, `
-- Maildir cur/ and new/ directories as the last reconcile listed them: a
-- trusted directory whose modification time is unchanged holds the same
-- file names, so reconcile need not list it (as notmuch new does).
CREATE TABLE maildir_dirs(
  path    TEXT PRIMARY KEY,
  account TEXT NOT NULL,
  mtime   INTEGER NOT NULL,
  size    INTEGER NOT NULL,
  trusted INTEGER NOT NULL
);
`, `
-- List-Id, Precedence and Auto-Submitted of each message, for the noise
-- prefilters of promotion and the Action Center (threads.Prefilter).
-- Messages stored before this step keep '' until their file changes or a
-- reindex reads them again.
ALTER TABLE messages ADD COLUMN list_id TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN precedence TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN auto_submitted TEXT NOT NULL DEFAULT '';
`}
