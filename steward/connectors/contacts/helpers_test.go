package contacts

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// abcdSchema is the Core Data layout of AddressBook-v22.abcddb, reduced to
// the tables and columns the reader uses (plus a few it must ignore).
const abcdSchema = `
CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
INSERT INTO Z_PRIMARYKEY VALUES (19, 'ABCDGroup', 17, 0), (22, 'ABCDContact', 17, 0), (17, 'ABCDRecord', 0, 0);
CREATE TABLE ZABCDRECORD (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCONTAINERWHERECONTACTISME INTEGER,
	ZFIRSTNAME VARCHAR, ZMIDDLENAME VARCHAR, ZLASTNAME VARCHAR, ZTITLE VARCHAR, ZSUFFIX VARCHAR, ZNICKNAME VARCHAR,
	ZORGANIZATION VARCHAR, ZDEPARTMENT VARCHAR, ZJOBTITLE VARCHAR, ZNAME VARCHAR, ZUNIQUEID VARCHAR,
	ZMODIFICATIONDATE TIMESTAMP, ZCREATIONDATE TIMESTAMP, ZTHUMBNAILIMAGEDATA BLOB);
CREATE TABLE ZABCDEMAILADDRESS (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZISPRIMARY INTEGER,
	ZORDERINGINDEX INTEGER, ZOWNER INTEGER, Z22_OWNER INTEGER, ZADDRESS VARCHAR, ZADDRESSNORMALIZED VARCHAR, ZLABEL VARCHAR);
CREATE TABLE ZABCDPHONENUMBER (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZISPRIMARY INTEGER,
	ZORDERINGINDEX INTEGER, ZOWNER INTEGER, Z22_OWNER INTEGER, ZFULLNUMBER VARCHAR, ZLABEL VARCHAR);
CREATE TABLE ZABCDPOSTALADDRESS (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZISPRIMARY INTEGER,
	ZORDERINGINDEX INTEGER, ZOWNER INTEGER, Z22_OWNER INTEGER, ZLABEL VARCHAR, ZSTREET VARCHAR, ZCITY VARCHAR,
	ZSTATE VARCHAR, ZZIPCODE VARCHAR, ZCOUNTRYNAME VARCHAR, ZCOUNTRYCODE VARCHAR);
CREATE TABLE ZABCDNOTE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCONTACT INTEGER, ZTEXT VARCHAR, ZRICHTEXT BLOB);
`

type abPerson struct {
	First, Last, Nick, Org, Dept, Job, UID, Note string
	Emails                                       []Labeled
	Phones                                       []Labeled
	Address                                      *Address
	Group                                        bool
}

// newAddressBook writes an AddressBook store at path with the given people.
func newAddressBook(t testing.TB, path string, people ...abPerson) {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(abcdSchema); err != nil {
		t.Fatal(err)
	}
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Sub(appleEpoch).Seconds()
	for i, p := range people {
		pk := i + 1
		ent := 22
		if p.Group {
			ent = 19
		}
		exec(t, db, `INSERT INTO ZABCDRECORD (Z_PK, Z_ENT, ZFIRSTNAME, ZLASTNAME, ZNICKNAME, ZORGANIZATION, ZDEPARTMENT, ZJOBTITLE, ZNAME, ZUNIQUEID, ZMODIFICATIONDATE)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, pk, ent, p.First, p.Last, p.Nick, p.Org, p.Dept, p.Job, p.Last, p.UID, mod)
		for j, e := range p.Emails {
			exec(t, db, `INSERT INTO ZABCDEMAILADDRESS (ZOWNER, Z22_OWNER, ZADDRESS, ZLABEL, ZISPRIMARY, ZORDERINGINDEX) VALUES (?, ?, ?, ?, ?, ?)`,
				pk, pk, e.Value, "_$!<"+e.Label+">!$_", e.Primary, j)
		}
		for j, ph := range p.Phones {
			exec(t, db, `INSERT INTO ZABCDPHONENUMBER (ZOWNER, ZFULLNUMBER, ZLABEL, ZISPRIMARY, ZORDERINGINDEX) VALUES (?, ?, ?, ?, ?)`,
				pk, ph.Value, "_$!<"+ph.Label+">!$_", ph.Primary, j)
		}
		if a := p.Address; a != nil {
			exec(t, db, `INSERT INTO ZABCDPOSTALADDRESS (ZOWNER, ZLABEL, ZSTREET, ZCITY, ZSTATE, ZZIPCODE, ZCOUNTRYNAME) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				pk, "_$!<"+a.Label+">!$_", a.Street, a.City, a.Region, a.Postcode, a.Country)
		}
		if p.Note != "" {
			exec(t, db, `INSERT INTO ZABCDNOTE (ZCONTACT, ZTEXT) VALUES (?, ?)`, pk, p.Note)
		}
	}
}

func exec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func email(v, label string, primary bool) Labeled {
	return Labeled{Label: label, Value: v, Primary: primary}
}

// addressBookFolder builds ~/Library/Application Support/AddressBook with a
// top-level store and two account stores.
func addressBookFolder(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "AddressBook")
	newAddressBook(t, filepath.Join(root, AddressBookFile),
		abPerson{First: "Anna", Last: "Verdi", Org: "Politecnico di Milano", UID: "LOCAL-ANNA:ABPerson",
			Emails: []Labeled{email("anna.verdi@polimi.it", "Work", true)}, Phones: []Labeled{{Label: "Mobile", Value: "+39 333 111 2222"}}},
		abPerson{Last: "Friends", UID: "GROUP-1:ABGroup", Group: true},
	)
	newAddressBook(t, filepath.Join(root, "Sources", "ICLOUD-UUID", AddressBookFile),
		abPerson{First: "Anna", Last: "Verdi", Job: "Researcher", UID: "ICLOUD-ANNA:ABPerson", Note: "Met at the AI workshop",
			Emails:  []Labeled{email("Anna.Verdi@POLIMI.it", "Work", true), email("anna.v@gmail.com", "Home", false)},
			Address: &Address{Label: "Work", Street: "Piazza Leonardo da Vinci 32", City: "Milano", Postcode: "20133", Country: "Italy"}},
		abPerson{First: "Marco", Last: "Rossi", Org: "Studio Rossi", Job: "Accountant", UID: "ICLOUD-MARCO:ABPerson",
			Emails: []Labeled{email("marco@studiorossi.it", "Work", true)}},
		abPerson{First: "Giulia", Last: "Neri", Org: "Politecnico di Milano", UID: "ICLOUD-GIULIA:ABPerson",
			Emails: []Labeled{email("giulia.neri@gmail.com", "Home", true)}},
		abPerson{First: "Luca", Last: "Bruni", UID: "ICLOUD-LUCA:ABPerson", Phones: []Labeled{{Label: "Mobile", Value: "+39 347 000 1111"}}},
	)
	newAddressBook(t, filepath.Join(root, "Sources", "EXCHANGE-UUID", AddressBookFile),
		abPerson{First: "Anna", Last: "Bianchi", Org: "Fiat", UID: "EX-ANNA:ABPerson", Emails: []Labeled{email("anna.bianchi@fiat.com", "Work", true)}},
		abPerson{First: "Marco", Last: "Neri", UID: "EX-MARCO:ABPerson", Emails: []Labeled{email("marco.neri@example.com", "Work", true)}},
		abPerson{First: "Chiara", Last: "Galli", Org: "Università di Bologna", Dept: "Fisica", UID: "EX-CHIARA:ABPerson",
			Emails: []Labeled{email("chiara.galli@unibo.it", "Work", true)}},
	)
	return root
}
