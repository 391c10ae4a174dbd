package contacts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// AddressBookFile is the Core Data store name inside an AddressBook folder.
const AddressBookFile = "AddressBook-v22.abcddb"

// AppleOptions tune the AddressBook reader.
type AppleOptions struct {
	// BusyTimeout is how long to wait for the Contacts app's lock (default 3 s).
	BusyTimeout time.Duration
}

var appleEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// appleStores lists the stores of an AddressBook folder: the top-level one
// ("local") and one per account under Sources/<UUID>/. A path to a single
// .abcddb file is one store whose source id is its folder name.
func appleStores(path string) ([]struct{ id, path string }, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	type store = struct{ id, path string }
	if !info.IsDir() {
		return []store{{id: filepath.Base(filepath.Dir(path)), path: path}}, nil
	}
	var out []store
	if _, err := os.Stat(filepath.Join(path, AddressBookFile)); err == nil {
		out = append(out, store{id: "local", path: filepath.Join(path, AddressBookFile)})
	}
	matches, _ := filepath.Glob(filepath.Join(path, "Sources", "*", AddressBookFile))
	sort.Strings(matches)
	for _, m := range matches {
		out = append(out, store{id: filepath.Base(filepath.Dir(m)), path: m})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no %s in %s or its Sources/ folders", ErrMissing, AddressBookFile, path)
	}
	return out, nil
}

// ReadApple reads every AddressBook store of the source, read-only. A store
// that fails while others succeed is a record error (its earlier records
// are kept); when every store fails the source fails with the first error.
func ReadApple(ctx context.Context, src SourceConfig, opts AppleOptions) (*SourceResult, error) {
	stores, err := appleStores(src.Path)
	if err != nil {
		return nil, sourceError("read AddressBook", src.Path, err)
	}
	res := &SourceResult{}
	var firstErr error
	for _, st := range stores {
		recs, err := readAddressBook(ctx, st.path, opts)
		if err != nil {
			err = sourceError("read AddressBook", st.path, err)
			if firstErr == nil {
				firstErr = err
			}
			res.Errors = append(res.Errors, RecordError{Path: st.path, Err: err})
			res.FailedPaths = append(res.FailedPaths, st.path)
			continue
		}
		for _, r := range recs {
			r.Source, r.SourceID, r.path = src.Name, st.id, st.path
			res.Records = append(res.Records, r)
		}
	}
	if len(res.FailedPaths) == len(stores) {
		return nil, firstErr
	}
	return res, nil
}

func readAddressBook(ctx context.Context, path string, opts AppleOptions) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 3 * time.Second
	}
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true, BusyTimeout: busy, MaxOpenConns: 1})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	r := &abReader{tx: tx}
	return r.read(ctx)
}

type abReader struct {
	tx   *sql.Tx
	cols map[string]map[string]bool
}

func (r *abReader) has(ctx context.Context, table, col string) (bool, error) {
	if r.cols == nil {
		r.cols = map[string]map[string]bool{}
	}
	c, ok := r.cols[table]
	if !ok {
		c = map[string]bool{}
		rows, err := r.tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			return false, err
		}
		for rows.Next() {
			var n string
			rows.Scan(&n)
			c[strings.ToUpper(n)] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, err
		}
		r.cols[table] = c
	}
	return c[strings.ToUpper(col)], nil
}

// sel returns the column or NULL, so older and newer schemas both read.
func (r *abReader) sel(ctx context.Context, table string, cols ...string) (string, error) {
	out := make([]string, len(cols))
	for i, c := range cols {
		ok, err := r.has(ctx, table, c)
		if err != nil {
			return "", err
		}
		if ok {
			out[i] = c
		} else {
			out[i] = "NULL"
		}
	}
	return strings.Join(out, ", "), nil
}

func (r *abReader) read(ctx context.Context) ([]Record, error) {
	if ok, err := r.has(ctx, "ZABCDRECORD", "Z_PK"); err != nil || !ok {
		if err == nil {
			err = errors.New("not an AddressBook store: table ZABCDRECORD is missing")
		}
		return nil, err
	}
	cols, err := r.sel(ctx, "ZABCDRECORD", "Z_PK", "Z_ENT", "ZUNIQUEID", "ZFIRSTNAME", "ZMIDDLENAME", "ZLASTNAME", "ZTITLE", "ZSUFFIX",
		"ZNICKNAME", "ZORGANIZATION", "ZDEPARTMENT", "ZJOBTITLE", "ZNOTE", "ZMODIFICATIONDATE")
	if err != nil {
		return nil, err
	}
	// Groups and account info share ZABCDRECORD; keep the contact entity
	// when Core Data's entity table says which one it is.
	where := ""
	var ent sql.NullInt64
	err = r.tx.QueryRowContext(ctx, `SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'ABCDContact'`).Scan(&ent)
	if err == nil && ent.Valid {
		where = " WHERE Z_ENT = " + strconv.FormatInt(ent.Int64, 10)
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT `+cols+` FROM ZABCDRECORD`+where+` ORDER BY Z_PK`)
	if err != nil {
		return nil, fmt.Errorf("query ZABCDRECORD: %w", err)
	}
	byPK := map[int64]*Record{}
	var order []int64
	for rows.Next() {
		var pk int64
		var zent sql.NullInt64
		var uid, first, middle, last, prefix, suffix, nick, org, dept, job, note sql.NullString
		var mod sql.NullFloat64
		if err := rows.Scan(&pk, &zent, &uid, &first, &middle, &last, &prefix, &suffix, &nick, &org, &dept, &job, &note, &mod); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read ZABCDRECORD: %w", err)
		}
		rec := &Record{NativeID: uid.String, First: first.String, Middle: middle.String, Last: last.String, Prefix: prefix.String,
			Suffix: suffix.String, Nickname: nick.String, Org: org.String, Department: dept.String, Title: job.String, Notes: note.String}
		if rec.NativeID == "" {
			rec.NativeID = "abcd-" + strconv.FormatInt(pk, 10)
		}
		if mod.Valid {
			rec.Modified = appleEpoch.Add(time.Duration(mod.Float64 * float64(time.Second))).UTC().Truncate(time.Second)
		}
		byPK[pk] = rec
		order = append(order, pk)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read ZABCDRECORD: %w", err)
	}
	if err := r.readLabeled(ctx, "ZABCDEMAILADDRESS", "ZADDRESS", byPK, func(rec *Record, l Labeled) { rec.Emails = append(rec.Emails, l) }); err != nil {
		return nil, err
	}
	if err := r.readLabeled(ctx, "ZABCDPHONENUMBER", "ZFULLNUMBER", byPK, func(rec *Record, l Labeled) { rec.Phones = append(rec.Phones, l) }); err != nil {
		return nil, err
	}
	if err := r.readAddresses(ctx, byPK); err != nil {
		return nil, err
	}
	if err := r.readNotes(ctx, byPK); err != nil {
		return nil, err
	}
	var out []Record
	for _, pk := range order {
		if rec := byPK[pk]; !rec.empty() {
			out = append(out, *rec)
		}
	}
	return out, nil
}

func (r *abReader) tableExists(ctx context.Context, table string) bool {
	ok, err := r.has(ctx, table, "ZOWNER")
	return err == nil && ok
}

func (r *abReader) readLabeled(ctx context.Context, table, valueCol string, byPK map[int64]*Record, add func(*Record, Labeled)) error {
	if !r.tableExists(ctx, table) {
		return nil
	}
	cols, err := r.sel(ctx, table, "ZOWNER", valueCol, "ZLABEL", "ZISPRIMARY", "ZORDERINGINDEX")
	if err != nil {
		return err
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT `+cols+` FROM `+table+` ORDER BY 1, 5, rowid`)
	if err != nil {
		return fmt.Errorf("query %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner sql.NullInt64
		var value, label sql.NullString
		var primary, ordering sql.NullInt64
		if err := rows.Scan(&owner, &value, &label, &primary, &ordering); err != nil {
			return fmt.Errorf("read %s: %w", table, err)
		}
		rec, ok := byPK[owner.Int64]
		if !ok || strings.TrimSpace(value.String) == "" {
			continue
		}
		add(rec, Labeled{Label: cleanLabel(label.String), Value: strings.TrimSpace(value.String), Primary: primary.Int64 != 0})
	}
	return rows.Err()
}

func (r *abReader) readAddresses(ctx context.Context, byPK map[int64]*Record) error {
	const table = "ZABCDPOSTALADDRESS"
	if !r.tableExists(ctx, table) {
		return nil
	}
	cols, err := r.sel(ctx, table, "ZOWNER", "ZLABEL", "ZSTREET", "ZCITY", "ZSTATE", "ZZIPCODE", "ZCOUNTRYNAME")
	if err != nil {
		return err
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT `+cols+` FROM `+table+` ORDER BY rowid`)
	if err != nil {
		return fmt.Errorf("query %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner sql.NullInt64
		var label, street, city, state, zip, country sql.NullString
		if err := rows.Scan(&owner, &label, &street, &city, &state, &zip, &country); err != nil {
			return fmt.Errorf("read %s: %w", table, err)
		}
		if rec, ok := byPK[owner.Int64]; ok {
			a := Address{Label: cleanLabel(label.String), Street: strings.ReplaceAll(street.String, "\n", ", "), City: city.String,
				Region: state.String, Postcode: zip.String, Country: country.String}
			if a.String() != "" {
				rec.Addresses = append(rec.Addresses, a)
			}
		}
	}
	return rows.Err()
}

// readNotes reads ZABCDNOTE (newer stores keep notes there, not in ZNOTE).
func (r *abReader) readNotes(ctx context.Context, byPK map[int64]*Record) error {
	ok, err := r.has(ctx, "ZABCDNOTE", "ZCONTACT")
	if err != nil || !ok {
		return err
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT ZCONTACT, ZTEXT FROM ZABCDNOTE`)
	if err != nil {
		return fmt.Errorf("query ZABCDNOTE: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner sql.NullInt64
		var text sql.NullString
		if err := rows.Scan(&owner, &text); err != nil {
			return fmt.Errorf("read ZABCDNOTE: %w", err)
		}
		if rec, ok := byPK[owner.Int64]; ok && strings.TrimSpace(text.String) != "" {
			rec.Notes = strings.Join(nonEmpty(rec.Notes, text.String), "\n")
		}
	}
	return rows.Err()
}
