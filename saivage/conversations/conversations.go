// Package conversations owns agent sessions on disk: a session
// ("agent:<name>:global" or "agent:<name>:<card-id>") is an index selecting
// numbered JSONL segments. Every tool result in a segment must answer an
// earlier call of the same segment; only a sole final call may be unmatched.
package conversations

import (
	"bytes"
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

	"github.com/agentstack/agentstack/saivage/state"
)

// Format labels.
const (
	IndexFormat   = 12
	SegmentFormat = 2
)

// SessionID returns the stable session identity of an agent: global when
// card is "", else bound to the card.
func SessionID(agent, card string) string {
	if card == "" {
		return "agent:" + agent + ":global"
	}
	return "agent:" + agent + ":" + card
}

// Index selects a session's segments in order; the last is current.
type Index struct {
	Format   int       `json:"format"`
	HeadUUID string    `json:"head_uuid"`
	Session  string    `json:"session"`
	Segments []Segment `json:"segments"`
}

// Segment is one indexed segment file.
type Segment struct {
	N    int    `json:"n"`
	Kind string `json:"kind"` // ordinary | compacted
}

// Row is one conversation row.
type Row struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // marker | user | assistant | tool_call | tool_result | summary
	// CallID pairs tool_call and tool_result rows.
	CallID  string          `json:"call_id,omitempty"`
	Name    string          `json:"name,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
}

var rowKinds = map[string]bool{"marker": true, "user": true, "assistant": true, "tool_call": true, "tool_result": true, "summary": true}

// Store publishes and reads sessions.
type Store struct {
	pub *state.Publisher

	mu sync.Mutex
	// known remembers, per segment file, the rows it held at one exact
	// size and modification time, as this store validated, read or
	// appended them. Segments only grow, so a file still of that size and
	// time needs no re-reading, neither before the next append nor to
	// rebuild an agent's context before each model call; any other state
	// means someone wrote since, and it is read and validated again. The
	// size is always the one the rows were read from or written up to,
	// never a later look at the file: a row appended in between (the
	// cockpit reading a transcript while the turn appends) would otherwise
	// be counted in the size but missing from the rows.
	known map[string]*segmentState
	clock uint64 // orders uses, to drop the least recently used state

	// readHook, when set, runs between reading a segment and checking that
	// the file did not change meanwhile. Tests only.
	readHook func(path string)
}

// maxKnownSegments bounds the segments whose rows a Store keeps in memory.
const maxKnownSegments = 64

type segmentState struct {
	at   fileState
	rows []Row // the segment's valid rows, exactly as a fresh read decodes them
	used uint64
}

// New returns a Store.
func New(pub *state.Publisher) *Store { return &Store{pub: pub, known: map[string]*segmentState{}} }

// fileState is a segment file's identity for the cache.
type fileState struct {
	size    int64
	modTime time.Time
}

func (a fileState) same(b fileState) bool { return a.size == b.size && a.modTime.Equal(b.modTime) }

func statFile(p string) (fileState, error) {
	info, err := os.Stat(p)
	if err != nil {
		return fileState{}, err
	}
	return fileState{size: info.Size(), modTime: info.ModTime()}, nil
}

// current returns the rows this store last saw in p and their size, if p
// is unchanged since.
func (s *Store) current(p string) ([]Row, int64, bool) {
	now, err := statFile(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.known[p]
	if err != nil || st == nil || !now.same(st.at) {
		return nil, 0, false
	}
	s.clock++
	st.used = s.clock
	return st.rows, st.at.size, true
}

func (s *Store) forget(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.known, p)
}

// remember records that p held exactly rows when it was at
// (rows is not copied: the caller hands it over).
func (s *Store) remember(p string, rows []Row, at fileState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	s.known[p] = &segmentState{at: at, rows: rows, used: s.clock}
	for len(s.known) > maxKnownSegments {
		oldest := ""
		for k, st := range s.known {
			if oldest == "" || st.used < s.known[oldest].used {
				oldest = k
			}
		}
		delete(s.known, oldest)
	}
}

func indexPath(dir string) string { return filepath.Join(dir, "index.json") }

func segmentPath(dir string, n int) string {
	return filepath.Join(dir, "versions", strconv.Itoa(n)+".jsonl")
}

// Establish creates a session directory with an empty index. The directory
// must not exist.
func (s *Store) Establish(dir, session string) error {
	if err := s.pub.Mkdir(dir, true); err != nil {
		return fmt.Errorf("establish session %s: %w", session, err)
	}
	if err := s.pub.Mkdir(filepath.Join(dir, "versions"), true); err != nil {
		return fmt.Errorf("establish session %s: %w", session, err)
	}
	return s.publishIndex(dir, Index{Format: IndexFormat, Session: session, Segments: []Segment{}}, true)
}

func (s *Store) publishIndex(dir string, idx Index, initial bool) error {
	idx.HeadUUID = state.NewUUID()
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return s.pub.PublishHead(dir, "index.json", data, initial)
}

// ReadIndex reads a session index strictly. A missing index is an error
// naming the file.
func (s *Store) ReadIndex(dir, session string) (Index, error) {
	p := indexPath(dir)
	data, err := state.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Index{}, fmt.Errorf("%s: required session index is missing", p)
		}
		return Index{}, fmt.Errorf("read session index: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var idx Index
	if err := dec.Decode(&idx); err != nil {
		return Index{}, fmt.Errorf("%s: invalid session index: %v", p, err)
	}
	if idx.Format != IndexFormat || idx.HeadUUID == "" || idx.Session != session || idx.Segments == nil {
		return Index{}, fmt.Errorf("%s: invalid session index for %s", p, session)
	}
	for i, seg := range idx.Segments {
		if seg.N != i+1 || (seg.Kind != "ordinary" && seg.Kind != "compacted") {
			return Index{}, fmt.Errorf("%s: segment %d is not consecutive or has kind %q", p, i, seg.Kind)
		}
	}
	return idx, nil
}

// Append appends rows to the current segment as one envelope, starting the
// first segment when the index has none.
func (s *Store) Append(dir, session string, rows []Row) error {
	idx, err := s.ReadIndex(dir, session)
	if err != nil {
		return err
	}
	first := len(idx.Segments) == 0
	n := len(idx.Segments)
	p := segmentPath(dir, n)
	var before []Row
	// size is the file size before holds exactly (-1: not known).
	size := int64(-1)
	if first {
		n, p, size = 1, segmentPath(dir, 1), 0
	} else if known, at, ok := s.current(p); ok {
		before, size = known, at
	} else {
		// Validate the whole session (and truncate a torn tail) before the
		// first append to it, or after anyone else changed the file.
		segs, err := s.Load(dir, session, state.TailTruncate)
		if err != nil {
			return err
		}
		before = segs[len(segs)-1]
		if _, at, ok := s.current(p); ok {
			size = at
		}
	}
	env := state.Envelope{V: SegmentFormat}
	after := slices.Clip(before)
	for _, r := range rows {
		if !rowKinds[r.Kind] || r.ID == "" {
			return fmt.Errorf("append to %s: invalid row %+v", session, r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		env.Rows = append(env.Rows, b)
		// What a later read will decode (Marshal compacts Content).
		stored, err := decodeRow(b)
		if err != nil {
			return err
		}
		after = append(after, stored)
	}
	span, err := s.pub.AppendSpan(p, env, first)
	if err != nil {
		s.forget(p) // unknown state: validate before the next append
		return err
	}
	// after is the file's content only when the line landed right after
	// what before was read from, and only up to the line's end: a later
	// look at the file may already include someone else's append.
	if now, err := statFile(p); err == nil && span.Start == size && now.size == span.End {
		s.remember(p, after, now)
	} else {
		s.forget(p)
	}
	if first {
		idx.Segments = []Segment{{N: 1, Kind: "ordinary"}}
		return s.publishIndex(dir, idx, false)
	}
	return nil
}

// Load reads every indexed segment, strictly validating each; only the
// current segment's torn tail is handled by tail (historical segments fail).
func (s *Store) Load(dir, session string, tail state.TailPolicy) ([][]Row, error) {
	idx, err := s.ReadIndex(dir, session)
	if err != nil {
		return nil, err
	}
	out := make([][]Row, 0, len(idx.Segments))
	for i, seg := range idx.Segments {
		p := segmentPath(dir, seg.N)
		policy := state.TailFail
		if i == len(idx.Segments)-1 {
			policy = tail
		}
		rows, err := s.readSegment(p, policy)
		if err != nil {
			return nil, err
		}
		out = append(out, rows)
	}
	return out, nil
}

// ValidatePairs checks that every tool result answers an earlier, still
// unanswered call, and that at most the final call is left unanswered.
func ValidatePairs(rows []Row) error {
	open := map[string]int{}
	ids := map[string]bool{}
	for i, r := range rows {
		if ids[r.ID] {
			return fmt.Errorf("row %d: duplicate row id %s", i, r.ID)
		}
		ids[r.ID] = true
		switch r.Kind {
		case "tool_call":
			if r.CallID == "" {
				return fmt.Errorf("row %d: tool call without call_id", i)
			}
			if _, dup := open[r.CallID]; dup {
				return fmt.Errorf("row %d: call %s repeated while unanswered", i, r.CallID)
			}
			open[r.CallID] = i
		case "tool_result":
			if _, ok := open[r.CallID]; !ok {
				return fmt.Errorf("row %d: tool result %s has no earlier call", i, r.CallID)
			}
			delete(open, r.CallID)
		}
	}
	if len(open) > 1 {
		return fmt.Errorf("%d unanswered tool calls; only a sole final call may be unanswered", len(open))
	}
	for id, at := range open {
		if at != len(rows)-1 {
			return fmt.Errorf("tool call %s is unanswered but not final", id)
		}
	}
	return nil
}

// ParseSessionID splits a session identity into agent and card ("" for
// global sessions).
func ParseSessionID(id string) (agent, card string, err error) {
	rest, ok := strings.CutPrefix(id, "agent:")
	if !ok {
		return "", "", fmt.Errorf("session %q does not start with agent:", id)
	}
	agent, card, ok = strings.Cut(rest, ":")
	if !ok || agent == "" || card == "" {
		return "", "", fmt.Errorf("session %q is not agent:<name>:<global|card-id>", id)
	}
	if card == "global" {
		card = ""
	}
	return agent, card, nil
}

// Current is the current (last) segment of a session.
type Current struct {
	Index Index
	// N is the segment number (0 when the session has no segment yet).
	N    int
	Kind string
	Rows []Row
}

// LoadCurrent reads only the current segment, strictly; a torn tail is
// handled by tail. A session without segments has no rows.
func (s *Store) LoadCurrent(dir, session string, tail state.TailPolicy) (Current, error) {
	idx, err := s.ReadIndex(dir, session)
	if err != nil {
		return Current{}, err
	}
	cur := Current{Index: idx, Rows: []Row{}}
	if len(idx.Segments) == 0 {
		return cur, nil
	}
	seg := idx.Segments[len(idx.Segments)-1]
	cur.N, cur.Kind = seg.N, seg.Kind
	p := segmentPath(dir, seg.N)
	if known, _, ok := s.current(p); ok {
		// Unchanged since this store read or wrote it: no need to decode
		// the file again before every model call.
		if err := ValidatePairs(known); err != nil {
			return Current{}, fmt.Errorf("%s: %w", p, err)
		}
		cur.Rows = slices.Clone(known)
		return cur, nil
	}
	if cur.Rows, err = s.readSegment(p, tail); err != nil {
		return Current{}, err
	}
	return cur, nil
}

func decodeRow(raw []byte) (Row, error) {
	var r Row
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Row{}, err
	}
	if !rowKinds[r.Kind] || r.ID == "" {
		return Row{}, fmt.Errorf("invalid row kind %q", r.Kind)
	}
	return r, nil
}

// readSegment reads and validates segment p. When the file held exactly
// the rows returned (no torn tail) and did not change while it was read,
// they are remembered for the next append and the next LoadCurrent.
func (s *Store) readSegment(p string, tail state.TailPolicy) ([]Row, error) {
	before, statErr := statFile(p)
	rows := []Row{}
	res, err := s.pub.ReadJSONL(p, state.ReadOptions{
		Versions: []int{SegmentFormat},
		Tail:     tail,
		Validate: func(_ int, env state.Envelope) error {
			for _, raw := range env.Rows {
				r, err := decodeRow(raw)
				if err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	if s.readHook != nil {
		s.readHook(p)
	}
	if err := ValidatePairs(rows); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if res.Truncated == 0 && statErr == nil {
		if now, err := statFile(p); err == nil && now.same(before) {
			s.remember(p, slices.Clone(rows), now)
		}
	}
	return rows, nil
}

// Compact publishes rows as a new self-contained segment of kind
// "compacted" and then selects it in the index: the segment is written
// before the index names it. rows must pair calls and results like any
// segment; they normally start with a summary row.
func (s *Store) Compact(dir, session string, rows []Row) (int, error) {
	if len(rows) == 0 {
		return 0, fmt.Errorf("compact %s: no rows", session)
	}
	if err := ValidatePairs(rows); err != nil {
		return 0, fmt.Errorf("compact %s: %w", session, err)
	}
	idx, err := s.ReadIndex(dir, session)
	if err != nil {
		return 0, err
	}
	n := len(idx.Segments) + 1
	if _, err := os.Lstat(segmentPath(dir, n)); !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("compact %s: %s already exists but is not indexed (an interrupted compaction); move it aside to continue", session, segmentPath(dir, n))
	}
	env := state.Envelope{V: SegmentFormat}
	for _, r := range rows {
		if !rowKinds[r.Kind] || r.ID == "" {
			return 0, fmt.Errorf("compact %s: invalid row %+v", session, r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return 0, err
		}
		env.Rows = append(env.Rows, b)
	}
	if err := s.pub.Append(segmentPath(dir, n), env, true); err != nil {
		return 0, err
	}
	idx.Segments = append(idx.Segments, Segment{N: n, Kind: "compacted"})
	return n, s.publishIndex(dir, idx, false)
}

// Segment reads one indexed segment strictly (historical segments refuse a
// torn tail).
func (s *Store) Segment(dir, session string, n int) ([]Row, error) {
	idx, err := s.ReadIndex(dir, session)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > len(idx.Segments) {
		return nil, fmt.Errorf("session %s has segments 1..%d, not %d", session, len(idx.Segments), n)
	}
	tail := state.TailFail
	if n == len(idx.Segments) {
		tail = state.TailIgnore
	}
	return s.readSegment(segmentPath(dir, n), tail)
}
