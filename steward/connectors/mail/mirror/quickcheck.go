package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

// CheckOptions configure CheckUnchanged.
type CheckOptions struct {
	// DBPath is the mirror's mail.db.
	DBPath string
	// Accounts are the configured accounts, as a reconcile would get them.
	Accounts []mail.Account
	// FullAfter is the reconcile's SyncOptions.FullAfter (0: DefaultFullAfter).
	FullAfter time.Duration
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// Freshness is what CheckUnchanged found.
type Freshness struct {
	// Unchanged is true when an incremental reconcile would list no folder
	// and write nothing.
	Unchanged bool `json:"unchanged"`
	// Folders counts the Maildir cur/ and new/ directories found as the last
	// reconcile recorded them.
	Folders int `json:"folders"`
	// Reason says why a reconcile has (or may have) work when Unchanged is
	// false.
	Reason string `json:"reason,omitempty"`
}

// CheckUnchanged tells, without writing and without listing a folder,
// whether a reconcile would find nothing to do: it makes the reconcile's own
// incremental test (each Maildir cur/ and new/ directory's time and size
// against the last reconcile's record, as notmuch new does) on a read-only
// connection. It lets the scheduler, which runs in a long-lived process,
// spare an unchanged tree a child process whose start would cost more than
// the check. Whenever it cannot be sure — no mirror yet, a schema this
// binary would migrate, an account added or moved, an Apple Mail account
// (its folders are listed every time), a full reconcile due, a folder
// changed, added, gone or distrusted by a file event, index changes left by
// an interrupted writer, any error — it answers false with the reason, and
// the reconcile runs and decides.
func CheckUnchanged(ctx context.Context, opts CheckOptions) Freshness {
	f, err := checkUnchanged(ctx, opts)
	if err != nil {
		return Freshness{Reason: err.Error()}
	}
	return f
}

func checkUnchanged(ctx context.Context, opts CheckOptions) (Freshness, error) {
	if len(opts.Accounts) == 0 {
		return Freshness{}, errors.New("no mail account configured")
	}
	if _, err := os.Stat(opts.DBPath); err != nil {
		return Freshness{}, fmt.Errorf("no mail mirror yet: %w", err)
	}
	db, err := sqlitedb.Open(ctx, opts.DBPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		return Freshness{}, fmt.Errorf("open mail mirror: %w", err)
	}
	defer db.Close()
	v, err := sqlitedb.Version(ctx, db)
	if err != nil {
		return Freshness{}, err
	}
	if v != len(migrations) {
		return Freshness{}, fmt.Errorf("mail mirror schema %d, this binary's is %d", v, len(migrations))
	}
	now, fullAfter := time.Now, opts.FullAfter
	if opts.Now != nil {
		now = opts.Now
	}
	if fullAfter == 0 {
		fullAfter = DefaultFullAfter
	}
	if fullAfter > 0 && !fullPassRecent(ctx, db, now(), fullAfter) {
		return Freshness{}, errors.New("a full reconcile is due")
	}
	var queued bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM fts_queue)").Scan(&queued); err != nil {
		return Freshness{}, fmt.Errorf("read queued index changes: %w", err)
	}
	if queued {
		return Freshness{}, errors.New("index changes left by an interrupted run")
	}
	out := Freshness{Unchanged: true}
	for i := range opts.Accounts {
		a := &opts.Accounts[i]
		n, err := accountUnchanged(ctx, db, a)
		if err != nil {
			return Freshness{}, fmt.Errorf("account %s: %w", a.Name, err)
		}
		out.Folders += n
	}
	return out, nil
}

// accountUnchanged returns how many directories of the account match their
// record, or why one does not.
func accountUnchanged(ctx context.Context, db *sql.DB, a *mail.Account) (int, error) {
	if a.Kind != mail.KindMaildir {
		return 0, errors.New("Apple Mail folders are listed by every reconcile")
	}
	var kind, root string
	if err := db.QueryRowContext(ctx, "SELECT kind, root FROM accounts WHERE name = ?", a.Name).Scan(&kind, &root); err != nil || kind != a.Kind || root != a.Root {
		return 0, errors.New("new or moved account")
	}
	prev, err := loadDirStates(ctx, db, a.Name)
	if err != nil {
		return 0, err
	}
	if len(prev) == 0 {
		return 0, errors.New("never reconciled")
	}
	// The same test the reconcile's walk makes (WalkWith's Unchanged).
	ds := &dirScan{prev: map[string]map[string]dirState{a.Name: prev}, skipped: map[string]bool{}}
	unchanged := ds.unchanged(a.Name)
	if _, err := os.Stat(a.Root); err != nil {
		return 0, err
	}
	folders, err := source.MaildirFolders(a.Root, a.Layout)
	if err != nil {
		return 0, err
	}
	for _, f := range folders {
		for _, sub := range []string{"new", "cur"} {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			dir := filepath.Join(f.Dir, sub)
			st, err := os.Stat(dir)
			switch {
			case err == nil && unchanged(dir, st):
			case errors.Is(err, fs.ErrNotExist) && !recorded(prev, dir):
				// Never recorded and still absent: the walk skips it too.
			case err != nil:
				return 0, fmt.Errorf("folder %s: %w", dir, err)
			case !recorded(prev, dir):
				return 0, fmt.Errorf("folder %s is new", dir)
			default:
				return 0, fmt.Errorf("folder %s changed since the last reconcile", dir)
			}
		}
	}
	for dir := range prev {
		if !ds.skipped[dir] {
			return 0, fmt.Errorf("folder %s is gone or not yet listed", dir)
		}
	}
	return len(ds.skipped), nil
}

func recorded(prev map[string]dirState, dir string) bool {
	_, ok := prev[dir]
	return ok
}
