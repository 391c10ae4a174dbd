package mail

import (
	"sort"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Role is what a mailbox is for, independent of its name in a given client or language.
type Role string

// Mailbox roles. RoleNone is an ordinary folder or label.
const (
	RoleNone    Role = ""
	RoleInbox   Role = "inbox"
	RoleSent    Role = "sent"
	RoleDrafts  Role = "drafts"
	RoleTrash   Role = "trash"
	RoleJunk    Role = "junk"
	RoleArchive Role = "archive"
	RoleAll     Role = "all"
)

var allRoles = []Role{RoleInbox, RoleSent, RoleDrafts, RoleTrash, RoleJunk, RoleArchive, RoleAll}

// Valid reports whether r is a known role (the empty role is valid: a plain folder).
func (r Role) Valid() bool {
	if r == RoleNone {
		return true
	}
	for _, k := range allRoles {
		if r == k {
			return true
		}
	}
	return false
}

// RoleNames lists the named roles.
func RoleNames() []string {
	out := make([]string, len(allRoles))
	for i, r := range allRoles {
		out[i] = string(r)
	}
	return out
}

// Specificity orders attributions: a message seen both in All Mail and in a
// specific mailbox stays attributed to the specific one.
func (r Role) Specificity() int {
	if r == RoleAll {
		return 0
	}
	return 1
}

// roleNames maps folder names, folded (lower case, accents removed), to
// roles. They cover the RFC 6154 special-use attribute names (\Sent,
// \Drafts…) and the names Gmail, Outlook/Exchange, Apple Mail, Thunderbird,
// Dovecot and Fastmail give the special folders in English, Italian, German,
// French and Spanish. A name that is a plain word in some language ("todos")
// is listed only where a client really uses it for that folder. The table is
// folded on first use (folding loads Unicode normalisation tables, which most
// processes of the binary never need).
var roleNames = sync.OnceValue(func() map[string]Role {
	return foldKeys(map[string]Role{
		// Inbox.
		"inbox": RoleInbox, "posta in arrivo": RoleInbox, "posteingang": RoleInbox, "boîte de réception": RoleInbox, "bandeja de entrada": RoleInbox,

		// Sent: en, it, de, fr, es.
		`\sent`: RoleSent, "sent": RoleSent, "sent messages": RoleSent, "sent mail": RoleSent, "sent items": RoleSent, "sent-mail": RoleSent,
		"posta inviata": RoleSent, "inviata": RoleSent, "inviati": RoleSent, "messaggi inviati": RoleSent, "elementi inviati": RoleSent,
		"gesendet": RoleSent, "gesendete objekte": RoleSent, "gesendete elemente": RoleSent, "gesendete nachrichten": RoleSent,
		"envoyés": RoleSent, "éléments envoyés": RoleSent, "messages envoyés": RoleSent, "courrier envoyé": RoleSent, "envoyé": RoleSent,
		"enviados": RoleSent, "elementos enviados": RoleSent, "correo enviado": RoleSent, "mensajes enviados": RoleSent, "enviado": RoleSent,

		// Drafts.
		`\drafts`: RoleDrafts, "drafts": RoleDrafts, "draft": RoleDrafts,
		"bozze": RoleDrafts, "bozza": RoleDrafts,
		"entwürfe": RoleDrafts, "entwurf": RoleDrafts,
		"brouillons": RoleDrafts, "brouillon": RoleDrafts,
		"borradores": RoleDrafts, "borrador": RoleDrafts,

		// Trash.
		`\trash`: RoleTrash, "trash": RoleTrash, "deleted messages": RoleTrash, "deleted items": RoleTrash, "deleted": RoleTrash, "bin": RoleTrash, "deleted mail": RoleTrash,
		"cestino": RoleTrash, "posta eliminata": RoleTrash, "elementi eliminati": RoleTrash, "messaggi eliminati": RoleTrash,
		"papierkorb": RoleTrash, "gelöschte objekte": RoleTrash, "gelöschte elemente": RoleTrash, "gelöschte nachrichten": RoleTrash,
		"corbeille": RoleTrash, "éléments supprimés": RoleTrash, "messages supprimés": RoleTrash,
		"papelera": RoleTrash, "elementos eliminados": RoleTrash, "mensajes eliminados": RoleTrash, "eliminados": RoleTrash,

		// Junk.
		`\junk`: RoleJunk, "junk": RoleJunk, "spam": RoleJunk, "junk e-mail": RoleJunk, "junk email": RoleJunk, "junk mail": RoleJunk, "bulk mail": RoleJunk,
		"posta indesiderata": RoleJunk, "indesiderata": RoleJunk, "indesiderati": RoleJunk, "posta indesiderata e spam": RoleJunk,
		"spamverdacht": RoleJunk, "junk-e-mail": RoleJunk, "unerwünscht": RoleJunk,
		"courrier indésirable": RoleJunk, "indésirables": RoleJunk, "pourriel": RoleJunk, "pourriels": RoleJunk,
		"correo no deseado": RoleJunk, "no deseado": RoleJunk, "correo basura": RoleJunk,

		// Archive.
		`\archive`: RoleArchive, "archive": RoleArchive, "archives": RoleArchive, "archived": RoleArchive,
		"archivio": RoleArchive, "archiviati": RoleArchive,
		"archiv": RoleArchive, "archiviert": RoleArchive,
		"archivé": RoleArchive, "archivés": RoleArchive,
		"archivo": RoleArchive, "archivados": RoleArchive, "archivado": RoleArchive,

		// All Mail (Gmail's label of every message, localised by Gmail).
		`\all`: RoleAll, "all mail": RoleAll, "all messages": RoleAll,
		"tutti i messaggi":  RoleAll,
		"alle nachrichten":  RoleAll,
		"tous les messages": RoleAll,
		"todos":             RoleAll,
	})
})

// foldKeys returns m with every key folded as FoldName folds a name.
func foldKeys(m map[string]Role) map[string]Role {
	out := make(map[string]Role, len(m))
	for k, r := range m {
		out[FoldName(k)] = r
	}
	return out
}

// FoldName is the form mailbox names are compared in: trimmed, lower case,
// accents removed and runs of white space collapsed, so "Éléments envoyés",
// "elements envoyes" and "ELEMENTS  ENVOYÉS" are one name.
func FoldName(name string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(strings.TrimSpace(name))) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(r)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// ClassifyMailbox returns the role of a mailbox from the account's configured
// roles, then from its full name, then from the last component of its
// hierarchical name ("[Gmail]/Sent Mail" → sent). Unknown names have no role.
func (a *Account) ClassifyMailbox(name string) Role {
	if r, ok := a.ConfiguredRole(name); ok {
		return r
	}
	return ClassifyName(name)
}

// ConfiguredRole returns the role mail.yaml gives the mailbox, if any; it
// overrides both the name table and the model.
func (a *Account) ConfiguredRole(name string) (Role, bool) {
	r, ok := a.Roles[strings.ToLower(strings.TrimSpace(name))]
	return Role(r), ok
}

// ClassifyName returns the role a mailbox name implies, without configuration.
func ClassifyName(name string) Role {
	key := FoldName(name)
	if r, ok := roleNames()[key]; ok {
		return r
	}
	if i := strings.LastIndexAny(key, "/."); i >= 0 {
		if r, ok := roleNames()[strings.TrimSpace(key[i+1:])]; ok {
			return r
		}
	}
	return RoleNone
}

// KnownRoleNames lists every recognised folder name, for documentation and tests.
func KnownRoleNames() []string {
	names := roleNames()
	out := make([]string, 0, len(names))
	for k := range names {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
