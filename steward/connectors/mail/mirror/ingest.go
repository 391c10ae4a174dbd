package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

// idShift makes message ids date-ordered: id = unix seconds << idShift | n.
const idShift = 20

// maxWarnings bounds the warnings kept on a message row.
const maxWarnings = 2000

// ingestResult says what applying one file did.
type ingestResult int

const (
	ingestedNew ingestResult = iota
	ingestedUpdated
	ingestedPathOnly
)

// row is a parsed message in the shape of a messages row.
type row struct {
	identity, messageID       string
	subject, subjectNorm      string
	fromName, fromAddr        string
	toText, ccText, bccText   string
	inReplyTo, refs           string
	gmThread                  string
	appleConv                 int64
	remoteID                  string
	date                      int64
	size                      int64
	flags                     source.Flags
	fromMe, hasAttachments    bool
	body, bodyState, warnings string
	contentHash, embedHash    string
	participants              []string
	parents                   []string
	attachments               []message.Attachment
	listID, precedence        string
	autoSubmitted             string
}

func formatAddrs(list []message.Address) string {
	parts := make([]string, 0, len(list))
	for _, a := range list {
		parts = append(parts, a.String())
	}
	return joinAddrs(parts)
}

func (s *Store) makeRow(acct *accountState, mailboxName string, it *source.Item) row {
	m := it.Msg
	r := row{
		identity:  Identity(m.MessageID, acct.cfg.Name, mailboxName, it.Key),
		messageID: m.MessageID, subject: m.Subject, subjectNorm: NormalizeSubject(m.Subject),
		fromName: m.From.Name, fromAddr: m.From.Addr,
		toText: formatAddrs(m.To), ccText: formatAddrs(m.Cc), bccText: formatAddrs(m.Bcc),
		inReplyTo: strings.Join(m.InReplyTo, " "), refs: strings.Join(m.References, " "),
		gmThread: m.GmailThreadID, appleConv: it.ConversationID, remoteID: it.RemoteID,
		size: it.Size, flags: it.Flags, body: m.Text, bodyState: it.BodyState,
		attachments: m.Attachments,
		listID:      m.ListID, precedence: m.Precedence, autoSubmitted: m.AutoSubmitted,
	}
	if it.Size == 0 {
		r.size = m.Size
	}
	switch {
	case !m.Date.IsZero():
		r.date = m.Date.Unix()
	default:
		r.date = it.MTime.Unix()
	}
	r.date = max(0, min(r.date, 1<<33))
	r.fromMe = acct.cfg.Owns(m.From.Addr)
	for _, a := range m.Attachments {
		if !a.Inline || !strings.HasPrefix(a.ContentType, "image/") {
			r.hasAttachments = true
		}
	}
	seen := map[string]bool{}
	for _, list := range [][]message.Address{{m.From}, m.To, m.Cc} {
		for _, a := range list {
			if a.Addr != "" && !seen[a.Addr] {
				seen[a.Addr] = true
				r.participants = append(r.participants, a.Addr)
			}
		}
	}
	r.parents = append(r.parents, m.InReplyTo...)
	for i := len(m.References) - 1; i >= 0; i-- {
		r.parents = append(r.parents, m.References[i])
	}
	w := strings.Join(it.Warnings, "; ")
	if len(w) > maxWarnings {
		w = w[:maxWarnings] + "…"
	}
	r.warnings = w
	r.contentHash = contentHash(r.subject, r.fromName, r.fromAddr, r.toText, r.ccText, r.bccText, r.body, r.bodyState,
		r.inReplyTo, r.refs, attachmentKey(r.attachments))
	r.embedHash = SourceHash(EmbedSource(r.subject, r.body, s.maxChars))
	return r
}

func attachmentKey(list []message.Attachment) string {
	var b strings.Builder
	for _, a := range list {
		fmt.Fprintf(&b, "%s|%s|%s|%d;", a.Part, a.Filename, a.SHA256, a.Size)
	}
	return b.String()
}

// existing is the stored state of a message identity.
type existing struct {
	id, mailboxID int64
	thread        sql.NullInt64
	contentHash   string
	deleted       bool
	role          mail.Role
	date          int64
	bodyState     string
}

// bodyRank orders body states: a copy never replaces a fuller body.
func bodyRank(state string) int {
	switch state {
	case source.BodyFull:
		return 2
	case source.BodyPartial:
		return 1
	}
	return 0
}

// applyItem writes one parsed file into the mirror inside tx.
func (s *Store) applyItem(ctx context.Context, tx execer, it *source.Item) (ingestResult, error) {
	acct, ok := s.accounts[it.Account]
	if !ok {
		return 0, fmt.Errorf("account %q is not configured", it.Account)
	}
	mb, err := s.mailbox(ctx, tx, acct, it.Mailbox, it.Role)
	if err != nil {
		return 0, err
	}
	r := s.makeRow(acct, it.Mailbox, it)
	now := s.now().Unix()

	var ex existing
	var deletedAt sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT m.id, m.mailbox_id, m.thread_id, m.content_hash, m.deleted_at, b.role, m.date, m.body_state
		FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.account_id = ? AND m.identity = ?`, acct.id, r.identity).
		Scan(&ex.id, &ex.mailboxID, &ex.thread, &ex.contentHash, &deletedAt, &ex.role, &ex.date, &ex.bodyState)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("look up message %s: %w", r.identity, err)
	}
	ex.deleted = deletedAt.Valid

	var result ingestResult
	var msgID int64
	switch {
	case !found:
		msgID, err = s.insertMessage(ctx, tx, acct, mb, r, now)
		result = ingestedNew
	case !ex.deleted && it.Role.Specificity() < ex.role.Specificity():
		// An All Mail copy never overwrites a row attributed to a more
		// specific mailbox: only its path is recorded.
		msgID, result = ex.id, ingestedPathOnly
	default:
		msgID, result = ex.id, ingestedUpdated
		err = s.updateMessage(ctx, tx, acct, mb, r, ex, now)
	}
	if err != nil {
		return 0, err
	}
	if err := s.recordPath(ctx, tx, it.Entry, msgID, mb.id, now); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM ingest_errors WHERE path = ?", it.Path); err != nil {
		return 0, err
	}
	return result, nil
}

// allocID returns a free date-ordered id for a message dated date.
func allocID(ctx context.Context, tx execer, date int64) (int64, error) {
	for sec := date; ; sec++ {
		base := sec << idShift
		var maxID sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT max(id) FROM messages WHERE id BETWEEN ? AND ?", base, base|(1<<idShift-1)).Scan(&maxID); err != nil {
			return 0, fmt.Errorf("allocate message id: %w", err)
		}
		if !maxID.Valid {
			return base, nil
		}
		if maxID.Int64 < base|(1<<idShift-1) {
			return maxID.Int64 + 1, nil
		}
	}
}

func (s *Store) insertMessage(ctx context.Context, tx execer, acct *accountState, mb mailboxInfo, r row, now int64) (int64, error) {
	id, err := allocID(ctx, tx, r.date)
	if err != nil {
		return 0, err
	}
	thread, _, err := resolveThread(ctx, tx, threadInput{accountID: acct.id, messageID: r.messageID, parents: r.parents,
		gmThreadID: r.gmThread, subjectNorm: r.subjectNorm, participants: r.participants, owned: ownedSet(acct.cfg), date: r.date})
	if err != nil {
		return 0, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO messages(id, account_id, identity, message_id, mailbox_id, thread_id, subject, subject_norm,
		from_name, from_addr, to_text, cc_text, bcc_text, in_reply_to, refs, gm_thread_id, apple_conv_id, remote_id, date, size,
		seen, flagged, answered, draft, forwarded, junk, from_me, has_attachments, body, body_state, content_hash, embed_hash, warnings,
		ingested_at, updated_at, list_id, precedence, auto_submitted)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, 0), NULLIF(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, acct.id, r.identity, r.messageID, mb.id, thread, r.subject, r.subjectNorm,
		r.fromName, r.fromAddr, r.toText, r.ccText, r.bccText, r.inReplyTo, r.refs, r.gmThread, r.appleConv, r.remoteID, r.date, r.size,
		boolInt(r.flags.Seen), boolInt(r.flags.Flagged), boolInt(r.flags.Answered), boolInt(r.flags.Draft), boolInt(r.flags.Forwarded),
		boolInt(r.flags.Junk), boolInt(r.fromMe), boolInt(r.hasAttachments), r.body, r.bodyState, r.contentHash, r.embedHash, r.warnings, now, now,
		r.listID, r.precedence, r.autoSubmitted)
	if err != nil {
		return 0, fmt.Errorf("insert message %s: %w", r.identity, err)
	}
	if err := s.writeRefsAndAttachments(ctx, tx, id, r); err != nil {
		return 0, err
	}
	if err := addParticipants(ctx, tx, thread, r.participants); err != nil {
		return 0, err
	}
	if r.gmThread != "" {
		if _, err := tx.ExecContext(ctx, "UPDATE threads SET gm_thread_id = ? WHERE id = ? AND gm_thread_id IS NULL", r.gmThread, thread); err != nil {
			return 0, err
		}
	}
	return id, refreshThread(ctx, tx, thread)
}

func ownedSet(a mail.Account) map[string]bool {
	out := make(map[string]bool, len(a.Addresses))
	for _, x := range a.Addresses {
		out[x] = true
	}
	return out
}

func (s *Store) writeRefsAndAttachments(ctx context.Context, tx execer, id int64, r row) error {
	for _, p := range r.parents {
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO message_refs(ref, message_id) VALUES(?, ?)", p, id); err != nil {
			return fmt.Errorf("record references: %w", err)
		}
	}
	for _, a := range r.attachments {
		var sha any
		if !a.Missing && a.SHA256 != "" {
			sha = a.SHA256
		}
		var declared any
		if a.DeclaredSize > 0 {
			declared = a.DeclaredSize
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO attachments(message_id, part, filename, content_type, size, sha256, inline, declared_size)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(message_id, part) DO NOTHING`,
			id, a.Part, a.Filename, a.ContentType, a.Size, sha, boolInt(a.Inline), declared); err != nil {
			return fmt.Errorf("record attachment %s: %w", a.Part, err)
		}
	}
	return nil
}

// updateMessage refreshes a stored message from a newer or more specific copy.
func (s *Store) updateMessage(ctx context.Context, tx execer, acct *accountState, mb mailboxInfo, r row, ex existing, now int64) error {
	mailboxID := ex.mailboxID
	if ex.deleted || mb.role.Specificity() > ex.role.Specificity() {
		mailboxID = mb.id
	}
	if _, err := tx.ExecContext(ctx, `UPDATE messages SET mailbox_id = ?, seen = ?, flagged = ?, answered = ?, draft = ?, forwarded = ?,
		junk = ?, updated_at = ? WHERE id = ?`, mailboxID, boolInt(r.flags.Seen), boolInt(r.flags.Flagged), boolInt(r.flags.Answered),
		boolInt(r.flags.Draft), boolInt(r.flags.Forwarded), boolInt(r.flags.Junk), now, ex.id); err != nil {
		return fmt.Errorf("update flags of %s: %w", r.identity, err)
	}
	if r.contentHash != ex.contentHash && (ex.deleted || bodyRank(r.bodyState) >= bodyRank(ex.bodyState)) {
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET subject = ?, subject_norm = ?, from_name = ?, from_addr = ?, to_text = ?,
			cc_text = ?, bcc_text = ?, in_reply_to = ?, refs = ?, gm_thread_id = NULLIF(?, ''), date = ?, size = ?, from_me = ?,
			has_attachments = ?, body = ?, body_state = ?, content_hash = ?, embed_hash = ?, warnings = ?,
			list_id = ?, precedence = ?, auto_submitted = ? WHERE id = ?`,
			r.subject, r.subjectNorm, r.fromName, r.fromAddr, r.toText, r.ccText, r.bccText, r.inReplyTo, r.refs, r.gmThread, r.date, r.size,
			boolInt(r.fromMe), boolInt(r.hasAttachments), r.body, r.bodyState, r.contentHash, r.embedHash, r.warnings,
			r.listID, r.precedence, r.autoSubmitted, ex.id); err != nil {
			return fmt.Errorf("update message %s: %w", r.identity, err)
		}
		for _, q := range []string{"DELETE FROM message_refs WHERE message_id = ?", "DELETE FROM attachments WHERE message_id = ?"} {
			if _, err := tx.ExecContext(ctx, q, ex.id); err != nil {
				return err
			}
		}
		if err := s.writeRefsAndAttachments(ctx, tx, ex.id, r); err != nil {
			return err
		}
	}
	if ex.deleted {
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET deleted_at = NULL WHERE id = ?", ex.id); err != nil {
			return err
		}
	}
	thread := ex.thread.Int64
	if !ex.thread.Valid {
		t, _, err := resolveThread(ctx, tx, threadInput{accountID: acct.id, messageID: r.messageID, parents: r.parents,
			gmThreadID: r.gmThread, subjectNorm: r.subjectNorm, participants: r.participants, owned: ownedSet(acct.cfg), date: r.date})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET thread_id = ? WHERE id = ?", t, ex.id); err != nil {
			return err
		}
		thread = t
	}
	if err := addParticipants(ctx, tx, thread, r.participants); err != nil {
		return err
	}
	if ex.deleted || !ex.thread.Valid || ex.date != r.date {
		return refreshThread(ctx, tx, thread)
	}
	return nil
}

// recordPath records that path holds message msgID. A path that held another
// message before (its content was replaced) leaves that message to the
// orphan check.
func (s *Store) recordPath(ctx context.Context, tx execer, e source.Entry, msgID, mailboxID, now int64) error {
	var prev sql.NullInt64
	err := tx.QueryRowContext(ctx, "SELECT message_id FROM message_paths WHERE path = ?", e.Path).Scan(&prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_paths(path, message_id, mailbox_id, file_key, mtime, size, seen_at)
		VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET message_id = excluded.message_id, mailbox_id = excluded.mailbox_id,
		file_key = excluded.file_key, mtime = excluded.mtime, size = excluded.size, seen_at = excluded.seen_at`,
		e.Path, msgID, mailboxID, e.Key, e.MTime.UnixNano(), e.Size, now); err != nil {
		return fmt.Errorf("record path %s: %w", e.Path, err)
	}
	if prev.Valid && prev.Int64 != msgID {
		return s.settleMessage(ctx, tx, prev.Int64, now)
	}
	return nil
}

// removePath forgets a vanished file. With settle, a message left without
// any path is soft-deleted at once; otherwise the caller settles later.
func (s *Store) removePath(ctx context.Context, tx execer, path string, settle bool) (msgID int64, err error) {
	err = tx.QueryRowContext(ctx, "DELETE FROM message_paths WHERE path = ? RETURNING message_id", path).Scan(&msgID)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = tx.ExecContext(ctx, "DELETE FROM ingest_errors WHERE path = ?", path)
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("remove path %s: %w", path, err)
	}
	if settle {
		return msgID, s.settleMessage(ctx, tx, msgID, s.now().Unix())
	}
	return msgID, nil
}

// settleMessage soft-deletes a message with no remaining path, or moves its
// attribution to the most specific mailbox that still holds it.
func (s *Store) settleMessage(ctx context.Context, tx execer, msgID, now int64) error {
	var mailboxID int64
	var thread sql.NullInt64
	var deleted sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT mailbox_id, thread_id, deleted_at FROM messages WHERE id = ?", msgID).Scan(&mailboxID, &thread, &deleted); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	var best sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT p.mailbox_id FROM message_paths p JOIN mailboxes b ON b.id = p.mailbox_id
		WHERE p.message_id = ? ORDER BY (b.role = 'all'), (p.mailbox_id != ?), p.mailbox_id LIMIT 1`, msgID, mailboxID).Scan(&best)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	switch {
	case !best.Valid && !deleted.Valid:
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET deleted_at = ?, updated_at = ? WHERE id = ?", now, now, msgID); err != nil {
			return fmt.Errorf("soft-delete message %d: %w", msgID, err)
		}
		if thread.Valid {
			return refreshThread(ctx, tx, thread.Int64)
		}
	case best.Valid && best.Int64 != mailboxID:
		_, err := tx.ExecContext(ctx, "UPDATE messages SET mailbox_id = ?, updated_at = ? WHERE id = ?", best.Int64, now, msgID)
		return err
	}
	return nil
}

// recordError notes a file that could not be read at all.
func (s *Store) recordError(ctx context.Context, q execer, e source.Entry, cause error) error {
	msg := cause.Error()
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	_, err := q.ExecContext(ctx, `INSERT INTO ingest_errors(path, account, mtime, size, error, at) VALUES(?, ?, ?, ?, ?, ?)
		ON CONFLICT(path) DO UPDATE SET mtime = excluded.mtime, size = excluded.size, error = excluded.error, at = excluded.at`,
		e.Path, e.Account, e.MTime.UnixNano(), e.Size, msg, s.now().Unix())
	return err
}
