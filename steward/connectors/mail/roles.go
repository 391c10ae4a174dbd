package mail

import (
	"sort"
	"strings"
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

// roleNames maps folder names, folded to lower case, to roles. They cover the
// RFC 6154 special-use attribute names (\Sent, \Drafts…), the names Gmail,
// Apple Mail, Outlook, Dovecot and Fastmail give these folders, and Italian,
// German, French and Spanish localisations.
var roleNames = map[string]Role{
	"inbox": RoleInbox, "posta in arrivo": RoleInbox, "posteingang": RoleInbox, "boîte de réception": RoleInbox, "bandeja de entrada": RoleInbox,

	`\sent`: RoleSent, "sent": RoleSent, "sent messages": RoleSent, "sent mail": RoleSent, "sent items": RoleSent, "sent-mail": RoleSent,
	"posta inviata": RoleSent, "inviata": RoleSent, "inviati": RoleSent, "gesendet": RoleSent, "gesendete objekte": RoleSent, "gesendete elemente": RoleSent,
	"envoyés": RoleSent, "éléments envoyés": RoleSent, "enviados": RoleSent,

	`\drafts`: RoleDrafts, "drafts": RoleDrafts, "draft": RoleDrafts, "bozze": RoleDrafts, "entwürfe": RoleDrafts, "brouillons": RoleDrafts, "borradores": RoleDrafts,

	`\trash`: RoleTrash, "trash": RoleTrash, "deleted messages": RoleTrash, "deleted items": RoleTrash, "deleted": RoleTrash, "bin": RoleTrash,
	"cestino": RoleTrash, "posta eliminata": RoleTrash, "papierkorb": RoleTrash, "gelöschte objekte": RoleTrash, "gelöschte elemente": RoleTrash,
	"corbeille": RoleTrash, "papelera": RoleTrash,

	`\junk`: RoleJunk, "junk": RoleJunk, "spam": RoleJunk, "junk e-mail": RoleJunk, "junk email": RoleJunk, "bulk mail": RoleJunk,
	"posta indesiderata": RoleJunk, "indesiderata": RoleJunk, "spamverdacht": RoleJunk, "courrier indésirable": RoleJunk, "correo no deseado": RoleJunk,

	`\archive`: RoleArchive, "archive": RoleArchive, "archives": RoleArchive, "archived": RoleArchive, "archivio": RoleArchive, "archiv": RoleArchive, "archivo": RoleArchive,

	`\all`: RoleAll, "all mail": RoleAll, "all messages": RoleAll, "tutti i messaggi": RoleAll, "alle nachrichten": RoleAll, "tous les messages": RoleAll, "todos": RoleAll,
}

// ClassifyMailbox returns the role of a mailbox from the account's configured
// roles, then from its full name, then from the last component of its
// hierarchical name ("[Gmail]/Sent Mail" → sent). Unknown names have no role.
func (a *Account) ClassifyMailbox(name string) Role {
	key := strings.ToLower(strings.TrimSpace(name))
	if r, ok := a.Roles[key]; ok {
		return Role(r)
	}
	return ClassifyName(name)
}

// ClassifyName returns the role a mailbox name implies, without configuration.
func ClassifyName(name string) Role {
	key := strings.ToLower(strings.TrimSpace(name))
	if r, ok := roleNames[key]; ok {
		return r
	}
	if i := strings.LastIndexAny(key, "/."); i >= 0 {
		if r, ok := roleNames[strings.TrimSpace(key[i+1:])]; ok {
			return r
		}
	}
	return RoleNone
}

// KnownRoleNames lists every recognised folder name, for documentation and tests.
func KnownRoleNames() []string {
	out := make([]string, 0, len(roleNames))
	for k := range roleNames {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
