// Package records owns a card's named records: an absence-only baseline
// (revision 0) at initialisation, at most one open draft, and immutable
// accepted versions 1, 2, 3, … published before the head that selects them.
// The baseline, a draft that was never changed and empty content are never
// accepted.
package records

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/state"
)

// Selections of a record head.
const (
	SelBaseline = "baseline"
	SelDraft    = "draft"
	SelAccepted = "accepted"
)

// Format labels of record files. AcceptedFormat is the spec's current
// "accepted 5" family label; the spec's "accepted format 4" (embedded
// action/output provenance) is part of it as the optional action_output
// object, so every accepted document, agent-written or action output, is
// format 5 (see docs/saivage.md, Records).
const (
	HeadFormat     = 3
	AcceptedFormat = 5
)

// Output kinds of an accepted action output: the command's captured stdout
// or text the operation returned (a quality report).
const (
	OutputCommandStdout = "command-stdout"
	OutputReturnedText  = "returned-text"
)

// ActionOutputAuthorPrefix begins the author label of an accepted action
// output ("action-output:NODE/INVOCATION"), one member of the shared author
// union beside "agent:NAME", external principals and "runtime:bootstrap" /
// "runtime:repair".
const ActionOutputAuthorPrefix = "action-output:"

// MaxContentBytes bounds one record's content.
const MaxContentBytes = 1 << 20

// Head is a record's current selector.
type Head struct {
	Format    int    `json:"format"`
	HeadUUID  string `json:"head_uuid"`
	Card      string `json:"card"`
	Record    string `json:"record"`
	Revision  int    `json:"revision"`
	Selection string `json:"selection"`
	// Latest is the newest accepted version; 0 when none.
	Latest int `json:"latest"`
	// LatestFile names the latest accepted document in accepted/.
	LatestFile string `json:"latest_file,omitempty"`
	// Baseline is the initialisation content (revision 0).
	Baseline  string    `json:"baseline"`
	Draft     *Draft    `json:"draft,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Draft is the open draft of a record. It targets version Latest+1.
type Draft struct {
	Target  int    `json:"target"`
	Content string `json:"content"`
	// Changed is false for draft 0 (opened, never changed by a write).
	Changed bool   `json:"changed"`
	Author  string `json:"author"`
}

// Accepted is one immutable accepted version.
type Accepted struct {
	Format  int    `json:"format"`
	Card    string `json:"card"`
	Record  string `json:"record"`
	Version int    `json:"version"`
	// Previous names the predecessor accepted document ("" for version 1).
	Previous   string    `json:"previous"`
	Content    string    `json:"content"`
	Author     string    `json:"author"`
	AcceptedAt time.Time `json:"accepted_at"`
	// ActionOutput is the exact provenance of an action node's accepted
	// output; nil for every other author.
	ActionOutput *ActionOutput `json:"action_output,omitempty"`
}

// ActionOutput is the provenance an accepted action output embeds: which
// node and operation produced it, in which invocation, from which output,
// and the length and SHA-256 of the accepted bytes (the content itself is
// embedded independently of the capture, which work GC may remove).
type ActionOutput struct {
	// Node is the action node's id in its card type's graph.
	Node string `json:"node"`
	// Operation is the qualified operation identity ("shell.run").
	Operation       string `json:"operation"`
	ContractVersion int    `json:"contract_version"`
	// Invocation is the operation invocation's UUID (its artifact
	// directory under work/cards/CARD/actions/).
	Invocation string `json:"invocation"`
	// Output is OutputCommandStdout or OutputReturnedText.
	Output string `json:"output"`
	// Bytes and SHA256 (lowercase hex) describe the accepted bytes.
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Author is the author label of the provenance's acceptance.
func (p ActionOutput) Author() string {
	return ActionOutputAuthorPrefix + p.Node + "/" + p.Invocation
}

// validateIdentity checks the fields a caller supplies.
func (p ActionOutput) validateIdentity() error {
	ns, name, qualified := strings.Cut(p.Operation, ".")
	switch {
	case p.Node == "" || strings.ContainsAny(p.Node, "/\\"):
		return fmt.Errorf("action output node %q is not a node id", p.Node)
	case !qualified || ns == "" || name == "":
		return fmt.Errorf("action output operation %q is not a qualified identity", p.Operation)
	case p.ContractVersion < 1:
		return fmt.Errorf("action output contract version %d", p.ContractVersion)
	case p.Invocation == "" || strings.ContainsAny(p.Invocation, "/\\"):
		return fmt.Errorf("action output invocation %q is not an invocation id", p.Invocation)
	case p.Output != OutputCommandStdout && p.Output != OutputReturnedText:
		return fmt.Errorf("action output kind %q (want %s or %s)", p.Output, OutputCommandStdout, OutputReturnedText)
	}
	return nil
}

// validate checks the provenance against the accepted document it is in.
func (p ActionOutput) validate(a Accepted) error {
	if err := p.validateIdentity(); err != nil {
		return err
	}
	switch {
	case a.Author != p.Author():
		return fmt.Errorf("action output author %q, want %q", a.Author, p.Author())
	case p.Bytes != len(a.Content) || p.SHA256 != contentDigest(a.Content):
		return errors.New("action output length or SHA-256 does not match the content")
	}
	return nil
}

func contentDigest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// Errors returned by record mutations.
var (
	ErrNotInitialized = errors.New("record is not initialised")
	ErrExists         = errors.New("record is already initialised")
	ErrDraftOpen      = errors.New("record has an open draft")
	ErrNoDraft        = errors.New("record has no open draft")
	ErrUnchanged      = errors.New("draft was never changed; the baseline and the first unchanged draft are not accepted")
	ErrEmpty          = errors.New("empty content is not accepted")
	ErrNoVersion      = errors.New("no such version")
)

// Store reads and publishes records below a card directory.
type Store struct {
	pub *state.Publisher
	now func() time.Time
}

// Options configures a Store.
type Options struct {
	Publisher *state.Publisher
	// Now stamps publications; time.Now when nil.
	Now func() time.Time
}

// New returns a Store.
func New(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{pub: opts.Publisher, now: now}
}

// Ref names one record of one card.
type Ref struct {
	// CardDir is the card's directory; records live in CardDir/records/Name.
	CardDir string
	Card    string
	Name    string
}

func (r Ref) dir() string { return filepath.Join(r.CardDir, "records", r.Name) }

// HeadPath returns the record head file.
func (r Ref) HeadPath() string { return filepath.Join(r.dir(), "head.json") }

// DocPath returns the path of an accepted document file name. Accepted
// documents are named "<version>-<random>.json" so a document published
// before a crash that prevented its head never blocks the next acceptance.
func (r Ref) DocPath(name string) string {
	return filepath.Join(r.dir(), "accepted", name)
}

func decodeStrict(data []byte, v any) error {
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

// ReadHead reads and validates the record head.
func (s *Store) ReadHead(r Ref) (Head, error) {
	p := r.HeadPath()
	data, err := state.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Head{}, fmt.Errorf("record %s/%s: %w (%s missing)", r.Card, r.Name, ErrNotInitialized, p)
		}
		return Head{}, fmt.Errorf("read record head: %w", err)
	}
	var h Head
	if err := decodeStrict(data, &h); err != nil {
		return Head{}, fmt.Errorf("%s: invalid record head: %v", p, err)
	}
	if err := h.validate(r); err != nil {
		return Head{}, fmt.Errorf("%s: invalid record head: %v", p, err)
	}
	return h, nil
}

func (h Head) validate(r Ref) error {
	switch {
	case h.Format != HeadFormat:
		return fmt.Errorf("format %d, want %d", h.Format, HeadFormat)
	case h.HeadUUID == "":
		return errors.New("missing head_uuid")
	case h.Card != r.Card || h.Record != r.Name:
		return fmt.Errorf("belongs to %s/%s", h.Card, h.Record)
	case h.Revision < 0 || h.Latest < 0:
		return errors.New("negative revision or version")
	case (h.Latest == 0) != (h.LatestFile == ""):
		return errors.New("latest version and latest_file disagree")
	case h.Latest > 0 && (!strings.HasPrefix(h.LatestFile, strconv.Itoa(h.Latest)+"-") || strings.ContainsAny(h.LatestFile, "/\\")):
		return fmt.Errorf("latest_file %q does not name version %d", h.LatestFile, h.Latest)
	}
	switch h.Selection {
	case SelBaseline:
		if h.Latest != 0 || h.Draft != nil {
			return errors.New("baseline selection with accepted versions or a draft")
		}
	case SelAccepted:
		if h.Latest < 1 || h.Draft != nil {
			return errors.New("accepted selection without a version or with a draft")
		}
	case SelDraft:
		if h.Draft == nil || h.Draft.Target != h.Latest+1 {
			return errors.New("draft selection without a draft targeting latest+1")
		}
	default:
		return fmt.Errorf("unknown selection %q", h.Selection)
	}
	return nil
}

// Initialize publishes the baseline (revision 0). The head must be absent.
func (s *Store) Initialize(r Ref, baseline string) (Head, error) {
	if len(baseline) > MaxContentBytes {
		return Head{}, fmt.Errorf("record %s/%s: baseline over %d bytes", r.Card, r.Name, MaxContentBytes)
	}
	if err := s.pub.Mkdir(r.dir(), true); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Head{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrExists)
		}
		return Head{}, err
	}
	if err := s.pub.Mkdir(filepath.Join(r.dir(), "accepted"), true); err != nil {
		return Head{}, err
	}
	h := Head{Format: HeadFormat, Card: r.Card, Record: r.Name, Selection: SelBaseline, Baseline: baseline}
	return h, s.publish(r, h, true)
}

func (s *Store) publish(r Ref, h Head, initial bool) error {
	h.HeadUUID = state.NewUUID()
	h.UpdatedAt = s.now().UTC()
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.pub.PublishHead(r.dir(), "head.json", data, initial)
}

// Current is a record's current effective content.
type Current struct {
	Head    Head
	Content string
	// Version is the accepted version the content belongs to (0 for the
	// baseline); a draft's content has Version == Head.Latest and Draft set.
	Version int
	// ActionOutput is the provenance of a selected accepted action output.
	ActionOutput *ActionOutput
}

// Current returns the current content: the open draft, else the latest
// accepted version, else the baseline.
func (s *Store) Current(r Ref) (Current, error) {
	h, err := s.ReadHead(r)
	if err != nil {
		return Current{}, err
	}
	switch h.Selection {
	case SelDraft:
		return Current{Head: h, Content: h.Draft.Content, Version: h.Latest}, nil
	case SelAccepted:
		a, err := s.readDoc(r, h.LatestFile, h.Latest)
		if err != nil {
			return Current{}, err
		}
		return Current{Head: h, Content: a.Content, Version: h.Latest, ActionOutput: a.ActionOutput}, nil
	}
	return Current{Head: h, Content: h.Baseline}, nil
}

// Version reads accepted version n (n ≥ 1) strictly, following predecessor
// links back from the latest version.
func (s *Store) Version(r Ref, n int) (Accepted, error) {
	h, err := s.ReadHead(r)
	if err != nil {
		return Accepted{}, err
	}
	if n < 1 || n > h.Latest {
		return Accepted{}, fmt.Errorf("record %s/%s version %d: %w", r.Card, r.Name, n, ErrNoVersion)
	}
	a, err := s.readDoc(r, h.LatestFile, h.Latest)
	for err == nil && a.Version > n {
		a, err = s.readDoc(r, a.Previous, a.Version-1)
	}
	return a, err
}

// Latest reads the document the head selects as latest accepted version.
func (s *Store) Latest(r Ref, h Head) (Accepted, error) {
	if h.Latest == 0 {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrNoVersion)
	}
	return s.readDoc(r, h.LatestFile, h.Latest)
}

func (s *Store) readDoc(r Ref, name string, n int) (Accepted, error) {
	p := r.DocPath(name)
	if !strings.HasPrefix(name, strconv.Itoa(n)+"-") || strings.ContainsAny(name, "/\\") {
		return Accepted{}, fmt.Errorf("record %s/%s: predecessor %q does not name version %d", r.Card, r.Name, name, n)
	}
	data, err := state.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Accepted{}, fmt.Errorf("%s: accepted version %d is missing", p, n)
		}
		return Accepted{}, fmt.Errorf("read record version: %w", err)
	}
	var a Accepted
	if err := decodeStrict(data, &a); err != nil {
		return Accepted{}, fmt.Errorf("%s: invalid accepted record: %v", p, err)
	}
	if a.Format != AcceptedFormat || a.Card != r.Card || a.Record != r.Name || a.Version != n {
		return Accepted{}, fmt.Errorf("%s: accepted record does not match %s/%s version %d", p, r.Card, r.Name, n)
	}
	if a.ActionOutput != nil {
		if err := a.ActionOutput.validate(a); err != nil {
			return Accepted{}, fmt.Errorf("%s: invalid accepted record: %v", p, err)
		}
	}
	return a, nil
}

// Content returns version n's content, where 0 is the baseline.
func (s *Store) Content(r Ref, n int) (string, error) {
	if n == 0 {
		h, err := s.ReadHead(r)
		if err != nil {
			return "", err
		}
		return h.Baseline, nil
	}
	a, err := s.Version(r, n)
	return a.Content, err
}

// History returns every accepted version, oldest first. Versions must be
// consecutive documents 1..Latest linked by their predecessors.
func (s *Store) History(r Ref) ([]Accepted, error) {
	h, err := s.ReadHead(r)
	if err != nil || h.Latest == 0 {
		return []Accepted{}, err
	}
	a, err := s.readDoc(r, h.LatestFile, h.Latest)
	if err != nil {
		return nil, err
	}
	out := []Accepted{a}
	for a.Version > 1 {
		if a, err = s.readDoc(r, a.Previous, a.Version-1); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	slices.Reverse(out)
	return out, nil
}

// OpenDraft opens draft 0 from the current content, targeting Latest+1.
func (s *Store) OpenDraft(r Ref, author string) (Head, error) {
	cur, err := s.Current(r)
	if err != nil {
		return Head{}, err
	}
	h := cur.Head
	if h.Draft != nil {
		return Head{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrDraftOpen)
	}
	h.Revision++
	h.Selection = SelDraft
	h.Draft = &Draft{Target: h.Latest + 1, Content: cur.Content, Author: author}
	return h, s.publish(r, h, false)
}

// WriteDraft replaces the open draft's content. Writing identical content
// publishes nothing.
func (s *Store) WriteDraft(r Ref, content, author string) (Head, error) {
	if len(content) > MaxContentBytes {
		return Head{}, fmt.Errorf("record %s/%s: content over %d bytes", r.Card, r.Name, MaxContentBytes)
	}
	h, err := s.ReadHead(r)
	if err != nil {
		return Head{}, err
	}
	if h.Draft == nil {
		return Head{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrNoDraft)
	}
	if h.Draft.Content == content {
		return h, nil
	}
	h.Revision++
	h.Draft = &Draft{Target: h.Draft.Target, Content: content, Changed: true, Author: author}
	return h, s.publish(r, h, false)
}

// DiscardDraft closes the draft without accepting it.
func (s *Store) DiscardDraft(r Ref) (Head, error) {
	h, err := s.ReadHead(r)
	if err != nil {
		return Head{}, err
	}
	if h.Draft == nil {
		return Head{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrNoDraft)
	}
	h.Revision++
	h.Draft = nil
	h.Selection = SelAccepted
	if h.Latest == 0 {
		h.Selection = SelBaseline
	}
	return h, s.publish(r, h, false)
}

// Accept publishes the open, changed, non-empty draft as the immutable
// version Latest+1, then selects it.
func (s *Store) Accept(r Ref, author string) (Accepted, error) {
	h, err := s.ReadHead(r)
	if err != nil {
		return Accepted{}, err
	}
	if h.Draft == nil {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrNoDraft)
	}
	if !h.Draft.Changed {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrUnchanged)
	}
	return s.accept(r, h, h.Draft.Content, author, nil)
}

// AcceptContent directly accepts content as version Latest+1 without a
// transient draft (Analyst/operator edits). An open draft conflicts.
func (s *Store) AcceptContent(r Ref, content, author string) (Accepted, error) {
	return s.acceptDirect(r, content, author, nil)
}

// AcceptActionOutput directly accepts an action node's output as version
// Latest+1 with its provenance; the author is prov.Author() and the
// provenance's Bytes and SHA256 are computed here from content. Like every
// acceptance it may repeat the latest version's text. An open draft
// conflicts.
func (s *Store) AcceptActionOutput(r Ref, content string, prov ActionOutput) (Accepted, error) {
	if err := prov.validateIdentity(); err != nil {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, err)
	}
	prov.Bytes, prov.SHA256 = len(content), contentDigest(content)
	return s.acceptDirect(r, content, prov.Author(), &prov)
}

func (s *Store) acceptDirect(r Ref, content, author string, prov *ActionOutput) (Accepted, error) {
	if len(content) > MaxContentBytes {
		return Accepted{}, fmt.Errorf("record %s/%s: content over %d bytes", r.Card, r.Name, MaxContentBytes)
	}
	h, err := s.ReadHead(r)
	if err != nil {
		return Accepted{}, err
	}
	if h.Draft != nil {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrDraftOpen)
	}
	return s.accept(r, h, content, author, prov)
}

func (s *Store) accept(r Ref, h Head, content, author string, prov *ActionOutput) (Accepted, error) {
	if strings.TrimSpace(content) == "" {
		return Accepted{}, fmt.Errorf("record %s/%s: %w", r.Card, r.Name, ErrEmpty)
	}
	if prov == nil && strings.HasPrefix(author, ActionOutputAuthorPrefix) {
		return Accepted{}, fmt.Errorf("record %s/%s: author %q: an action output is accepted only with its provenance", r.Card, r.Name, author)
	}
	a := Accepted{Format: AcceptedFormat, Card: r.Card, Record: r.Name, Version: h.Latest + 1,
		Previous: h.LatestFile, Content: content, Author: author, AcceptedAt: s.now().UTC(), ActionOutput: prov}
	data, err := json.Marshal(a)
	if err != nil {
		return Accepted{}, err
	}
	name := strconv.Itoa(a.Version) + "-" + state.NewUUID()[:8] + ".json"
	if err := s.pub.CreateNew(r.DocPath(name), data); err != nil {
		return Accepted{}, fmt.Errorf("accept record %s/%s version %d: %w", r.Card, r.Name, a.Version, err)
	}
	h.Revision++
	h.Latest = a.Version
	h.LatestFile = name
	h.Selection = SelAccepted
	h.Draft = nil
	if err := s.publish(r, h, false); err != nil {
		return Accepted{}, err
	}
	return a, nil
}

// Exists reports whether the record's head is present.
func Exists(r Ref) bool {
	_, err := os.Lstat(r.HeadPath())
	return err == nil
}
