package contacts

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

type contactsEnv struct {
	t       *testing.T
	root    string
	cfg     *Config
	idx     *Index
	journal *writeops.Store
	w       *Writer
}

func newContactsEnv(t *testing.T) *contactsEnv {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "contacts")
	for _, b := range []string{"friends", "work"} {
		if err := os.MkdirAll(filepath.Join(root, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	e := &contactsEnv{t: t, root: root, cfg: &Config{Sources: []SourceConfig{{Name: "cards", Kind: KindVCard, Path: root}}}}
	var err error
	if e.idx, err = OpenIndex(ctx, filepath.Join(dir, "contacts-index.sqlitedb")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.idx.Close() })
	if e.journal, err = writeops.Open(ctx, filepath.Join(dir, "ops.db"), writeops.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.journal.Close() })
	e.w = NewWriter(WriterOptions{
		Config:  func(context.Context) (*Config, error) { return e.cfg, nil },
		Index:   func(context.Context) (*Index, error) { return e.idx, nil },
		Journal: e.journal, GOOS: "linux",
	})
	return e
}

func (e *contactsEnv) index() {
	e.t.Helper()
	time.Sleep(2 * time.Millisecond)
	if _, err := e.idx.Build(context.Background(), e.cfg, IndexOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// confirm indexes and runs a contacts confirmation pass; op must end confirmed.
func (e *contactsEnv) confirm(id string) {
	e.t.Helper()
	e.index()
	c := &Confirmer{Index: func(context.Context) (*Index, error) { return e.idx, nil }}
	cs := map[writeops.Kind]writeops.Confirmer{writeops.KindContactsCreate: c, writeops.KindContactsUpdate: c}
	if _, err := e.journal.Reconcile(context.Background(), writeops.DomainContacts, cs, 0); err != nil {
		e.t.Fatal(err)
	}
	op, _ := e.journal.Get(context.Background(), id)
	if op.State != writeops.StateConfirmed {
		e.t.Fatalf("%s is %s: %s (%s)", id, op.State, op.Note, op.Evidence)
	}
}

// khard runs Debian's khard on the friends address book.
func (e *contactsEnv) khard(args ...string) string {
	e.t.Helper()
	bin, err := osexec.LookPath("khard")
	if err != nil {
		e.t.Skip("khard is not installed (apt-get install khard)")
	}
	dir := e.t.TempDir()
	conf := "[addressbooks]\n[[friends]]\npath = " + filepath.Join(e.root, "friends") + "\n[[work]]\npath = " + filepath.Join(e.root, "work") +
		"\n[general]\ndebug = no\ndefault_action = list\neditor = /bin/false\nmerge_editor = /bin/false\n"
	cfg := filepath.Join(dir, "khard.conf")
	os.WriteFile(cfg, []byte(conf), 0o600)
	cmd := osexec.Command(bin, append([]string{"-c", cfg}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("khard %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestContactWritesAreReadByKhard(t *testing.T) {
	e := newContactsEnv(t)
	ctx := context.Background()
	emails := []Labeled{{Label: "work", Value: "anna.rossi@polimi.example", Primary: true}}
	phones := []Labeled{{Label: "cell", Value: "+39 333 123 4567"}}
	res, err := e.w.CreateContact(ctx, CreateContactParams{AddressBook: "friends", Contact: Contact{First: ptr("Anna"), Last: ptr("Rossi"),
		Organization: ptr("Politecnico; Milano"), Title: ptr("Researcher"), Emails: &emails, Phones: &phones,
		Notes: ptr("Met at the conference,\nlikes trains"), Birthday: ptr("1985-04-23")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != string(writeops.StateReturned) || !res.PendingConfirmation || res.Backend != BackendVCard || res.NativeID == "" {
		t.Fatalf("create: %+v", res)
	}
	e.confirm(res.OperationID)
	data, _ := os.ReadFile(filepath.Join(e.root, "friends", res.NativeID+".vcf"))
	for _, want := range []string{"VERSION:4.0\r\n", "UID:urn:uuid:" + res.NativeID + "\r\n", "FN:Anna Rossi\r\n", "N:Rossi;Anna;;;\r\n",
		`ORG:Politecnico\; Milano`, "EMAIL;TYPE=work;PREF=1:anna.rossi@polimi.example\r\n", `NOTE:Met at the conference\,\nlikes trains`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the card lacks %q:\n%s", want, data)
		}
	}
	out := e.khard("show", "Anna Rossi")
	for _, want := range []string{"Anna Rossi", "anna.rossi@polimi.example", "+39 333 123 4567", "Politecnico; Milano", "Researcher", "Birthday: 04/23/85", "likes trains"} {
		if !strings.Contains(out, want) {
			t.Errorf("khard show lacks %q:\n%s", want, out)
		}
	}

	// An update through Steward's uid changes the card in place.
	svc := NewService(e.idx, nil)
	found, err := svc.SearchContacts(ctx, SearchParams{Query: "Anna"})
	if err != nil || len(found.Contacts) != 1 {
		t.Fatalf("search: %+v %v", found, err)
	}
	newEmails := []Labeled{{Label: "home", Value: "anna@rossi.example"}, {Label: "work", Value: "anna.rossi@polimi.example"}}
	res, err = e.w.UpdateContact(ctx, UpdateContactParams{UID: found.Contacts[0].UID, Contact: Contact{Emails: &newEmails, Title: ptr("Professor")}})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res.OperationID)
	out = e.khard("email", "--parsable", "Anna")
	for _, want := range []string{"anna@rossi.example", "anna.rossi@polimi.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("khard email lacks %q:\n%s", want, out)
		}
	}
	if out := e.khard("show", "Anna Rossi"); !strings.Contains(out, "Professor") || strings.Contains(out, "Researcher") {
		t.Errorf("khard show after the update:\n%s", out)
	}
}

// Other clients' properties survive an update; only what changed is rewritten.
func TestUpdateKeepsForeignProperties(t *testing.T) {
	e := newContactsEnv(t)
	card := "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:abc-1\r\nFN:Marco Bianchi\r\nN:Bianchi;Marco;;;\r\n" +
		"item1.EMAIL;type=INTERNET:marco@old.example\r\nitem1.X-ABLabel:_$!<Other>!$_\r\nX-CUSTOM:keep me\r\n" +
		"PHOTO;ENCODING=b;TYPE=JPEG:AAAA\r\nEND:VCARD\r\n"
	os.WriteFile(filepath.Join(e.root, "work", "abc-1.vcf"), []byte(card), 0o644)
	e.index()
	emails := []Labeled{{Value: "marco@new.example"}}
	res, err := e.w.UpdateContact(context.Background(), UpdateContactParams{UID: "abc-1", Contact: Contact{Emails: &emails}})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res.OperationID)
	data, _ := os.ReadFile(filepath.Join(e.root, "work", "abc-1.vcf"))
	got := string(data)
	for _, want := range []string{"X-CUSTOM:keep me", "PHOTO;ENCODING=b;TYPE=JPEG:AAAA", "FN:Marco Bianchi", "EMAIL:marco@new.example", "REV:"} {
		if !strings.Contains(got, want) {
			t.Errorf("card lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"marco@old.example", "X-ABLabel"} {
		if strings.Contains(got, gone) {
			t.Errorf("card still has %q:\n%s", gone, got)
		}
	}
}

func TestBadContactWritesWriteNothing(t *testing.T) {
	e := newContactsEnv(t)
	ctx := context.Background()
	list := func(ls ...Labeled) *[]Labeled { return &ls }
	for _, tc := range []struct {
		name string
		p    CreateContactParams
		want string
	}{
		{"no name", CreateContactParams{AddressBook: "friends"}, "needs a name"},
		{"bad email", CreateContactParams{AddressBook: "friends", Contact: Contact{First: ptr("A"), Emails: list(Labeled{Value: "not an address"})}}, `email "not an address"`},
		{"bad phone", CreateContactParams{AddressBook: "friends", Contact: Contact{First: ptr("A"), Phones: list(Labeled{Value: "call me"})}}, "no digits"},
		{"bad birthday", CreateContactParams{AddressBook: "friends", Contact: Contact{First: ptr("A"), Birthday: ptr("23/04/1985")}}, "not a date"},
		{"unknown book", CreateContactParams{AddressBook: "family", Contact: Contact{First: ptr("A")}}, `unknown address book "family"`},
		{"book left out among two", CreateContactParams{Contact: Contact{First: ptr("A")}}, "say which address book"},
	} {
		_, err := e.w.CreateContact(ctx, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := e.w.UpdateContact(ctx, UpdateContactParams{UID: "c-nobody", Contact: Contact{Title: ptr("x")}}); err == nil {
		t.Error("update of an unknown contact succeeded")
	}
	entries, _ := os.ReadDir(filepath.Join(e.root, "friends"))
	ops, _ := e.journal.List(ctx, writeops.Filter{})
	if len(entries) != 0 || len(ops) != 0 {
		t.Errorf("rejected writes left %d files and %d journal rows", len(entries), len(ops))
	}
}

// Contacts.app is addressed by the native person id, never the index uid.
func TestContactsAppleScript(t *testing.T) {
	p := &Plan{Op: "update", Backend: BackendAppleScript, NativeID: `ABC-1:ABPerson`, Values: Contact{Last: ptr(`O"Brien`),
		Emails: &[]Labeled{{Label: "work", Value: "x@y.example"}}, Birthday: ptr("1985-04-23")}}
	s, err := contactsScript(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`if not (exists person id "ABC-1:ABPerson") then error "person ABC-1:ABPerson is not in Contacts; nothing was changed" number 7001`,
		`set p to person id "ABC-1:ABPerson"`, `set last name of p to "O\"Brien"`, "delete every email of p\n",
		`make new email at end of emails of p with properties {label:"work", value:"x@y.example"}`,
		"set year of bd to 1985\nset month of bd to 4\nset day of bd to 23\n", "save\nreturn id of p\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "first name") {
		t.Errorf("an absent field was set:\n%s", s)
	}
}

func ptr[T any](v T) *T { return &v }
