package contacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// Backends of contact writes.
const (
	BackendVCard       = "vcard"       // a vCard 4.0 file in a vdir folder
	BackendAppleScript = "applescript" // Contacts.app, by native person id
)

// Contact is the values a write sets. Nil fields stay as they are; lists
// replace the whole list.
type Contact struct {
	FullName     *string    `json:"fullName,omitempty" jsonschema:"the displayed name (default: first and last)"`
	First        *string    `json:"first,omitempty"`
	Last         *string    `json:"last,omitempty"`
	Nickname     *string    `json:"nickname,omitempty"`
	Organization *string    `json:"organization,omitempty"`
	Title        *string    `json:"title,omitempty" jsonschema:"job title"`
	Notes        *string    `json:"notes,omitempty"`
	Birthday     *string    `json:"birthday,omitempty" jsonschema:"YYYY-MM-DD"`
	Emails       *[]Labeled `json:"emails,omitempty" jsonschema:"replaces the email addresses: value, optional label (home, work) and primary"`
	Phones       *[]Labeled `json:"phones,omitempty" jsonschema:"replaces the phone numbers: value and optional label (cell, home, work)"`
	Addresses    *[]Address `json:"addresses,omitempty" jsonschema:"replaces the postal addresses"`
}

// CreateContactParams are the arguments of create_contact.
type CreateContactParams struct {
	AddressBook string `json:"addressBook,omitempty" jsonschema:"the address book (vdir folder name or source/name); may be left out when there is only one"`
	Contact
}

// UpdateContactParams are the arguments of update_contact.
type UpdateContactParams struct {
	UID string `json:"uid" jsonschema:"the contact's uid from search_contacts, a native person id or an email"`
	// NativeID picks the source record when the contact merges several.
	NativeID string `json:"nativeId,omitempty" jsonschema:"the native person id of the record to change, when the contact was merged from several sources (read_contact lists them)"`
	Contact
}

// Book is an address book writes can go to.
type Book struct {
	Source string `json:"source"`
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Title  string `json:"title"`
	Dir    string `json:"dir,omitempty"`
	// NotWritable says why writes cannot go here.
	NotWritable string `json:"notWritable,omitempty"`
}

// QualifiedID is source/id.
func (b Book) QualifiedID() string { return b.Source + "/" + b.ID }

// Plan is one approved contact write, as journaled and executed.
type Plan struct {
	Op      string `json:"op"` // create or update
	Backend string `json:"backend"`
	Book    Book   `json:"book"`
	// NativeID is the record's own id: the vCard UID (chosen before
	// journaling for a create) or Apple's person id. Never the index uid.
	NativeID string  `json:"nativeId,omitempty"`
	Path     string  `json:"path,omitempty"`
	Name     string  `json:"name"`
	Values   Contact `json:"values"`
	Params   any     `json:"params"`
}

// Journal records writes before they run; *writeops.Store is one.
type Journal interface {
	Execute(ctx context.Context, n writeops.NewOperation, ex writeops.Executor) (writeops.Operation, error)
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	Config  func(ctx context.Context) (*Config, error)
	Index   func(ctx context.Context) (*Index, error)
	Journal Journal
	// Script runs Contacts.app scripts (macOS); nil refuses Apple writes.
	Script osascript.Runner
	GOOS   string
	Now    func() time.Time
}

// Writer serves create_contact and update_contact.
type Writer struct{ o WriterOptions }

// NewWriter returns a Writer.
func NewWriter(o WriterOptions) *Writer {
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Writer{o: o}
}

// books lists the address books of the configuration.
func (w *Writer) books(ctx context.Context) ([]Book, error) {
	if w.o.Config == nil {
		return nil, errors.New("contact writes need contacts.yaml")
	}
	cfg, err := w.o.Config(ctx)
	if err != nil {
		return nil, err
	}
	var out []Book
	for _, src := range cfg.Sources {
		switch src.Kind {
		case KindVCard:
			st, err := os.Stat(src.Path)
			if err != nil {
				return nil, sourceError("list address books of", src.Path, err)
			}
			if !st.IsDir() {
				out = append(out, Book{Source: src.Name, Kind: src.Kind, ID: filepath.Base(src.Path), Title: filepath.Base(src.Path),
					NotWritable: "source " + src.Name + " is a single .vcf file; Steward writes one file per contact into a vdir folder"})
				continue
			}
			dirs, err := localsource.Collections(src.Path, ".vcf", ".vcard")
			if err != nil {
				return nil, sourceError("list address books of", src.Path, err)
			}
			for _, d := range dirs {
				out = append(out, Book{Source: src.Name, Kind: src.Kind, ID: filepath.Base(d), Title: localsource.DisplayName(d), Dir: d})
			}
		case KindApple:
			b := Book{Source: src.Name, Kind: src.Kind, ID: "contacts", Title: "Contacts"}
			switch {
			case w.o.GOOS != "darwin":
				b.NotWritable = "Apple Contacts can only be changed on macOS (through Contacts.app)"
			case w.o.Script == nil:
				b.NotWritable = "Contacts.app cannot be scripted in this process"
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// normalize checks and trims the values of a write.
func normalize(c Contact) (Contact, error) {
	trim := func(p **string) {
		if *p != nil {
			v := strings.TrimSpace(**p)
			*p = &v
		}
	}
	for _, p := range []**string{&c.FullName, &c.First, &c.Last, &c.Nickname, &c.Organization, &c.Title, &c.Notes, &c.Birthday} {
		trim(p)
	}
	if c.Birthday != nil && *c.Birthday != "" {
		if _, err := time.Parse(time.DateOnly, *c.Birthday); err != nil {
			return c, fmt.Errorf("birthday %q is not a date such as 1980-04-23", *c.Birthday)
		}
	}
	if c.Emails != nil {
		list := make([]Labeled, 0, len(*c.Emails))
		for _, e := range *c.Emails {
			v := strings.TrimSpace(e.Value)
			a, err := mail.ParseAddress(v)
			if err != nil || a.Address != v || !strings.Contains(v, "@") {
				return c, fmt.Errorf("email %q is not an address such as anna@example.com", e.Value)
			}
			list = append(list, Labeled{Label: strings.ToLower(strings.TrimSpace(e.Label)), Value: v, Primary: e.Primary})
		}
		c.Emails = &list
	}
	if c.Phones != nil {
		list := make([]Labeled, 0, len(*c.Phones))
		for _, p := range *c.Phones {
			v := strings.TrimSpace(p.Value)
			if len(normalizePhone(v)) < 3 {
				return c, fmt.Errorf("phone %q has no digits to dial", p.Value)
			}
			list = append(list, Labeled{Label: strings.ToLower(strings.TrimSpace(p.Label)), Value: v, Primary: p.Primary})
		}
		c.Phones = &list
	}
	if c.Addresses != nil {
		list := make([]Address, 0, len(*c.Addresses))
		for _, a := range *c.Addresses {
			a.Label = strings.ToLower(strings.TrimSpace(a.Label))
			if a.String() == "" {
				return c, errors.New("an address needs at least one of street, city, region, postcode or country")
			}
			list = append(list, a)
		}
		c.Addresses = &list
	}
	return c, nil
}

// displayName is the name a create shows: FullName, else first and last.
func (c Contact) displayName() string {
	if c.FullName != nil && *c.FullName != "" {
		return *c.FullName
	}
	return strings.TrimSpace(strings.Join(nonEmpty(deref(c.First), deref(c.Last)), " "))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (w *Writer) planCreate(ctx context.Context, p CreateContactParams) (*Plan, *CreateContactParams, error) {
	vals, err := normalize(p.Contact)
	if err != nil {
		return nil, nil, err
	}
	name := vals.displayName()
	if name == "" && deref(vals.Organization) == "" {
		return nil, nil, errors.New("a contact needs a name (first, last or fullName) or an organization")
	}
	if name == "" {
		name = deref(vals.Organization)
	}
	if vals.FullName == nil || *vals.FullName == "" {
		vals.FullName = &name
	}
	books, err := w.books(ctx)
	if err != nil {
		return nil, nil, err
	}
	book, err := pickBook(books, p.AddressBook)
	if err != nil {
		return nil, nil, err
	}
	norm := CreateContactParams{AddressBook: book.QualifiedID(), Contact: vals}
	plan := &Plan{Op: "create", Book: book, Name: name, Values: vals, Params: norm}
	switch book.Kind {
	case KindVCard:
		plan.Backend, plan.NativeID = BackendVCard, localsource.NewUUID()
		plan.Path = filepath.Join(book.Dir, strings.ToLower(plan.NativeID)+".vcf")
	case KindApple:
		plan.Backend = BackendAppleScript
		if err := checkAppleValues(p.Contact, strings.TrimSpace(deref(vals.First)+" "+deref(vals.Last))); err != nil {
			return nil, nil, err
		}
	}
	return plan, &norm, nil
}

func pickBook(books []Book, id string) (Book, error) {
	id = strings.TrimSpace(id)
	var found []Book
	var names []string
	for _, b := range books {
		names = append(names, fmt.Sprintf("%q (%s)", b.QualifiedID(), b.Title))
		if id == "" || b.QualifiedID() == id || b.ID == id || strings.EqualFold(b.Title, id) {
			found = append(found, b)
		}
	}
	switch {
	case len(found) == 0:
		return Book{}, fmt.Errorf("unknown address book %q; the address books are %s", id, strings.Join(names, ", "))
	case len(found) > 1 && id == "":
		return Book{}, fmt.Errorf("say which address book: %s", strings.Join(names, ", "))
	case len(found) > 1:
		return Book{}, fmt.Errorf("address book %q is ambiguous; pass its source/id: %s", id, strings.Join(names, ", "))
	case found[0].NotWritable != "":
		return Book{}, fmt.Errorf("address book %q cannot be written: %s", found[0].Title, found[0].NotWritable)
	}
	return found[0], nil
}

// planUpdate resolves the contact to one source record: the index uid is
// Steward's, so the record to change is named by its native id.
func (w *Writer) planUpdate(ctx context.Context, p UpdateContactParams) (*Plan, *UpdateContactParams, error) {
	vals, err := normalize(p.Contact)
	if err != nil {
		return nil, nil, err
	}
	if (vals == Contact{}) {
		return nil, nil, errors.New("nothing to change: give at least one field to update")
	}
	if vals.FullName != nil && *vals.FullName == "" {
		return nil, nil, errors.New("fullName cannot be empty")
	}
	key := strings.TrimSpace(p.UID)
	if key == "" {
		return nil, nil, errors.New("uid is required")
	}
	if w.o.Index == nil {
		return nil, nil, ErrNoIndex
	}
	idx, err := w.o.Index(ctx)
	if err != nil {
		return nil, nil, err
	}
	recs, err := idx.recordsOf(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if n := strings.TrimSpace(p.NativeID); n != "" {
		recs = slices.DeleteFunc(recs, func(r storedRecord) bool { return r.NativeID != n })
	}
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("%w: no contact record with uid, native id or email %q (and native id %q)", ErrNotFound, key, p.NativeID)
	}
	if len(recs) > 1 {
		var ids []string
		for _, r := range recs {
			ids = append(ids, fmt.Sprintf("%s (%s)", r.NativeID, r.Source))
		}
		return nil, nil, fmt.Errorf("contact %q merges %d records; pass nativeId, one of %s", key, len(recs), strings.Join(ids, ", "))
	}
	r := recs[0]
	books, err := w.books(ctx)
	if err != nil {
		return nil, nil, err
	}
	var book *Book
	for i, b := range books {
		if b.Source == r.Source && (b.Kind == KindApple || b.Dir == filepath.Dir(r.path)) {
			book = &books[i]
		}
	}
	if book == nil {
		return nil, nil, fmt.Errorf("contact %q is in source %s, which has no writable address book", key, r.Source)
	}
	if book.NotWritable != "" {
		return nil, nil, fmt.Errorf("contact %q cannot be changed: %s", key, book.NotWritable)
	}
	norm := p
	norm.NativeID, norm.Contact = r.NativeID, vals
	plan := &Plan{Op: "update", Book: *book, NativeID: r.NativeID, Path: r.path, Name: r.DisplayName(), Values: vals, Params: norm}
	if book.Kind == KindApple {
		plan.Backend = BackendAppleScript
		if err := checkAppleValues(vals, ""); err != nil {
			return nil, nil, err
		}
	} else {
		plan.Backend = BackendVCard
	}
	return plan, &norm, nil
}

// storedRecord is a record as the index keeps it, with its file.
type storedRecord struct {
	Record
	path string
}

// recordsOf returns the source records of the person key names (index uid,
// native id or email).
func (x *Index) recordsOf(ctx context.Context, key string) ([]storedRecord, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT r.data, r.path FROM records r JOIN person_sources ps
		ON ps.source = r.source AND ps.source_id = r.source_id AND ps.native_id = r.native_id
		WHERE ps.person_id IN (SELECT id FROM people WHERE uid = ?
			UNION SELECT person_id FROM person_sources WHERE native_id = ?
			UNION SELECT person_id FROM person_emails WHERE email = ?)
		AND (? NOT IN (SELECT native_id FROM person_sources) OR r.native_id = ?)
		ORDER BY r.source, r.native_id`, key, key, NormalizeEmail(key), key, key)
	if err != nil {
		return nil, fmt.Errorf("look up contact %q: %w", key, err)
	}
	defer rows.Close()
	var out []storedRecord
	for rows.Next() {
		var data, path string
		if err := rows.Scan(&data, &path); err != nil {
			return nil, err
		}
		var r storedRecord
		if err := jsonUnmarshal(data, &r.Record); err != nil {
			return nil, err
		}
		r.path = path
		out = append(out, r)
	}
	return out, rows.Err()
}

// PreflightCreate validates create_contact's arguments and returns them
// normalised (the address book resolved).
func (w *Writer) PreflightCreate(ctx context.Context, p CreateContactParams) (*CreateContactParams, error) {
	_, norm, err := w.planCreate(ctx, p)
	return norm, err
}

// PreflightUpdate validates update_contact's arguments and resolves the
// record to change (its native id).
func (w *Writer) PreflightUpdate(ctx context.Context, p UpdateContactParams) (*UpdateContactParams, error) {
	_, norm, err := w.planUpdate(ctx, p)
	return norm, err
}

// WriteResult is what a contact write tool returns.
type WriteResult struct {
	OperationID string `json:"operationId"`
	State       string `json:"state"`
	// PendingConfirmation: the backend returned; a later index run confirms.
	PendingConfirmation bool   `json:"pendingConfirmation,omitempty"`
	NativeID            string `json:"nativeId,omitempty"`
	Backend             string `json:"backend"`
	Message             string `json:"message"`
}

// CreateContact implements create_contact.
func (w *Writer) CreateContact(ctx context.Context, p CreateContactParams) (*WriteResult, error) {
	plan, _, err := w.planCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	return w.execute(ctx, plan, writeops.KindContactsCreate, "create_contact")
}

// UpdateContact implements update_contact.
func (w *Writer) UpdateContact(ctx context.Context, p UpdateContactParams) (*WriteResult, error) {
	plan, _, err := w.planUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	return w.execute(ctx, plan, writeops.KindContactsUpdate, "update_contact")
}

// Outcome is what a contact backend reports.
type Outcome struct {
	Backend     string    `json:"backend"`
	NativeID    string    `json:"nativeId,omitempty"`
	Path        string    `json:"path,omitempty"`
	CompletedAt time.Time `json:"completedAt"`
}

func (w *Writer) execute(ctx context.Context, plan *Plan, kind writeops.Kind, tool string) (*WriteResult, error) {
	if w.o.Journal == nil {
		return nil, errors.New("contact writes need the write journal (STEWARD_HOME/write-ops/ops.db)")
	}
	if plan.Backend == BackendAppleScript && w.o.Script == nil {
		return nil, errors.New("Contacts.app cannot be scripted in this process; nothing was written")
	}
	op, _ := w.o.Journal.Execute(ctx, writeops.NewOperation{Kind: kind, Tool: tool, Input: plan, Expected: plan.expected(),
		Summary: fmt.Sprintf("contacts %s in %s: %s", plan.Op, plan.Book.Title, plan.Name)},
		writeops.ExecutorFunc(func(ctx context.Context, op writeops.Operation) (any, error) {
			var p Plan
			if err := op.Decode(&p); err != nil {
				return nil, writeops.NotDone(fmt.Errorf("decode journaled plan: %w", err))
			}
			return w.apply(ctx, &p)
		}))
	if op.ID == "" {
		return nil, errors.New("the write journal did not record the operation; nothing was written")
	}
	res := &WriteResult{OperationID: op.ID, State: string(op.State), NativeID: plan.NativeID, Backend: plan.Backend}
	var out Outcome
	if jsonUnmarshal(string(op.Result), &out) == nil && out.NativeID != "" {
		res.NativeID = out.NativeID
	}
	switch op.State {
	case writeops.StateFailed:
		res.Message = "NOT DONE: nothing was written: " + op.Error
	case writeops.StateUnknown:
		res.Message = "UNCERTAIN: the contacts backend did not say whether the change was made (" + op.Error + "). Do not retry."
	default:
		res.PendingConfirmation = true
		res.Message = "Written; pending confirmation by the next contacts index run (read_write_operation " + op.ID + ")."
	}
	return res, nil
}

func (w *Writer) apply(ctx context.Context, p *Plan) (*Outcome, error) {
	out := &Outcome{Backend: p.Backend, NativeID: p.NativeID, Path: p.Path}
	var err error
	switch p.Backend {
	case BackendVCard:
		err = writeVCard(p, w.o.Now())
	case BackendAppleScript:
		if w.o.Script == nil {
			return out, writeops.NotDone(errors.New("the plan was journaled for Contacts.app, which this process cannot script"))
		}
		var id string
		id, err = runContactsScript(ctx, w.o.Script, p)
		if p.Op == "create" && id != "" {
			out.NativeID = id
		}
	default:
		err = writeops.NotDone(fmt.Errorf("unknown contacts backend %q", p.Backend))
	}
	out.CompletedAt = w.o.Now()
	return out, err
}

// writeVCard creates a vCard 4.0 file, or rewrites the managed properties
// of the card with the plan's UID in its file, atomically.
func writeVCard(p *Plan, now time.Time) error {
	if p.Op == "create" {
		card := newCard(p.NativeID, p.Values, now)
		err := localsource.WriteFileAtomic(p.Path, card, localsource.WriteOptions{Perm: 0o644, NoClobber: true})
		var pub *localsource.PublishedError
		if err != nil && !errors.As(err, &pub) {
			return writeops.NotDone(err)
		}
		return err
	}
	raw, err := localsource.ReadBounded(p.Path, MaxVCardFileBytes)
	if err != nil {
		return writeops.NotDone(fmt.Errorf("read %s: %w", p.Path, err))
	}
	updated, err := editCard(raw, p.NativeID, p.Values, now)
	if err != nil {
		return writeops.NotDone(fmt.Errorf("%s: %w", p.Path, err))
	}
	if again, err := localsource.ReadBounded(p.Path, MaxVCardFileBytes); err != nil || !bytes.Equal(again, raw) {
		return writeops.NotDone(fmt.Errorf("%s changed while Steward was editing it; nothing was written, try again", p.Path))
	}
	err = localsource.WriteFileAtomic(p.Path, updated, localsource.WriteOptions{Perm: 0o644})
	var pub *localsource.PublishedError
	if err != nil && !errors.As(err, &pub) {
		return writeops.NotDone(err)
	}
	return err
}
