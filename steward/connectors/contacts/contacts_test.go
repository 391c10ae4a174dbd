package contacts

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/vecindex/vecindextest"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
)

func TestParseRealVCardExports(t *testing.T) {
	dir := localsourcetest.Fixture(t, "calendar-contacts/ez-vcard")
	files, _ := filepath.Glob(filepath.Join(dir, "*.vcf"))
	if len(files) < 15 {
		t.Fatalf("only %d fixture files", len(files))
	}
	byFile := map[string][]Record{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs, errs := ParseVCards(data)
		if len(errs) > 0 || len(recs) == 0 {
			t.Errorf("%s: %d records, errors %v", filepath.Base(f), len(recs), errs)
		}
		byFile[filepath.Base(f)] = recs
	}
	// vCard 2.1 with bare TYPE parameters and quoted-printable soft breaks.
	o := byFile["outlook-2003.vcf"][0]
	if o.First != "John" || o.Last != "Doe" || o.Nickname != "Joey" || o.Org != "Company, The" || o.Department != "TheDepartment" ||
		o.Title != "The Job Title" || o.Notes != "This is the note field!!\nSecond line\n\nThird line is empty" {
		t.Errorf("outlook 2003: %+v", o)
	}
	if o.PrimaryEmail() != "jdoe@hotmail.com" || len(o.Addresses) != 1 || o.Addresses[0].City != "Austin" || o.Addresses[0].Label != "work" {
		t.Errorf("outlook 2003 email/address: %+v %+v", o.Emails, o.Addresses)
	}
	// Apple's item groups carry custom labels.
	ip := byFile["John_Doe_IPHONE.vcf"][0]
	if ip.PrimaryEmail() != "john.doe@ibm.com" || ip.Org != "IBM" || ip.Department != "Accounting" || ip.Title != "Money Counter" {
		t.Errorf("iPhone: %+v", ip)
	}
	if i := slices.IndexFunc(ip.Phones, func(p Labeled) bool { return p.Value == "905-222-1234" }); i < 0 || ip.Phones[i].Label != "assistantphone" {
		t.Errorf("iPhone X-ABLabel phone: %+v", ip.Phones)
	}
	if mac := byFile["John_Doe_MAC_ADDRESS_BOOK.vcf"][0]; mac.NativeID != "6B29A774-D124-4822-B8D0-2780EC117F60:ABPerson" {
		t.Errorf("Mac export native id %q", mac.NativeID)
	}
	// CHARSET=UTF-8 with quoted-printable.
	if a := byFile["John_Doe_ANDROID.vcf"]; len(a) < 3 || a[2].FullName != "Ñ Ñ Ñ Ñ Ñ" {
		t.Errorf("Android QP UTF-8: %+v", a)
	}
	if g := byFile["gmail-list.vcf"]; len(g) != 3 || g[1].DisplayName() != "Chris Beatle" {
		t.Errorf("gmail list: %+v", g)
	}
	r := byFile["rfc2426-example.vcf"]
	if len(r) != 2 || r[0].PrimaryEmail() != "frank_dawson@lotus.com" || r[0].Addresses[0].City != "Raleigh" || r[1].Org != "Netscape Communications Corp." {
		t.Errorf("RFC 2426: %+v", r)
	}
	if v4 := byFile["rfc6350-example.vcf"][0]; v4.Phones[0].Value != "+1-418-656-9254;ext=102" || v4.Org != "Viagenie" || v4.Addresses[0].City != "Quebec" {
		t.Errorf("vCard 4.0: %+v", v4)
	}
}

func TestParseVCardsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"no card":      "hello world\n",
		"unterminated": "BEGIN:VCARD\nVERSION:3.0\nFN:Half\n",
		"binary":       "\x00\x01\x02BEGIN",
	} {
		if _, errs := ParseVCards([]byte(in)); len(errs) == 0 {
			t.Errorf("%s: no error", name)
		}
	}
	recs, errs := ParseVCards([]byte("BEGIN:VCARD\nFN:One\nEND:VCARD\nBEGIN:VCARD\nFN:Cut\nBEGIN:VCARD\nFN:Two\nEMAIL:two@x.org\nEND:VCARD\n"))
	if len(recs) != 2 || len(errs) != 1 || recs[1].PrimaryEmail() != "two@x.org" {
		t.Errorf("a broken card among good ones: %+v %v", recs, errs)
	}
	// Latin-1 bytes without a CHARSET are read as ISO-8859-1, not dropped.
	recs, _ = ParseVCards([]byte("BEGIN:VCARD\nFN:Citt\xe0 Caf\xe9\nEND:VCARD\n"))
	if len(recs) != 1 || recs[0].FullName != "Città Café" {
		t.Errorf("latin-1: %+v", recs)
	}
}

func TestReadAppleAddressBookFolder(t *testing.T) {
	root := addressBookFolder(t)
	res, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Kind: KindApple, Path: root}, AppleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 8 || len(res.Errors) != 0 {
		t.Fatalf("records %d (groups must be skipped), errors %v", len(res.Records), res.Errors)
	}
	var anna []Record
	for _, r := range res.Records {
		if r.First == "Anna" && r.Last == "Verdi" {
			anna = append(anna, r)
		}
	}
	if len(anna) != 2 || anna[0].SourceID != "local" || anna[1].SourceID != "ICLOUD-UUID" || anna[1].NativeID != "ICLOUD-ANNA:ABPerson" {
		t.Fatalf("Anna records %+v", anna)
	}
	a := anna[1]
	if a.Notes != "Met at the AI workshop" || a.Title != "Researcher" || len(a.Emails) != 2 || a.Emails[0].Label != "work" || !a.Emails[0].Primary ||
		a.Addresses[0].City != "Milano" || !a.Modified.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("iCloud Anna %+v", a)
	}
	// A single store file works too.
	one, err := ReadApple(context.Background(), SourceConfig{Name: "x", Path: filepath.Join(root, "Sources", "EXCHANGE-UUID", AddressBookFile)}, AppleOptions{})
	if err != nil || len(one.Records) != 3 || one.Records[0].SourceID != "EXCHANGE-UUID" {
		t.Errorf("single store: %v %+v", err, one)
	}
}

func TestReadAppleBadStores(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadApple(context.Background(), SourceConfig{Name: "x", Path: filepath.Join(dir, "none")}, AppleOptions{}); !errors.Is(err, ErrMissing) {
		t.Errorf("missing: %v", err)
	}
	if _, err := ReadApple(context.Background(), SourceConfig{Name: "x", Path: dir}, AppleOptions{}); !errors.Is(err, ErrMissing) {
		t.Errorf("folder without stores: %v", err)
	}
	other := filepath.Join(dir, "other.abcddb")
	db, _ := sqlitedb.Open(context.Background(), other, sqlitedb.Options{})
	db.Exec(`CREATE TABLE t (x)`)
	db.Close()
	if _, err := ReadApple(context.Background(), SourceConfig{Name: "x", Path: other}, AppleOptions{}); err == nil || !strings.Contains(err.Error(), "ZABCDRECORD") {
		t.Errorf("not an AddressBook: %v", err)
	}
	// One locked account store among others: a record error, the rest reads.
	root := addressBookFolder(t)
	locked := filepath.Join(root, "Sources", "EXCHANGE-UUID", AddressBookFile)
	w := lockStore(t, locked)
	defer w.Exec("ROLLBACK")
	res, err := ReadApple(context.Background(), SourceConfig{Name: "mac", Path: root}, AppleOptions{BusyTimeout: 50 * time.Millisecond})
	if err != nil || len(res.Records) != 5 || len(res.FailedPaths) != 1 || !errors.Is(res.Errors[0].Err, ErrLocked) {
		t.Errorf("locked account store: %v, %d records, %v", err, len(res.Records), res.Errors)
	}
	_, err = ReadApple(context.Background(), SourceConfig{Name: "mac", Path: locked}, AppleOptions{BusyTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "try again") {
		t.Errorf("locked single store: %v", err)
	}
}

// lockStore switches a store to rollback journaling and holds an exclusive
// write lock on it, as the Contacts app does while saving.
func lockStore(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{"PRAGMA journal_mode=DELETE", "BEGIN EXCLUSIVE", "UPDATE ZABCDRECORD SET Z_OPT = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// topics are the topics of the stand-in for local-embed, so that
// "bookkeeping" lands near "accountant".
var topics = [][]string{
	{"accountant", "bookkeeping", "taxes", "tax", "accounting", "commercialista"},
	{"researcher", "university", "professor", "research", "politecnico"},
}

type env struct {
	t   *testing.T
	idx *Index
	cfg *Config
}

func newEnv(t *testing.T, sources ...SourceConfig) *env {
	t.Helper()
	idx, err := OpenIndex(context.Background(), filepath.Join(t.TempDir(), "contacts-index.sqlitedb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	return &env{t: t, idx: idx, cfg: &Config{Sources: sources}}
}

func (e *env) build(opts IndexOptions) *Report {
	e.t.Helper()
	rep, err := e.idx.Build(context.Background(), e.cfg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func fixtureIndex(t *testing.T, emb Embedder) *env {
	t.Helper()
	root := addressBookFolder(t)
	vdir := filepath.Join(t.TempDir(), "contacts")
	localsourcetest.WriteFile(t, filepath.Join(vdir, "elena.vcf"), "BEGIN:VCARD\nVERSION:3.0\nFN:Elena Fontana\nN:Fontana;Elena;;;\nORG:Polimi Alumni\n"+
		"EMAIL;TYPE=INTERNET,pref:elena@fontana.eu\nNOTE:handles my taxes\nEND:VCARD\n")
	localsourcetest.WriteFile(t, filepath.Join(vdir, "anna.vcf"), "BEGIN:VCARD\nVERSION:3.0\nUID:vcard-anna\nFN:Anna Verdi\nEMAIL;TYPE=pref:anna.verdi@polimi.it\n"+
		"TEL;TYPE=work:+39 02 2399 0000\nEND:VCARD\n")
	e := newEnv(t, SourceConfig{Name: "mac", Kind: KindApple, Path: root}, SourceConfig{Name: "dav", Kind: KindVCard, Path: vdir})
	rep := e.build(IndexOptions{Embedder: emb})
	if !rep.Complete || rep.Records != 10 || rep.People != 8 || rep.Merged != 2 {
		t.Fatalf("fixture index: %+v", rep)
	}
	return e
}

func TestIndexMergesByPrimaryEmailUnderSidecarUID(t *testing.T) {
	e := fixtureIndex(t, nil)
	svc := NewService(e.idx, nil)
	ctx := context.Background()
	anna, err := svc.ReadContact(ctx, ReadParams{UID: "ICLOUD-ANNA:ABPerson"})
	if err != nil {
		t.Fatal(err)
	}
	if anna.UID != sidecarUID("email:anna.verdi@polimi.it") || len(anna.Sources) != 3 {
		t.Fatalf("merged Anna: uid %s sources %+v", anna.UID, anna.Sources)
	}
	var natives []string
	for _, s := range anna.Sources {
		natives = append(natives, s.Source+"/"+s.SourceID+"/"+s.NativeID)
	}
	slices.Sort(natives)
	want := []string{"dav/anna.vcf/vcard-anna", "mac/ICLOUD-UUID/ICLOUD-ANNA:ABPerson", "mac/local/LOCAL-ANNA:ABPerson"}
	if !slices.Equal(natives, want) {
		t.Errorf("contributing native ids %v, want %v", natives, want)
	}
	if len(anna.Emails) != 2 || !anna.Emails[0].Primary || NormalizeEmail(anna.Emails[0].Value) != "anna.verdi@polimi.it" ||
		len(anna.Phones) != 2 || anna.Title != "Researcher" || anna.Org != "Politecnico di Milano" || anna.Notes != "Met at the AI workshop" {
		t.Errorf("merged fields %+v", anna)
	}
	for _, key := range []string{anna.UID, "LOCAL-ANNA:ABPerson", "vcard-anna", "ANNA.V@gmail.com"} {
		got, err := svc.ReadContact(ctx, ReadParams{UID: key})
		if err != nil || got.UID != anna.UID {
			t.Errorf("read_contact %q: %v %v", key, got, err)
		}
	}
	if _, err := svc.ReadContact(ctx, ReadParams{UID: "nobody"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown contact: %v", err)
	}
	// Rebuilding from scratch gives the same sidecar uids.
	again := newEnv(t, e.cfg.Sources...)
	again.build(IndexOptions{})
	got, err := NewService(again.idx, nil).ReadContact(ctx, ReadParams{UID: "LOCAL-ANNA:ABPerson"})
	if err != nil || got.UID != anna.UID {
		t.Errorf("rebuilt index uid %v, want %s (%v)", got, anna.UID, err)
	}
	// A second run over unchanged sources changes nothing.
	if rep := e.build(IndexOptions{}); rep.Unchanged != 8 || rep.Added+rep.Updated+rep.Deleted != 0 {
		t.Errorf("idempotent rebuild: %+v", rep)
	}
}

func TestIndexKeepsRecordsOfFailedSourcesAndPublishesAtomically(t *testing.T) {
	vdir := filepath.Join(t.TempDir(), "contacts")
	localsourcetest.WriteFile(t, filepath.Join(vdir, "a.vcf"), "BEGIN:VCARD\nFN:Alpha One\nEMAIL:alpha@x.org\nEND:VCARD\n")
	localsourcetest.WriteFile(t, filepath.Join(vdir, "b.vcf"), "BEGIN:VCARD\nFN:Beta Two\nEMAIL:beta@x.org\nEND:VCARD\n")
	root := addressBookFolder(t)
	e := newEnv(t, SourceConfig{Name: "dav", Kind: KindVCard, Path: vdir}, SourceConfig{Name: "mac", Kind: KindApple, Path: root})
	if rep := e.build(IndexOptions{}); rep.People != 9 {
		t.Fatalf("first run %+v", rep)
	}
	// b.vcf becomes unreadable garbage and the AddressBook folder vanishes.
	localsourcetest.WriteFile(t, filepath.Join(vdir, "b.vcf"), "BEGIN:VCARD\nFN:Beta")
	os.Rename(root, root+".gone")
	rep := e.build(IndexOptions{})
	if rep.Complete || rep.People != 9 || rep.Deleted != 0 || !strings.Contains(rep.SourceErrors["mac"], "not found") || len(rep.RecordErrors) != 1 {
		t.Errorf("failed reads must keep records: %+v", rep)
	}
	// A failing commit publishes nothing.
	os.Remove(filepath.Join(vdir, "a.vcf"))
	e.idx.beforeCommit = func() error { return errors.New("disk full (simulated)") }
	if _, err := e.idx.Build(context.Background(), e.cfg, IndexOptions{}); err == nil {
		t.Fatal("build with failing commit succeeded")
	}
	gen, _, _, _ := e.idx.State(context.Background())
	res, _ := NewService(e.idx, nil).SearchContacts(context.Background(), SearchParams{Query: "alpha"})
	if gen != 2 || res.Total != 1 {
		t.Errorf("failed run leaked: generation %d, alpha found %d", gen, res.Total)
	}
	e.idx.beforeCommit = nil
	if rep := e.build(IndexOptions{}); rep.Deleted != 1 || rep.Generation != 3 {
		t.Errorf("recovery run %+v", rep)
	}
}

func TestSearchContacts(t *testing.T) {
	emb := &vecindextest.Topics{Topics: topics}
	e := fixtureIndex(t, emb)
	ctx := context.Background()
	lex := NewService(e.idx, nil)
	for q, want := range map[string][]string{
		"verdi":        {"Anna Verdi"},
		"universita":   {"Chiara Galli"},
		"studiorossi":  {"Marco Rossi"},
		"marco":        {"Marco Neri", "Marco Rossi"},
		"+39 347":      {"Luca Bruni"},
		"xyzzy":        nil,
		`"); DROP --"`: nil,
		"anna polimi":  {"Anna Verdi"},
	} {
		res, err := lex.SearchContacts(ctx, SearchParams{Query: q})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		var got []string
		for _, c := range res.Contacts {
			got = append(got, c.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("search %q = %v, want %v", q, got, want)
		}
	}
	all, _ := lex.SearchContacts(ctx, SearchParams{Limit: 3})
	if all.Ranking != "alphabetical" || all.Total != 8 || len(all.Contacts) != 3 || all.Contacts[0].Name != "Anna Bianchi" || *all.NextOffset != 3 {
		t.Errorf("browse %+v", all)
	}
	hyb := NewService(e.idx, emb)
	res, _ := hyb.SearchContacts(ctx, SearchParams{Query: "bookkeeping"})
	if res.Ranking != "hybrid" || len(res.Contacts) == 0 || res.Contacts[0].Name != "Marco Rossi" {
		t.Errorf("semantic search: %s %+v", res.Ranking, res.Contacts)
	}
	emb.Fail.Store(true)
	res, _ = hyb.SearchContacts(ctx, SearchParams{Query: "bookkeeping"})
	if res.Ranking != "lexical" || len(res.Warnings) == 0 || res.Total != 0 {
		t.Errorf("gateway down: %+v", res)
	}
}

func TestResolveRecipient(t *testing.T) {
	e := fixtureIndex(t, nil)
	svc := NewService(e.idx, nil)
	ctx := context.Background()
	names := func(r *Resolution) []string {
		var out []string
		for _, c := range r.Candidates {
			out = append(out, c.Name)
		}
		return out
	}
	r, err := svc.ResolveRecipient(ctx, ResolveParams{Description: "Anna from Polimi"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(r); len(got) != 2 || got[0] != "Anna Verdi" || got[1] != "Anna Bianchi" {
		t.Errorf("Anna from Polimi: %v", got)
	}
	if !r.Ambiguous || !strings.Contains(r.Note, "several addresses") || !slices.ContainsFunc(r.Candidates[0].MatchedOn, func(s string) bool { return strings.Contains(s, "polimi") }) {
		t.Errorf("Anna from Polimi: ambiguous=%v note=%q reasons=%v", r.Ambiguous, r.Note, r.Candidates[0].MatchedOn)
	}
	r, _ = svc.ResolveRecipient(ctx, ResolveParams{Description: "Giulia from Polimi"})
	if got := names(r); len(got) == 0 || got[0] != "Giulia Neri" || !slices.ContainsFunc(r.Candidates[0].MatchedOn, func(s string) bool { return strings.Contains(s, "abbreviates") }) {
		t.Errorf("abbreviation: %v %v", got, r.Candidates)
	}
	r, _ = svc.ResolveRecipient(ctx, ResolveParams{Description: "my accountant"})
	if got := names(r); len(got) == 0 || got[0] != "Marco Rossi" || r.Ambiguous {
		t.Errorf("my accountant: %v ambiguous=%v", got, r.Ambiguous)
	}
	r, _ = svc.ResolveRecipient(ctx, ResolveParams{Description: "Marco"})
	if got := names(r); len(got) != 2 || !r.Ambiguous || !strings.Contains(r.Note, "ask the user") {
		t.Errorf("Marco: %v ambiguous=%v %q", got, r.Ambiguous, r.Note)
	}
	r, _ = svc.ResolveRecipient(ctx, ResolveParams{Description: "Luca Bruni"})
	if len(r.Candidates) != 0 || !strings.Contains(r.Note, "ask the user for the address") {
		t.Errorf("contact without email must not be a recipient: %+v", r)
	}
	r, _ = svc.ResolveRecipient(ctx, ResolveParams{Description: "write to marco.neri@example.com"})
	if got := names(r); len(got) == 0 || got[0] != "Marco Neri" {
		t.Errorf("by address: %v", got)
	}
	for _, bad := range []string{"", strings.Repeat("x", 600)} {
		if _, err := svc.ResolveRecipient(ctx, ResolveParams{Description: bad}); err == nil {
			t.Errorf("description of %d chars accepted", len(bad))
		}
	}
}

func TestAbbreviates(t *testing.T) {
	ws := func(s string) []string { return search.Terms(s) }
	for _, c := range []struct {
		abbr, org string
		want      bool
	}{
		{"polimi", "Politecnico di Milano", true},
		{"pdm", "Politecnico di Milano", true},
		{"unibo", "Università di Bologna", true},
		{"poli", "Politecnico di Milano", false}, // a prefix of one word is not an abbreviation
		{"milano", "Politecnico di Milano", false},
		{"fiat", "Fabbrica Italiana Automobili Torino", true},
		{"xyz", "Fabbrica Italiana Automobili Torino", false},
	} {
		if got := abbreviates(c.abbr, ws(c.org)); got != c.want {
			t.Errorf("abbreviates(%q, %q) = %v", c.abbr, c.org, got)
		}
	}
}

func TestReadVCardFolderWithBadFiles(t *testing.T) {
	dir := t.TempDir()
	localsourcetest.WriteFile(t, filepath.Join(dir, "good.vcf"), "BEGIN:VCARD\nFN:Good Person\nEMAIL:good@x.org\nEND:VCARD\n")
	localsourcetest.WriteFile(t, filepath.Join(dir, "sub", "nested.vcf"), "BEGIN:VCARD\nFN:Nested Person\nEND:VCARD\n")
	localsourcetest.WriteFile(t, filepath.Join(dir, "broken.vcf"), "\x00\x01 not a card")
	localsourcetest.WriteFile(t, filepath.Join(dir, ".hidden.vcf"), "BEGIN:VCARD\nFN:Hidden\nEND:VCARD\n")
	localsourcetest.WriteFile(t, filepath.Join(dir, "notes.txt"), "BEGIN:VCARD\nFN:Text\nEND:VCARD\n")
	big := filepath.Join(dir, "huge.vcf")
	localsourcetest.WriteFile(t, big, "")
	if err := os.Truncate(big, MaxVCardFileBytes+1); err != nil {
		t.Fatal(err)
	}
	res, err := ReadVCards(context.Background(), SourceConfig{Name: "dav", Kind: KindVCard, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Records {
		names = append(names, r.DisplayName()+"@"+r.SourceID)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"Good Person@good.vcf", "Nested Person@sub/nested.vcf"}) {
		t.Errorf("records %v", names)
	}
	if len(res.FailedPaths) != 2 || len(res.Errors) != 2 || !strings.Contains(res.Errors[0].Error()+res.Errors[1].Error(), "larger than") {
		t.Errorf("bad files: %v %v", res.FailedPaths, res.Errors)
	}
	if _, err := ReadVCards(context.Background(), SourceConfig{Name: "x", Path: filepath.Join(dir, "absent")}); !errors.Is(err, ErrMissing) {
		t.Errorf("missing: %v", err)
	}
}

func TestContactsConfig(t *testing.T) {
	c, err := ParseConfig([]byte("embed: off\nsources:\n  - {name: me, kind: vcard, path: ~/c}\n  - {name: mac, kind: apple, path: /Users/me/AB}\n"), "/home/me")
	if err != nil || c.Sources[0].Path != "/home/me/c" || c.Embed != "off" {
		t.Fatalf("config %+v %v", c, err)
	}
	for name, y := range map[string]string{
		"unknown key": "sources:\n  - {name: a, kind: vcard, path: /x, colour: red}\n",
		"kind":        "sources:\n  - {name: a, kind: outlook, path: /x}\n",
		"duplicate":   "sources:\n  - {name: a, kind: vcard, path: /x}\n  - {name: a, kind: vcard, path: /y}\n",
		"relative":    "sources:\n  - {name: a, kind: vcard, path: x}\n",
		"empty":       "embed: off\n",
	} {
		if _, err := ParseConfig([]byte(y), "/home/me"); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	home := t.TempDir()
	if _, err := LoadConfig(filepath.Join(home, "contacts.yaml"), home, "linux"); err == nil || !strings.Contains(err.Error(), "create it") {
		t.Errorf("missing config: %v", err)
	}
	os.MkdirAll(filepath.Join(home, "Library", "Application Support", "AddressBook"), 0o755)
	if c, err := LoadConfig(filepath.Join(home, "contacts.yaml"), home, "darwin"); err != nil || c.Sources[0].Kind != KindApple {
		t.Errorf("macOS discovery: %+v %v", c, err)
	}
}
