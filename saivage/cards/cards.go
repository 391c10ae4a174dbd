// Package cards owns Saivage's card tree on disk: immutable card documents
// (ordinary and tombstone versions) selected by a per-card head, monotonic
// per-parent identifiers claimed by exclusive directory creation, ordered
// membership, sibling dependencies and the status rules that admit each
// mutation.
package cards

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is a card's lifecycle status.
type Status string

// Card statuses.
const (
	Backlog   Status = "backlog"
	Changed   Status = "changed"
	Running   Status = "running"
	Blocked   Status = "blocked"
	Stopped   Status = "stopped"
	Done      Status = "done"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Statuses lists every status.
var Statuses = []Status{Backlog, Changed, Running, Blocked, Stopped, Done, Failed, Cancelled}

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Pure admission predicates. Each serves one operation; there is no
// universal "terminal" notion.

// AdmitsChildCreation: a parent may receive children and notifications.
func (s Status) AdmitsChildCreation() bool {
	return s == Backlog || s == Changed || s == Running || s == Blocked || s == Stopped
}

// AdmitsCancel: everything except done and cancelled.
func (s Status) AdmitsCancel() bool { return s != Done && s != Cancelled }

// AdmitsActivation: the lifecycle entries BACKLOG, CHANGED, BLOCKED, STOPPED.
func (s Status) AdmitsActivation() bool {
	return s == Backlog || s == Changed || s == Blocked || s == Stopped
}

// AdmitsReopen: blocked, done and failed cards reopen as changed.
func (s Status) AdmitsReopen() bool { return s == Blocked || s == Done || s == Failed }

// AdmitsRecordEdit: operator/Analyst record edits keep backlog, changed,
// running and stopped, reopen blocked/done/failed, and reject cancelled.
func (s Status) AdmitsRecordEdit() bool { return s != Cancelled }

// CompletesDescendant: a descendant no longer holds its ancestor back.
func (s Status) CompletesDescendant() bool { return s == Done || s == Cancelled }

// CompletesDependency: a dependency is satisfied only by done.
func (s Status) CompletesDependency() bool { return s == Done }

// Entry returns the workflow lifecycle entry of an activatable status.
func (s Status) Entry() string { return strings.ToUpper(string(s)) }

// Kinds of card documents.
const (
	KindOrdinary  = "ordinary"
	KindTombstone = "tombstone"
)

// Format labels.
const (
	CardFormat = 6
	HeadFormat = 1
)

// RootID is the identifier of every project's root card.
const RootID = "project"

// MaxDepth is the deepest allowed card; cards at MaxDepth have no children.
const MaxDepth = 12

// Limits on free text.
const (
	MaxTitle       = 200
	MaxDescription = 20000
)

// Card is one immutable card document (an ordinary or tombstone version).
type Card struct {
	Format       int      `json:"format"`
	Kind         string   `json:"kind"`
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Parent       string   `json:"parent"`
	Depth        int      `json:"depth"`
	Title        string   `json:"title"`
	Description  string   `json:"description"`
	Status       Status   `json:"status"`
	Dependencies []string `json:"dependencies"`
	Children     []string `json:"children"`
	Version      int      `json:"version"`
	Revision     int      `json:"revision"`
	// Previous names the predecessor document ("" for version 1).
	Previous  string    `json:"previous"`
	Author    string    `json:"author"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Git holds the card's native Git source facts; null until the runtime
	// publishes them (see PublishSourceFacts).
	Git *SourceFacts `json:"git"`
}

// Tombstoned reports whether the card was deleted.
func (c Card) Tombstoned() bool { return c.Kind == KindTombstone }

// Head selects a card's current document plus its current-only mailbox.
type Head struct {
	Format   int    `json:"format"`
	HeadUUID string `json:"head_uuid"`
	Card     string `json:"card"`
	// Document names the selected file in the card's history directory.
	Document string   `json:"document"`
	Version  int      `json:"version"`
	Revision int      `json:"revision"`
	Mailbox  []string `json:"mailbox"`
}

// Segment returns the spreadsheet-style child segment of index n
// (0 → a, 25 → z, 26 → aa, …).
func Segment(n int) string {
	var b []byte
	for n++; n > 0; n = (n - 1) / 26 {
		b = append(b, byte('a'+(n-1)%26))
	}
	slices.Reverse(b)
	return string(b)
}

// ValidID reports whether id is RootID followed by lower-case segments.
func ValidID(id string) bool {
	parts := strings.Split(id, ".")
	if parts[0] != RootID || len(parts) > MaxDepth+1 {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || len(p) > 6 {
			return false
		}
		for _, r := range p {
			if r < 'a' || r > 'z' {
				return false
			}
		}
	}
	return true
}

// ParentOf returns the parent identifier derived from id ("" for the root).
func ParentOf(id string) string {
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return ""
	}
	return id[:i]
}

// DepthOf returns the depth derived from id (root = 0).
func DepthOf(id string) int { return strings.Count(id, ".") }

// Errors of card mutations. Each is wrapped with the card and operation.
var (
	ErrNotFound     = errors.New("no such card")
	ErrTombstoned   = errors.New("card is deleted")
	ErrStatus       = errors.New("status does not admit this operation")
	ErrDepth        = errors.New("maximum card depth reached")
	ErrChildType    = errors.New("child type is not permitted")
	ErrDependency   = errors.New("invalid dependency")
	ErrCycle        = errors.New("dependencies form a cycle")
	ErrDependedOn   = errors.New("an active sibling depends on this card")
	ErrNotCompleted = errors.New("dependencies are not done")
	ErrRoot         = errors.New("the root card cannot be deleted or moved")
	ErrInvalid      = errors.New("invalid input")
)

func opErr(op, id string, err error) error { return fmt.Errorf("%s %s: %w", op, id, err) }
