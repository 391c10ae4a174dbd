package mirror

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

// classModelConfigured marks a mailbox_classes row that records a mail.yaml
// role rather than a model's answer, so the System note does not list it.
const classModelConfigured = "mail.yaml"

// loadClasses adds the cached model roles of the account's mailboxes to its
// role map, below mail.yaml and the name table: a configured name keeps its
// configured role, and a name the table knows never reaches the model.
func (s *Store) loadClasses(ctx context.Context, st *accountState) error {
	st.configured = st.cfg.Roles
	roles := make(map[string]string, len(st.cfg.Roles))
	for k, v := range st.cfg.Roles {
		roles[k] = v
	}
	st.cfg.Roles = roles
	rows, err := s.db.QueryContext(ctx, "SELECT name, role FROM mailbox_classes WHERE account_id = ? AND model != ?", st.id, classModelConfigured)
	if err != nil {
		return fmt.Errorf("load mailbox roles of %s: %w", st.cfg.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, role string
		if err := rows.Scan(&name, &role); err != nil {
			return err
		}
		if _, configured := st.configured[roleKey(name)]; !configured && mail.ClassifyName(name) == mail.RoleNone {
			roles[roleKey(name)] = role
		}
	}
	return rows.Err()
}

// classifyMailboxes gives the walked entries of mailboxes that neither
// mail.yaml nor the name table can tell the role the classifier answers,
// once per mailbox: the answer is cached in mailbox_classes and in the
// account's role map, and an existing mailbox row is updated. With no
// classifier such mailboxes stay ordinary folders and UnclassifiedMailboxes
// lists them.
func (s *Store) classifyMailboxes(ctx context.Context, accounts []*accountState, entries []source.Entry) {
	byName := map[string]*accountState{}
	siblings := map[string][]string{}
	type key struct{ account, mailbox string }
	var todo []key
	seen := map[key]bool{}
	for _, a := range accounts {
		byName[a.cfg.Name] = a
	}
	for _, e := range entries {
		a := byName[e.Account]
		k := key{e.Account, e.Mailbox}
		if a == nil || seen[k] {
			continue
		}
		seen[k] = true
		siblings[e.Account] = append(siblings[e.Account], e.Mailbox)
		if r, configured := a.configured[roleKey(e.Mailbox)]; configured {
			if mail.Role(r) == mail.RoleNone {
				s.recordClass(ctx, a, e.Mailbox, mail.RoleNone, classModelConfigured)
			}
			continue
		}
		if _, learned := a.cfg.Roles[roleKey(e.Mailbox)]; !learned && e.Role == mail.RoleNone {
			todo = append(todo, k)
		}
	}
	if s.classifier == nil || len(todo) == 0 {
		return
	}
	learned := map[key]mail.Role{}
	for _, k := range todo {
		a := byName[k.account]
		var sib []string
		for _, n := range siblings[k.account] {
			if n != k.mailbox {
				sib = append(sib, n)
			}
		}
		sort.Strings(sib)
		role, err := s.classifier.ClassifyMailbox(ctx, mail.ClassifyRequest{Account: k.account, Mailbox: k.mailbox, Siblings: sib})
		if err != nil {
			s.log.Warn("mailbox role classification failed; it stays an ordinary folder and is asked again when the mailbox is next read",
				"account", k.account, "mailbox", k.mailbox, "err", err)
			continue
		}
		if !s.recordClass(ctx, a, k.mailbox, role, s.classifyModel) {
			continue
		}
		a.cfg.Roles[roleKey(k.mailbox)] = string(role)
		learned[k] = role
		if role != mail.RoleNone {
			s.log.Info("mailbox role classified", "account", k.account, "mailbox", k.mailbox, "role", role)
		}
		if mb, ok := a.mailboxes[k.mailbox]; ok && mb.role != role {
			if _, err := s.db.ExecContext(ctx, "UPDATE mailboxes SET role = ? WHERE id = ?", string(role), mb.id); err != nil {
				s.log.Warn("could not store a mailbox role", "mailbox", k.mailbox, "err", err)
				continue
			}
			mb.role = role
			a.mailboxes[k.mailbox] = mb
		}
	}
	for i := range entries {
		if r, ok := learned[key{entries[i].Account, entries[i].Mailbox}]; ok {
			entries[i].Role = r
		}
	}
}

// recordClass caches one mailbox's role; it reports whether that worked.
func (s *Store) recordClass(ctx context.Context, a *accountState, name string, role mail.Role, model string) bool {
	_, err := s.db.ExecContext(ctx, `INSERT INTO mailbox_classes(account_id, name, role, model, classified_at) VALUES(?, ?, ?, ?, ?)
		ON CONFLICT(account_id, name) DO UPDATE SET role = excluded.role, model = excluded.model, classified_at = excluded.classified_at`,
		a.id, name, string(role), model, s.now().Unix())
	if err != nil {
		s.log.Warn("could not cache a mailbox role", "mailbox", name, "err", err)
	}
	return err == nil
}

// UnclassifiedMailboxes lists, as "account/mailbox", the mailboxes in db
// that have no role and were neither classified by the model nor named in
// mail.yaml: with MAIL_CLASSIFY_ENDPOINT off they are read as ordinary
// folders, which the System page says. db may be a read-only connection.
func UnclassifiedMailboxes(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT a.name, b.name FROM mailboxes b JOIN accounts a ON a.id = b.account_id
		WHERE b.role = '' AND NOT EXISTS (SELECT 1 FROM mailbox_classes c WHERE c.account_id = b.account_id AND c.name = b.name)
		ORDER BY a.name, b.name`)
	if err != nil {
		return nil, fmt.Errorf("list unclassified mailboxes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		out = append(out, a+"/"+b)
	}
	return out, rows.Err()
}

// roleKey is how mail.yaml role names are keyed (see mail.Config.Validate).
func roleKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }
