package cards

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Options configures a Store.
type Options struct {
	// StateDir is the project's .saivage directory.
	StateDir string
	// Publisher performs every write; an unknown outcome is fatal.
	Publisher *state.Publisher
	// Workflows are the compiled card types.
	Workflows *workflow.Set
	// Now stamps documents; time.Now when nil.
	Now func() time.Time
}

// Store reads and mutates the card tree. Its writes serialise within the
// process (reads share, Children takes no lock); the project lock excludes
// other processes.
type Store struct {
	// mu is held exclusively by writes and shared by reads: a read never
	// sees a write half done, and reads proceed together.
	mu       sync.RWMutex
	dir      string
	pub      *state.Publisher
	wf       *workflow.Set
	now      func() time.Time
	records  *records.Store
	sessions *conversations.Store
}

// New returns a Store over StateDir/cards.
func New(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		dir: filepath.Join(opts.StateDir, "cards"), pub: opts.Publisher, wf: opts.Workflows, now: now,
		records:  records.New(records.Options{Publisher: opts.Publisher, Now: now}),
		sessions: conversations.New(opts.Publisher),
	}
}

// Records returns the record store used for cards' records.
func (s *Store) Records() *records.Store { return s.records }

// Sessions returns the conversation store used for card sessions.
func (s *Store) Sessions() *conversations.Store { return s.sessions }

// CardDir returns the directory of a card.
func (s *Store) CardDir(id string) string { return filepath.Join(s.dir, id) }

// SessionDir returns the directory of a card's session for agent.
func (s *Store) SessionDir(id, agent string) string {
	return filepath.Join(s.CardDir(id), "conversations", agent)
}

func (s *Store) headPath(id string) string { return filepath.Join(s.CardDir(id), "head.json") }

// docPath returns a card document path. Documents are named
// "<version>-<random>.json" so that a document published before a crash
// that prevented its head never blocks the next publication.
func (s *Store) docPath(id, name string) string {
	return filepath.Join(s.CardDir(id), "history", name)
}

func docName(version int) string {
	return strconv.Itoa(version) + "-" + state.NewUUID()[:8] + ".json"
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// AdmissionError names the exact file that failed strict admission.
type AdmissionError struct {
	Path string
	Msg  string
}

func (e *AdmissionError) Error() string { return e.Path + ": " + e.Msg }

func admErr(path, format string, args ...any) error {
	return &AdmissionError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// readHead reads a card head strictly.
func (s *Store) readHead(id string) (Head, error) {
	p := s.headPath(id)
	data, err := state.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Head{}, opErr("read", id, ErrNotFound)
		}
		return Head{}, admErr(p, "%v", err)
	}
	var h Head
	if err := strictJSON(data, &h); err != nil {
		return Head{}, admErr(p, "invalid card head: %v", err)
	}
	switch {
	case h.Format != HeadFormat:
		return Head{}, admErr(p, "card head format %d, want %d", h.Format, HeadFormat)
	case h.Card != id:
		return Head{}, admErr(p, "head belongs to card %q", h.Card)
	case h.HeadUUID == "" || h.Version < 1 || h.Revision < h.Version || h.Mailbox == nil ||
		!strings.HasPrefix(h.Document, strconv.Itoa(h.Version)+"-") || strings.ContainsAny(h.Document, "/\\"):
		return Head{}, admErr(p, "invalid card head fields")
	}
	return h, nil
}

// readDoc reads and validates document name, which must be version v.
func (s *Store) readDoc(id, name string, v int) (Card, error) {
	p := s.docPath(id, name)
	data, err := state.ReadFile(p)
	if err != nil {
		return Card{}, admErr(p, "%v", err)
	}
	var c Card
	if err := strictJSON(data, &c); err != nil {
		return Card{}, admErr(p, "invalid card document: %v", err)
	}
	switch {
	case c.Format != CardFormat:
		return Card{}, admErr(p, "card format %d, want %d", c.Format, CardFormat)
	case c.Kind != KindOrdinary && c.Kind != KindTombstone:
		return Card{}, admErr(p, "unknown card kind %q", c.Kind)
	case c.ID != id || c.Version != v:
		return Card{}, admErr(p, "document is %s version %d", c.ID, c.Version)
	case c.Parent != ParentOf(id) || c.Depth != DepthOf(id):
		return Card{}, admErr(p, "parent/depth %q/%d do not match the identifier", c.Parent, c.Depth)
	case !c.Status.Valid():
		return Card{}, admErr(p, "unknown status %q", c.Status)
	case c.Dependencies == nil || c.Children == nil:
		return Card{}, admErr(p, "missing dependencies or children list")
	}
	if _, ok := s.wf.Table(c.Type); !ok {
		return Card{}, admErr(p, "card type %q is not in the compiled configuration", c.Type)
	}
	return c, nil
}

// read returns the current head and selected document.
func (s *Store) read(id string) (Head, Card, error) {
	if !ValidID(id) {
		return Head{}, Card{}, opErr("read", id, ErrNotFound)
	}
	h, err := s.readHead(id)
	if err != nil {
		return Head{}, Card{}, err
	}
	c, err := s.readDoc(id, h.Document, h.Version)
	if err != nil {
		return Head{}, Card{}, err
	}
	return h, c, nil
}

// Get returns a card's current document (ordinary or tombstone).
func (s *Store) Get(ctx context.Context, id string) (Card, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, c, err := s.read(id)
	return c, err
}

// GetHead returns a card's head and current document.
func (s *Store) GetHead(ctx context.Context, id string) (Head, Card, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.read(id)
}

// readConcurrency bounds the cards one Children call reads at once: enough
// to overlap many children's open/read system calls, few enough to leave
// descriptors and cores to everything else.
const readConcurrency = 8

// Children returns card id's current document and, in its order, the
// current documents of its immediate children (none for a tombstone), the
// children read concurrently. Nothing is cached: the card files stay the
// only source.
//
// It takes no lock, so a tree read never waits for a write's fsyncs: every
// head is replaced by rename and names a document that was written before
// it and is never removed, so each card read is one whole version; and
// Create publishes a child before the parent that lists it, so every listed
// child has a head. A child may be newer than the parent version read.
func (s *Store) Children(ctx context.Context, id string) (Card, []Card, error) {
	_, c, err := s.read(id)
	if err != nil || c.Tombstoned() {
		return c, nil, err
	}
	kids := make([]Card, len(c.Children))
	errs := make([]error, len(c.Children))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(readConcurrency, len(c.Children)) {
		wg.Go(func() {
			for i := range next {
				_, kids[i], errs[i] = s.read(c.Children[i])
			}
		})
	}
	for i := range c.Children {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return c, nil, fmt.Errorf("read the children of %s: %w", id, err)
	}
	for i, err := range errs {
		if errors.Is(err, ErrNotFound) { // a listed child without a head is damage, not absence
			return c, nil, admErr(s.headPath(c.Children[i]), "child of %s has no head", id)
		}
		if err != nil {
			return c, nil, err
		}
	}
	return c, kids, nil
}

// publish writes c as the next version and selects it.
func (s *Store) publish(h Head, c Card, initial bool) (Head, Card, error) {
	c.Version = h.Version + 1
	c.Revision = h.Revision + 1
	c.Previous = h.Document
	c.UpdatedAt = s.now().UTC()
	if c.Dependencies == nil {
		c.Dependencies = []string{}
	}
	if c.Children == nil {
		c.Children = []string{}
	}
	data, err := json.Marshal(c)
	if err != nil {
		return Head{}, Card{}, err
	}
	name := docName(c.Version)
	if err := s.pub.CreateNew(s.docPath(c.ID, name), data); err != nil {
		return Head{}, Card{}, fmt.Errorf("publish card %s version %d: %w", c.ID, c.Version, err)
	}
	nh := Head{Format: HeadFormat, HeadUUID: state.NewUUID(), Card: c.ID, Document: name, Version: c.Version, Revision: c.Revision, Mailbox: h.Mailbox}
	if nh.Mailbox == nil {
		nh.Mailbox = []string{}
	}
	if err := s.publishHead(nh, initial); err != nil {
		return Head{}, Card{}, err
	}
	return nh, c, nil
}

func (s *Store) publishHead(h Head, initial bool) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.pub.PublishHead(s.CardDir(h.Card), "head.json", data, initial)
}

func validText(title, desc string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return fmt.Errorf("%w: title is required", ErrInvalid)
	case len(title) > MaxTitle || strings.ContainsAny(title, "\n\r"):
		return fmt.Errorf("%w: title must be one line of at most %d bytes", ErrInvalid, MaxTitle)
	case len(desc) > MaxDescription:
		return fmt.Errorf("%w: description over %d bytes", ErrInvalid, MaxDescription)
	case !utf8.ValidString(title) || !utf8.ValidString(desc):
		return fmt.Errorf("%w: text is not valid UTF-8", ErrInvalid)
	}
	return nil
}

// CreateInput describes a new card.
type CreateInput struct {
	// Parent is the parent card ID; empty creates the root (type "project").
	Parent       string
	Type         string
	Title        string
	Description  string
	Dependencies []string
	// Bootstrap holds content for the new card's bootstrap records; each is
	// accepted as version 1 authored by Author.
	Bootstrap map[string]string
	Author    string
	// Commission, for the root of a native Git project, runs after the
	// root's card directories and session indexes exist and before its
	// authored records and first head: it creates the root's private ref
	// and returns the completed source facts the first head selects.
	Commission func() (*SourceFacts, error)
}

// Create creates a card. The root is created when Parent is empty and no
// root exists. A child's identifier is the first parent-local segment whose
// directory this call creates exclusively.
func (s *Store) Create(ctx context.Context, in CreateInput) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := validText(in.Title, in.Description); err != nil {
		return Card{}, opErr("create card under", in.Parent, err)
	}
	if in.Author == "" {
		return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: author is required", ErrInvalid))
	}
	tbl, ok := s.wf.Table(in.Type)
	if !ok {
		return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: unknown card type %q", ErrChildType, in.Type))
	}
	for name := range in.Bootstrap {
		if r, ok := tbl.Record(name); !ok || !r.Bootstrap {
			return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: %q is not a bootstrap record of %s", ErrInvalid, name, in.Type))
		}
	}
	var ph Head
	var parent Card
	if in.Parent == "" {
		if in.Type != config.RootCardType || len(in.Dependencies) > 0 {
			return Card{}, opErr("create root", RootID, fmt.Errorf("%w: the root has type %s and no dependencies", ErrInvalid, config.RootCardType))
		}
	} else {
		var err error
		if ph, parent, err = s.read(in.Parent); err != nil {
			return Card{}, err
		}
		switch {
		case parent.Tombstoned():
			return Card{}, opErr("create card under", in.Parent, ErrTombstoned)
		case parent.Depth >= MaxDepth:
			return Card{}, opErr("create card under", in.Parent, ErrDepth)
		case !parent.Status.AdmitsChildCreation():
			return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: parent is %s", ErrStatus, parent.Status))
		}
		ptbl, _ := s.wf.Table(parent.Type)
		if !ptbl.PermitsChild(in.Type) {
			return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: %s under %s", ErrChildType, in.Type, parent.Type))
		}
		if err := s.checkDeps(parent, "", in.Dependencies); err != nil {
			return Card{}, opErr("create card under", in.Parent, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return Card{}, err
	}
	id, err := s.claim(in.Parent)
	if err != nil {
		return Card{}, err
	}
	// Establish the namespace, records and sessions before the first head.
	dir := s.CardDir(id)
	if err := s.establish(dir, id, tbl); err != nil {
		return Card{}, err
	}
	var facts *SourceFacts
	if in.Commission != nil {
		if id != RootID {
			return Card{}, opErr("create card under", in.Parent, fmt.Errorf("%w: only the root is commissioned", ErrInvalid))
		}
		if facts, err = in.Commission(); err != nil {
			return Card{}, err
		}
		if err := facts.check(id, nil); err != nil || facts == nil {
			return Card{}, opErr("commission", id, fmt.Errorf("%w: incomplete root source facts: %v", ErrInvalid, err))
		}
	}
	for _, r := range tbl.Records() {
		if content, ok := in.Bootstrap[r.Name]; ok && strings.TrimSpace(content) != "" {
			if _, err := s.records.AcceptContent(records.Ref{CardDir: dir, Card: id, Name: r.Name}, content, in.Author); err != nil {
				return Card{}, err
			}
		}
	}
	now := s.now().UTC()
	c := Card{Format: CardFormat, Kind: KindOrdinary, ID: id, Type: in.Type, Parent: in.Parent, Depth: DepthOf(id),
		Title: in.Title, Description: in.Description, Status: Backlog, Dependencies: slices.Clone(in.Dependencies),
		Author: in.Author, CreatedAt: now, Git: facts}
	_, c, err = s.publish(Head{}, c, true)
	if err != nil {
		return Card{}, err
	}
	if in.Parent != "" {
		parent.Children = append(slices.Clone(parent.Children), id)
		if _, _, err := s.publish(ph, parent, false); err != nil {
			return Card{}, err
		}
	}
	return c, nil
}

// claim allocates the next identifier under parent by exclusive mkdir,
// starting at segment a every time; only EEXIST advances.
// establish prepares a new card's namespace, records and sessions before
// its first head is published.
func (s *Store) establish(dir, id string, tbl *workflow.Table) error {
	for _, sub := range []string{"history", "mailbox", "records", "conversations"} {
		if err := s.pub.Mkdir(filepath.Join(dir, sub), true); err != nil {
			return err
		}
	}
	for _, r := range tbl.Records() {
		if _, err := s.records.Initialize(records.Ref{CardDir: dir, Card: id, Name: r.Name}, r.Initial); err != nil {
			return err
		}
	}
	for _, agent := range tbl.SessionAgents() {
		if err := s.sessions.Establish(s.SessionDir(id, agent), conversations.SessionID(agent, id)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) claim(parent string) (string, error) {
	if parent == "" {
		if err := s.pub.Mkdir(s.dir, false); err != nil {
			return "", err
		}
		if err := s.pub.Mkdir(s.CardDir(RootID), true); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return "", opErr("create root", RootID, fmt.Errorf("%w: root already exists", ErrInvalid))
			}
			return "", err
		}
		return RootID, nil
	}
	for n := 0; n < 26*26*26*26; n++ {
		id := parent + "." + Segment(n)
		err := s.pub.Mkdir(s.CardDir(id), true)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", opErr("create card under", parent, errors.New("identifier space exhausted"))
}

// checkDeps validates dependencies of card self (""= new) under parent:
// existing active immediate siblings, no self reference, no cycle.
func (s *Store) checkDeps(parent Card, self string, deps []string) error {
	seen := map[string]bool{}
	active := map[string]Card{}
	for _, sib := range parent.Children {
		_, c, err := s.read(sib)
		if err != nil {
			return err
		}
		if !c.Tombstoned() {
			active[sib] = c
		}
	}
	for _, d := range deps {
		switch {
		case d == self:
			return fmt.Errorf("%w: a card cannot depend on itself", ErrDependency)
		case seen[d]:
			return fmt.Errorf("%w: %s listed twice", ErrDependency, d)
		}
		seen[d] = true
		if _, ok := active[d]; !ok {
			return fmt.Errorf("%w: %s is not an active sibling", ErrDependency, d)
		}
	}
	if self == "" {
		return nil
	}
	graph := map[string][]string{}
	for id, c := range active {
		graph[id] = c.Dependencies
	}
	graph[self] = deps
	if findCycle(graph) {
		return ErrCycle
	}
	return nil
}

func findCycle(graph map[string][]string) bool {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var visit func(string) bool
	visit = func(n string) bool {
		color[n] = grey
		for _, m := range graph[n] {
			switch color[m] {
			case grey:
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		color[n] = black
		return false
	}
	keys := make([]string, 0, len(graph))
	for k := range graph {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if color[k] == white && visit(k) {
			return true
		}
	}
	return false
}

// RepairAuthor authors the placeholder repair publishes for a discarded
// card.
const RepairAuthor = "runtime:repair"

// OwnRoots are the entries of a card's directory that belong to the card
// itself (children live in their own directories beside it).
var OwnRoots = []string{"head.json", "head.prev.json", "history", "mailbox", "records", "conversations"}

// PublishRepairPlaceholder publishes a fresh FAILED card of version 1 in
// place of a discarded one, whose own roots repair has moved away: empty
// records and session indexes of its type, no children, no dependencies
// and nothing of the old card's facts. A Planner of a healthy ancestor may
// reopen it later. None of the card's own roots may exist.
func (s *Store) PublishRepairPlaceholder(id, parent, typ string) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tbl, ok := s.wf.Table(typ)
	if !ok {
		return Card{}, fmt.Errorf("repair placeholder %s: unknown card type %q", id, typ)
	}
	dir := s.CardDir(id)
	for _, r := range OwnRoots {
		if _, err := os.Lstat(filepath.Join(dir, r)); !errors.Is(err, fs.ErrNotExist) {
			return Card{}, fmt.Errorf("repair placeholder %s: %s is still present (%v)", id, r, err)
		}
	}
	if err := s.establish(dir, id, tbl); err != nil {
		return Card{}, err
	}
	now := s.now().UTC()
	c := Card{Format: CardFormat, Kind: KindOrdinary, ID: id, Type: typ, Parent: parent, Depth: DepthOf(id),
		Title: "Discarded by repair", Description: "repair discarded this card's unusable state; nothing of it is known here. Reopen it to plan again.",
		Status: Failed, Author: RepairAuthor, CreatedAt: now}
	_, c, err := s.publish(Head{}, c, true)
	return c, err
}
