package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/backup"
	"github.com/agentstack/agentstack/steward/config"
)

func init() {
	register(&command{
		Name:    "backup",
		Summary: "back up STEWARD_HOME (operational or full) or verify a backup",
		Run:     runBackup,
	})
	register(&command{
		Name:    "restore",
		Summary: "restore a verified backup into a new, empty STEWARD_HOME",
		Run:     runRestore,
	})
}

const backupHelp = `
  steward backup operational [--output DIR] [--json]
  steward backup full [--output DIR] [--wiki PATH] [--json]
  steward backup verify DIR [--json]

operational copies every SQLite store (chats, watches, audit, usage, the write journal, the mail
mirror, the calendar, contacts and wiki indexes, …) through SQLite's online backup API — safe while
steward serve runs — plus config.env, the settings files (gateway.yaml, policy.yaml, mcp.json, …),
vapid.json, the push subscriptions and the auth token. full adds the wiki vault (--wiki, default
STEWARD_WIKI_DIR), uploads and mail blobs. Stores moved out of STEWARD_HOME by a path setting
(WATCH_DB, CALENDAR_INDEX_DB, CONTACTS_INDEX_DB, WIKI_INDEX_DIR) are included.

The backup is written to a .pending-* directory beside DIR (default STEWARD_HOME/backups/KIND-TIME)
and renamed to DIR only when complete; a failed or killed run leaves only the .pending-* directory.
manifest.json lists every file with its SHA-256, where it came from, and the known sources that were
absent. Folders are 0700 and files 0600: the backup holds your token, keys and mail — protect it.
SQLite consistency is per database; stop steward serve first for one point in time across stores.

verify re-hashes every file against the manifest and names each one that differs.

  steward backup scheduled [--json]

is the scheduler's daily job: an operational backup into STEWARD_BACKUP_DIR/operational-TIME,
then removes the oldest scheduled backups beyond STEWARD_BACKUP_KEEP (default 7). Without
STEWARD_BACKUP_DIR it does nothing and says it is not configured.`

func runBackup(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := newFlagSet(env, "backup", "operational|full|verify …", backupHelp)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		fs.Usage()
		return errUsage
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet(env, "backup "+sub, "", backupHelp)
	output := fs.String("output", "", "the new backup directory (must not exist)")
	wiki := fs.String("wiki", "", "the wiki vault to include (full only; default STEWARD_WIKI_DIR)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	foreground := fs.Bool("foreground", false, "keep normal CPU and I/O priority (by default a backup runs at nice 10 and idle I/O priority, so it does not slow a running steward serve)")
	if sub == "verify" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if !jsonRequested(args) {
				fmt.Fprintln(env.Stderr, "steward backup verify: name the backup directory")
			}
			return fmt.Errorf("%w: name the backup directory", errUsage)
		}
		dir := args[0]
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		m, problems, err := backup.Verify(dir, progressPrinter(env.Stderr, *asJSON))
		if *asJSON {
			res := map[string]any{"dir": dir, "ok": err == nil, "problems": problems}
			if m != nil {
				res["kind"], res["entries"] = m.Kind, len(m.Entries)
			}
			if err != nil && problems == nil {
				res["error"] = err.Error()
			}
			writeJSON(env.Stdout, res)
		}
		if err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(env.Stdout, "%s: %s backup of %s, %d entries, every hash matches\n", dir, m.Kind, m.Created.Format(time.RFC3339), len(m.Entries))
		}
		return nil
	}
	if sub == "scheduled" {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		return scheduledBackup(ctx, env, *asJSON)
	}
	kind := backup.Kind(sub)
	if kind != backup.Operational && kind != backup.Full {
		fmt.Fprintf(env.Stderr, "steward backup: unknown kind %q (operational, full or verify)\n", sub)
		return errUsage
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	if *wiki != "" && kind != backup.Full {
		return errors.New("--wiki applies to full backups only (operational backups never copy the vault)")
	}
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	opts, err := backupOptions(cfg, kind, *output, *wiki)
	if err != nil {
		return err
	}
	opts.Progress = progressPrinter(env.Stderr, *asJSON)
	if !*foreground {
		lowerPriority()
	}
	m, err := backup.Run(ctx, opts)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range m.Entries {
		total += e.Size
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"output": opts.Output, "kind": m.Kind, "entries": len(m.Entries), "bytes": total, "absent": m.Absent})
	}
	fmt.Fprintf(env.Stdout, "%s backup written to %s: %d entries, %s\n", kind, opts.Output, len(m.Entries), humanBytes(total))
	for _, a := range m.Absent {
		fmt.Fprintf(env.Stdout, "  absent (not backed up): %s\n", a.Source)
	}
	return nil
}

// scheduledBackup is the daily job: an operational backup into
// STEWARD_BACKUP_DIR, then pruning to STEWARD_BACKUP_KEEP.
func scheduledBackup(ctx context.Context, env *cliEnv, asJSON bool) error {
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	dir := cfg.Path("STEWARD_BACKUP_DIR", "")
	keep := int(cfg.Int("STEWARD_BACKUP_KEEP", 7, 1, 365))
	if err := cfg.Err(); err != nil {
		return err
	}
	if dir == "" {
		return notConfiguredError{errors.New("no scheduled backup: STEWARD_BACKUP_DIR is not set")}
	}
	out := filepath.Join(dir, "operational-"+time.Now().UTC().Format("20060102T150405.000000Z"))
	opts, err := backupOptions(cfg, backup.Operational, out, "")
	if err != nil {
		return err
	}
	lowerPriority()
	m, err := backup.Run(ctx, opts)
	if err != nil {
		return err
	}
	// Names sort by time; only completed scheduled backups are counted and
	// removed (a .pending-* directory is left for the user to look at).
	old, _ := filepath.Glob(filepath.Join(dir, "operational-*"))
	sort.Strings(old)
	var pruned []string
	for len(old) > keep {
		if err := os.RemoveAll(old[0]); err != nil {
			return fmt.Errorf("remove the old backup %s: %w", old[0], err)
		}
		pruned, old = append(pruned, old[0]), old[1:]
	}
	if asJSON {
		return writeJSON(env.Stdout, map[string]any{"output": out, "entries": len(m.Entries), "kept": len(old), "pruned": len(pruned)})
	}
	fmt.Fprintf(env.Stdout, "backup written to %s; %d kept, %d removed\n", out, len(old), len(pruned))
	return nil
}

// backupOptions maps the configuration to what a backup copies.
func backupOptions(cfg *config.Config, kind backup.Kind, output, wiki string) (backup.Options, error) {
	home := cfg.Home
	if output == "" {
		output = filepath.Join(home, "backups", fmt.Sprintf("%s-%s", kind, time.Now().UTC().Format("20060102T150405Z")))
	}
	if wiki == "" {
		wiki = cfg.Path("STEWARD_WIKI_DIR", filepath.Join(home, "wiki"))
	} else if !filepath.IsAbs(wiki) {
		var err error
		if wiki, err = filepath.Abs(wiki); err != nil {
			return backup.Options{}, err
		}
	}
	opts := backup.Options{
		Home: home, Output: output, Kind: kind, Version: version,
		Payloads: []string{"uploads", filepath.Join("mail", "blobs")},
		Skip:     []string{"backups", "logs"},
		Known: []string{"chats.db", "watches.db", "audit.db", "usage.db", filepath.Join("write-ops", "ops.db"),
			filepath.Join("mail", "mail.db"), "calendar-index.sqlitedb", "contacts-index.sqlitedb",
			config.EnvFileName, "gateway.yaml", "policy.yaml", "mcp.json", "vapid.json", "push-subscriptions.json", "auth-token"},
	}
	if rel, err := filepath.Rel(home, wiki); err == nil && !strings.HasPrefix(rel, "..") {
		opts.Payloads = append(opts.Payloads, rel)
	} else {
		opts.Sources = append(opts.Sources, backup.Source{Name: "wiki", Path: wiki, RestoreAs: "wiki", FullOnly: true})
	}
	// Stores a path setting moved out of STEWARD_HOME.
	for _, s := range []struct{ name, def string }{
		{"WATCH_DB", "watches.db"}, {"CALENDAR_INDEX_DB", "calendar-index.sqlitedb"},
		{"CONTACTS_INDEX_DB", "contacts-index.sqlitedb"}, {"WIKI_INDEX_DIR", "wiki-index"},
	} {
		if p := cfg.Path(s.name, ""); p != "" {
			opts.Sources = append(opts.Sources, backup.Source{Name: "external/" + s.def, Path: p, RestoreAs: s.def})
		}
	}
	return opts, cfg.Err()
}

// progressPrinter prints a line per database and large file, and otherwise
// at most four lines a second; nothing with --json (stdout is for the
// result, stderr stays quiet for scripts).
func progressPrinter(w io.Writer, quiet bool) func(backup.Event) {
	if quiet {
		return nil
	}
	var last time.Time
	return func(e backup.Event) {
		if e.Done == e.Total || e.Bytes >= 1<<20 || time.Since(last) >= 250*time.Millisecond {
			last = time.Now()
			fmt.Fprintf(w, "  %s [%d/%d] %s (%s)\n", e.Phase, e.Done, e.Total, e.Path, humanBytes(e.Bytes))
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func runRestore(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "restore", "DIR --home NEW [--json]", `
Verifies every hash of the backup in DIR, then copies it into NEW, which must not exist or be
empty: restore never writes over a STEWARD_HOME in use. Stores that lived outside STEWARD_HOME
(WATCH_DB=…, an outside wiki vault) are restored to their default places inside NEW; remove the
matching path settings from NEW/config.env, then run STEWARD_HOME=NEW steward serve.`)
	newHome := fs.String("home", "", "the new STEWARD_HOME (required)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	// DIR may come before or after the options.
	var dir string
	rest := args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, rest = args[0], args[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if dir == "" {
		dir = fs.Arg(0)
	}
	for _, missing := range []struct {
		unset bool
		what  string
	}{{dir == "", "name the backup directory"}, {*newHome == "", "--home NEW is required"}} {
		if missing.unset {
			if !*asJSON {
				fmt.Fprintln(env.Stderr, "steward restore: "+missing.what)
			}
			return fmt.Errorf("%w: %s", errUsage, missing.what)
		}
	}
	m, err := backup.Restore(ctx, dir, *newHome, progressPrinter(env.Stderr, *asJSON))
	if err != nil {
		return err
	}
	var moved []string
	for _, r := range m.Roots {
		if r.Name != "home" {
			moved = append(moved, fmt.Sprintf("%s → %s", r.Source, filepath.Join(*newHome, r.RestoreAs)))
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"home": *newHome, "kind": m.Kind, "entries": len(m.Entries), "relocated": moved})
	}
	fmt.Fprintf(env.Stdout, "restored the %s backup of %s into %s (%d entries)\n", m.Kind, m.Created.Format(time.RFC3339), *newHome, len(m.Entries))
	for _, mv := range moved {
		fmt.Fprintf(env.Stdout, "  relocated %s (remove its path setting from config.env)\n", mv)
	}
	fmt.Fprintf(env.Stdout, "start it with: STEWARD_HOME=%s steward serve\n", *newHome)
	return nil
}
