// Package threadstest builds real mail mirrors from generated Maildir
// messages for the tests of packages that read threads (promotion, the
// Action Center): the messages are rendered as RFC 5322 files, ingested by
// the mirror exactly as a user's mail is, and read back through threads.
package threadstest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
)

// Message is a generated message: ID, From ("Name <addr>"), To, Subject,
// Body, Date, InReplyTo/References for threading, Headers for extra raw
// header lines (List-Id, Precedence, Auto-Submitted) and attachments.
type Message = archive.Message

// Attachment is a generated attachment.
type Attachment = archive.Attachment

// Options configure New.
type Options struct {
	// Home is the STEWARD_HOME the mirror lives in (mail/mail.db and
	// mail/blobs, as mirror.Paths says); default a fresh temporary folder.
	Home string
	// Account names the account (default "personal"); Addresses are the
	// user's own addresses (default me@example.com).
	Account   string
	Addresses []string
}

// Mirror is a Maildir account and the mirror built from it.
type Mirror struct {
	// DBPath and BlobDir are the mirror's files; Root is the Maildir.
	DBPath, BlobDir, Root string
	Account              mail.Account
	md                   *archive.Maildir
	store                *mirror.Store
}

// New creates an empty Maildir and opens its mirror; the mirror is closed
// when the test ends.
func New(t testing.TB, opts Options) *Mirror {
	t.Helper()
	if opts.Home == "" {
		opts.Home = t.TempDir()
	}
	if opts.Account == "" {
		opts.Account = "personal"
	}
	if len(opts.Addresses) == 0 {
		opts.Addresses = []string{"me@example.com"}
	}
	root := filepath.Join(opts.Home, "Maildir-"+opts.Account)
	acct := mail.Account{Name: opts.Account, Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto, Addresses: opts.Addresses}
	db, blobs := mirror.Paths(opts.Home)
	s, err := mirror.Open(context.Background(), mirror.Options{DBPath: db, BlobDir: blobs, Accounts: []mail.Account{acct}})
	if err != nil {
		t.Fatalf("open mirror: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &Mirror{DBPath: db, BlobDir: blobs, Root: root, Account: acct, md: &archive.Maildir{Root: root}, store: s}
}

// Add writes msg into mailbox ("INBOX", "Sent", "Junk", "Trash", "Drafts"
// or any folder) with Maildir flags ("" = new and unread, "S" = seen). It
// returns the file's path. Call Sync to ingest.
func (m *Mirror) Add(t testing.TB, mailbox string, msg Message, flags string) string {
	t.Helper()
	p, err := m.md.Add(mailbox, msg, flags)
	if err != nil {
		t.Fatalf("write message %s: %v", msg.ID, err)
	}
	return p
}

// Sync reconciles the mirror with the Maildir and returns what changed.
func (m *Mirror) Sync(t testing.TB) mirror.SyncStats {
	t.Helper()
	st, err := m.store.Sync(context.Background(), mirror.SyncOptions{Mode: mirror.Reconcile})
	if err != nil {
		t.Fatalf("sync mirror: %v", err)
	}
	return st
}

// Store is the open mirror, for tests that need more (blobs, embedding).
func (m *Mirror) Store() *mirror.Store { return m.store }
