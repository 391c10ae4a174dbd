package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// ErrNotMessage reports a path that is not a message file of the account.
var ErrNotMessage = errors.New("not a message file of this account")

// Owns reports whether path lies inside the account's root.
func Owns(acct *mail.Account, path string) bool {
	rel, err := filepath.Rel(acct.Root, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// EntryForPath describes one message file of the account from its path, as
// Walk would, for a file reported by a file-system event.
func EntryForPath(acct *mail.Account, path string) (Entry, error) {
	if !Owns(acct, path) {
		return Entry{}, ErrNotMessage
	}
	info, err := os.Stat(path)
	if err != nil {
		return Entry{}, err
	}
	if !info.Mode().IsRegular() {
		return Entry{}, ErrNotMessage
	}
	name := filepath.Base(path)
	switch acct.Kind {
	case mail.KindMaildir:
		sub := filepath.Base(filepath.Dir(path))
		if (sub != "cur" && sub != "new") || strings.HasPrefix(name, ".") {
			return Entry{}, ErrNotMessage
		}
		folder := filepath.Dir(filepath.Dir(path))
		mailbox, ok := maildirName(acct, folder)
		if !ok {
			return Entry{}, ErrNotMessage
		}
		return MaildirEntry(acct, mailbox, acct.ClassifyMailbox(mailbox), path, sub == "new", info), nil
	case mail.KindAppleMail:
		if !strings.HasSuffix(name, ".emlx") || strings.Contains(filepath.ToSlash(path), "/Attachments/") {
			return Entry{}, ErrNotMessage
		}
		mailbox := AppleMailbox(acct.Root, path)
		e := Entry{Account: acct.Name, Mailbox: mailbox, Role: acct.ClassifyMailbox(mailbox), Path: path,
			Key: EMLXKey(name), Format: FormatEMLX, MTime: info.ModTime(), Size: info.Size(), Recency: info.ModTime().Unix()}
		if strings.HasSuffix(name, ".partial.emlx") {
			e.Format = FormatPartialEMLX
		}
		return e, nil
	}
	return Entry{}, fmt.Errorf("account %s: unknown kind %q", acct.Name, acct.Kind)
}

// maildirName names the Maildir folder dir the way MaildirFolders does.
func maildirName(acct *mail.Account, dir string) (string, bool) {
	if dir == acct.Root {
		return "INBOX", true
	}
	rel, err := filepath.Rel(acct.Root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if strings.HasPrefix(rel, ".") {
		if strings.Contains(rel, "/") || acct.Layout == mail.LayoutNested {
			return "", false
		}
		return strings.ReplaceAll(strings.TrimPrefix(rel, "."), ".", "/"), true
	}
	if acct.Layout == mail.LayoutMaildirPP {
		return "", false
	}
	for _, c := range strings.Split(rel, "/") {
		if strings.HasPrefix(c, ".") || c == "cur" || c == "new" || c == "tmp" {
			return "", false
		}
	}
	return rel, true
}
