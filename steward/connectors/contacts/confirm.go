package contacts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

// metaBuildStarted holds when the last published run started (Unix ms).
const metaBuildStarted = "build_started_ms"

// Expected is what a contact write's confirmation looks for: the source
// record (by native id) showing the written values.
type Expected struct {
	Op       string  `json:"op"`
	Backend  string  `json:"backend"`
	Source   string  `json:"source"`
	NativeID string  `json:"nativeId,omitempty"`
	Values   Contact `json:"values"`
}

func (p *Plan) expected() *Expected {
	return &Expected{Op: p.Op, Backend: p.Backend, Source: p.Book.Source, NativeID: p.NativeID, Values: p.Values}
}

// Confirmer checks journaled contact writes against the contacts index; it
// implements writeops.Confirmer for the contacts kinds.
type Confirmer struct {
	// Index opens the contacts index.
	Index func(ctx context.Context) (*Index, error)
	// StaleStarted bounds when a write whose caller crashed can have
	// completed (writeops.DefaultStaleStarted).
	StaleStarted time.Duration
}

// Confirm looks for the written record in the last indexing run, which must
// have started after the write completed.
func (c *Confirmer) Confirm(ctx context.Context, op writeops.Operation) (writeops.Check, error) {
	var e Expected
	if err := json.Unmarshal(op.Expected, &e); err != nil || e.Op == "" {
		return writeops.Check{Note: "the journal holds no expected outcome for this write", Exhaust: true}, nil
	}
	var out Outcome
	json.Unmarshal(op.Result, &out)
	if e.NativeID == "" {
		e.NativeID = out.NativeID
	}
	if e.NativeID == "" {
		return writeops.Check{Note: "the create returned no person id to look for", Exhaust: op.State == writeops.StateFailed}, nil
	}
	done := op.ReturnedAt
	if done.IsZero() {
		done = out.CompletedAt
	}
	if done.IsZero() {
		stale := c.StaleStarted
		if stale <= 0 {
			stale = writeops.DefaultStaleStarted
		}
		done = op.AttemptedAt.Add(stale)
	}
	idx, err := c.Index(ctx)
	if err != nil {
		return writeops.Check{}, fmt.Errorf("open contacts index: %w", err)
	}
	v, err := metaValue(ctx, idx.db, metaBuildStarted)
	if err != nil {
		return writeops.Check{}, err
	}
	ms, _ := strconv.ParseInt(v, 10, 64)
	started := time.UnixMilli(ms).UTC()
	evidence := map[string]any{"runStartedAt": started, "backendDoneBy": done, "nativeId": e.NativeID}
	if v == "" || !started.After(done) {
		return writeops.Check{Note: "waiting for a contacts index run that starts after the write", Evidence: evidence}, nil
	}
	var data string
	err = idx.db.QueryRowContext(ctx, `SELECT data FROM records WHERE source = ? AND native_id = ?`, e.Source, e.NativeID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return writeops.Check{Note: "the contact is not in the index yet", Evidence: evidence}, nil
	}
	if err != nil {
		return writeops.Check{}, fmt.Errorf("read contact record: %w", err)
	}
	var r Record
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return writeops.Check{}, err
	}
	miss := compareRecord(&r, &e)
	evidence["mismatches"] = miss
	if len(miss) > 0 {
		return writeops.Check{Note: "the indexed contact differs: " + strings.Join(miss, "; "), Evidence: evidence}, nil
	}
	return writeops.Check{Confirmed: true, Evidence: evidence}, nil
}

func metaValue(ctx context.Context, db *sql.DB, key string) (string, error) {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// compareRecord lists the written values the record does not show: texts
// exactly, emails case-insensitively, phones by their digits, the birthday
// as a date.
func compareRecord(r *Record, e *Expected) []string {
	v := e.Values
	var miss []string
	text := func(name string, want *string, got string) {
		if want != nil && strings.TrimSpace(got) != *want {
			miss = append(miss, fmt.Sprintf("%s is %q, expected %q", name, got, *want))
		}
	}
	if e.Backend != BackendAppleScript { // Contacts.app composes the name itself
		text("fullName", v.FullName, r.FullName)
	}
	text("first", v.First, r.First)
	text("last", v.Last, r.Last)
	text("nickname", v.Nickname, r.Nickname)
	text("organization", v.Organization, r.Org)
	text("title", v.Title, r.Title)
	text("notes", v.Notes, r.Notes)
	if v.Birthday != nil && strings.ReplaceAll(r.Birthday, "-", "") != strings.ReplaceAll(*v.Birthday, "-", "") {
		miss = append(miss, fmt.Sprintf("birthday is %q, expected %q", r.Birthday, *v.Birthday))
	}
	set := func(name string, want *[]Labeled, got []Labeled, norm func(string) string) {
		if want == nil {
			return
		}
		var a, b []string
		for _, x := range *want {
			a = append(a, norm(x.Value))
		}
		for _, x := range got {
			b = append(b, norm(x.Value))
		}
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			miss = append(miss, fmt.Sprintf("%s are %v, expected %v", name, b, a))
		}
	}
	set("emails", v.Emails, r.Emails, NormalizeEmail)
	set("phones", v.Phones, r.Phones, normalizePhone)
	if v.Addresses != nil {
		var a, b []string
		for _, x := range *v.Addresses {
			a = append(a, x.String())
		}
		for _, x := range r.Addresses {
			b = append(b, x.String())
		}
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			miss = append(miss, fmt.Sprintf("addresses are %v, expected %v", b, a))
		}
	}
	return miss
}
