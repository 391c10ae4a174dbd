// Package source reads mail stores on disk: Maildir trees in the layouts
// mbsync and offlineimap write (Maildir++ ".Sub.Folder" and nested
// "Sub/Folder/{cur,new,tmp}") and Apple Mail's V* folders of .emlx and
// .partial.emlx files, with the flags each keeps and the role of each mailbox.
package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// Format is the on-disk format of one message file.
type Format string

// Message file formats.
const (
	FormatMaildir     Format = "maildir"
	FormatEMLX        Format = "emlx"
	FormatPartialEMLX Format = "partial-emlx"
)

// Entry is one message file found in a store.
type Entry struct {
	Account string
	Mailbox string // hierarchical name with "/" separators; "INBOX" for a Maildir root
	Role    mail.Role
	Path    string // absolute path
	// Key identifies the message file within its mailbox across renames: the
	// Maildir unique name without its flags, or the .emlx number.
	Key    string
	Format Format
	// Flags come from a Maildir filename; FlagsKnown is false for .emlx,
	// whose flags are in the file and known only once it is read.
	Flags      Flags
	FlagsKnown bool
	MTime      time.Time
	Size       int64
	// Recency orders a recent-first backfill: the Maildir delivery time when
	// the unique name starts with one, else the modification time.
	Recency int64
}

// Walk calls fn for every message file of the account. A directory that
// cannot be read is reported through onError and skipped, so one unreadable
// folder does not hide the others; fn's error stops the walk.
func Walk(ctx context.Context, acct *mail.Account, fn func(Entry) error, onError func(path string, err error)) error {
	return WalkWith(ctx, acct, WalkOptions{}, fn, onError)
}

// WalkOptions let a caller skip Maildir directories it knows are unchanged.
// They apply to Maildir cur/ and new/ directories only: Apple Mail rewrites
// .emlx files in place, which leaves the folder's modification time alone.
type WalkOptions struct {
	// Unchanged is asked about each Maildir cur/ or new/ directory, with its
	// status taken before it is read; true skips reading it.
	Unchanged func(dir string, st fs.FileInfo) bool
	// Listed is called once a Maildir directory was read completely, with
	// the status taken before reading it (so a change made while it was
	// being read shows as a different time on the next walk).
	Listed func(dir string, st fs.FileInfo)
}

// WalkWith is Walk with options.
func WalkWith(ctx context.Context, acct *mail.Account, opts WalkOptions, fn func(Entry) error, onError func(path string, err error)) error {
	if onError == nil {
		onError = func(string, error) {}
	}
	st, err := os.Stat(acct.Root)
	if err != nil {
		return fmt.Errorf("account %s: root %s: %w", acct.Name, acct.Root, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("account %s: root %s is not a directory", acct.Name, acct.Root)
	}
	switch acct.Kind {
	case mail.KindMaildir:
		return walkMaildirTree(ctx, acct, opts, fn, onError)
	case mail.KindAppleMail:
		return walkAppleMail(ctx, acct, fn, onError)
	}
	return fmt.Errorf("account %s: unknown kind %q", acct.Name, acct.Kind)
}

// MaildirFolder is one mailbox directory of a Maildir tree.
type MaildirFolder struct {
	Name string
	Dir  string
}

// MaildirFolders lists the mailbox directories of a Maildir tree: the root
// (INBOX) when it holds cur/new, Maildir++ folders (".Work.Project" →
// "Work/Project") and nested folders ("Work/Project/cur" → "Work/Project").
func MaildirFolders(root, layout string) ([]MaildirFolder, error) {
	var out []MaildirFolder
	if isMaildir(root) {
		out = append(out, MaildirFolder{Name: "INBOX", Dir: root})
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(root, name)
		if !isDirEntry(e, dir) || name == "cur" || name == "new" || name == "tmp" {
			continue
		}
		if strings.HasPrefix(name, ".") {
			if layout == mail.LayoutNested || name == "." || name == ".." || !isMaildir(dir) {
				continue // .notmuch, .git and other tool folders
			}
			out = append(out, MaildirFolder{Name: strings.ReplaceAll(strings.TrimPrefix(name, "."), ".", "/"), Dir: dir})
			continue
		}
		if layout == mail.LayoutMaildirPP {
			continue
		}
		nestedFolders(dir, name, &out, 0)
	}
	return out, nil
}

func nestedFolders(dir, name string, out *[]MaildirFolder, depth int) {
	if depth > 32 {
		return
	}
	if isMaildir(dir) {
		*out = append(*out, MaildirFolder{Name: name, Dir: dir})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		sub := filepath.Join(dir, n)
		if strings.HasPrefix(n, ".") || n == "cur" || n == "new" || n == "tmp" || !isDirEntry(e, sub) {
			continue
		}
		nestedFolders(sub, name+"/"+n, out, depth+1)
	}
}

func isDirEntry(e fs.DirEntry, path string) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink != 0 {
		st, err := os.Stat(path)
		return err == nil && st.IsDir()
	}
	return false
}

func isMaildir(dir string) bool {
	for _, sub := range []string{"cur", "new"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

func walkMaildirTree(ctx context.Context, acct *mail.Account, opts WalkOptions, fn func(Entry) error, onError func(string, error)) error {
	folders, err := MaildirFolders(acct.Root, acct.Layout)
	if err != nil {
		return fmt.Errorf("account %s: list folders of %s: %w", acct.Name, acct.Root, err)
	}
	for _, f := range folders {
		// Classified only for a folder that is listed: an unchanged
		// reconcile lists none, and folding names loads Unicode tables.
		role, classified := mail.RoleNone, false
		for _, sub := range []string{"new", "cur"} {
			if err := ctx.Err(); err != nil {
				return err
			}
			dir := filepath.Join(f.Dir, sub)
			dst, err := os.Stat(dir)
			if err == nil && opts.Unchanged != nil && opts.Unchanged(dir, dst) {
				continue
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					onError(dir, err)
				}
				continue
			}
			if !classified && len(entries) > 0 {
				role, classified = acct.ClassifyMailbox(f.Name), true
			}
			for _, de := range entries {
				if strings.HasPrefix(de.Name(), ".") || de.IsDir() {
					continue
				}
				info, err := de.Info()
				if err != nil {
					if !errors.Is(err, fs.ErrNotExist) {
						onError(filepath.Join(dir, de.Name()), err)
					}
					continue
				}
				if !info.Mode().IsRegular() {
					continue
				}
				e := MaildirEntry(acct, f.Name, role, filepath.Join(dir, de.Name()), sub == "new", info)
				if err := fn(e); err != nil {
					return err
				}
			}
			if opts.Listed != nil && dst != nil {
				opts.Listed(dir, dst)
			}
		}
	}
	return nil
}

// MaildirEntry describes one Maildir message file.
func MaildirEntry(acct *mail.Account, mailbox string, role mail.Role, path string, inNew bool, info fs.FileInfo) Entry {
	name := filepath.Base(path)
	key, flags := SplitMaildirName(name)
	e := Entry{Account: acct.Name, Mailbox: mailbox, Role: role, Path: path, Key: key, Format: FormatMaildir,
		FlagsKnown: true, MTime: info.ModTime(), Size: info.Size(), Recency: info.ModTime().Unix()}
	if !inNew {
		e.Flags = MaildirFlags(flags)
	}
	if ts := leadingDigits(key); ts > 0 && ts < 1<<34 {
		e.Recency = ts
	}
	return e
}

// SplitMaildirName separates the unique part of a Maildir filename from its
// flags ("1700000000.M1P2.host,U=5:2,RS" → "1700000000.M1P2.host,U=5", "RS").
// The ":2," separator is ";2," or "!2," on systems that forbid colons.
func SplitMaildirName(name string) (key, flags string) {
	for _, sep := range []string{":2,", "!2,", ";2,"} {
		if i := strings.LastIndex(name, sep); i >= 0 {
			return name[:i], name[i+len(sep):]
		}
	}
	return name, ""
}

func leadingDigits(s string) int64 {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 12 {
		return 0
	}
	n, _ := strconv.ParseInt(s[:i], 10, 64)
	return n
}

func walkAppleMail(ctx context.Context, acct *mail.Account, fn func(Entry) error, onError func(string, error)) error {
	return filepath.WalkDir(acct.Root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == acct.Root {
				return err
			}
			onError(path, err)
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		name := d.Name()
		if d.IsDir() {
			if name == "Attachments" || (strings.HasPrefix(name, ".") && path != acct.Root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".emlx") || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				onError(path, err)
			}
			return nil
		}
		mailbox := AppleMailbox(acct.Root, path)
		e := Entry{Account: acct.Name, Mailbox: mailbox, Role: acct.ClassifyMailbox(mailbox), Path: path,
			Key: EMLXKey(name), Format: FormatEMLX, MTime: info.ModTime(), Size: info.Size(), Recency: info.ModTime().Unix()}
		if strings.HasSuffix(name, ".partial.emlx") {
			e.Format = FormatPartialEMLX
		}
		return fn(e)
	})
}

// EMLXKey returns the message number of an .emlx filename ("123.partial.emlx" → "123").
func EMLXKey(name string) string {
	name = strings.TrimSuffix(name, ".emlx")
	return strings.TrimSuffix(name, ".partial")
}

// AppleMailbox names the mailbox of an .emlx path from its ".mbox" folders
// ("…/[Gmail].mbox/All Mail.mbox/<uuid>/Data/…/Messages/1.emlx" →
// "[Gmail]/All Mail"). A path with no .mbox folder is named after the folder
// holding Messages/.
func AppleMailbox(root, path string) string {
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil {
		rel = filepath.Dir(path)
	}
	var parts []string
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasSuffix(c, ".mbox") {
			parts = append(parts, strings.TrimSuffix(c, ".mbox"))
		}
	}
	if len(parts) == 0 {
		if strings.HasSuffix(root, ".mbox") {
			return strings.TrimSuffix(filepath.Base(root), ".mbox")
		}
		dir := filepath.Dir(path)
		if filepath.Base(dir) == "Messages" {
			dir = filepath.Dir(dir)
		}
		return filepath.Base(dir)
	}
	return strings.Join(parts, "/")
}
