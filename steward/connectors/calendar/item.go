// Package calendar is Steward's calendar connector: it reads Apple's
// Calendar.sqlitedb and iCalendar files or vdir folders, keeps a local SQLite
// index with stable identities, UID aliases, full-text search and optional
// vectors, expands recurring events into occurrences, and serves
// search_events, read_event, list_calendars and check_availability over MCP.
//
// The index is a rebuildable sidecar: Apple's store (or the .ics files) stay
// the source of truth, and the index never writes to them. The approved
// write tools create_event, update_event and delete_event (Writer) change
// them through their own interfaces only: RFC 5545 files in vdir folders, or
// on macOS the launcher's EventKit bridge or Calendar.app's AppleScript;
// every write is journaled first and confirmed against a later sync
// (Confirmer).
package calendar

import (
	"fmt"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// Item is one calendar item read from a source: a single event, the master
// of a recurring series, or a detached occurrence that overrides one
// occurrence of a master (RecurrenceID set).
type Item struct {
	Source     string // configured source name
	Account    string // Apple store name, or the source's account label
	Calendar   string // calendar title
	CalendarID string // stable calendar identifier within the source
	UID        string // iCalendar UID (Apple unique_identifier)
	ExternalID string // server resource id (CalDAV href, vdir file name); may be empty
	SourcePath string // file the item was read from

	Title, Location, Notes, URL string

	// Start and End are instants. For an all-day event they are midnight of
	// StartDate and EndDate in the display zone.
	Start, End time.Time
	AllDay     bool
	// StartDate and EndDate (exclusive) are the civil dates of an all-day event.
	StartDate, EndDate string
	// TZID is the IANA zone whose wall clock the event keeps (used to expand
	// recurrences); empty for UTC, floating and all-day events.
	TZID     string
	Floating bool

	Status      string // confirmed, tentative, cancelled or empty
	Transparent bool   // marked free: does not block time

	RRule   string   // RRULE value as written, empty when not recurring
	ExDates []string // excluded occurrence starts: RFC 3339 instants or YYYY-MM-DD dates
	RDates  []string // extra occurrence starts, same forms
	// RecurrenceID is the original start of the occurrence this item
	// replaces; zero for masters and single events.
	RecurrenceID time.Time

	Alarms       []Alarm
	LastModified time.Time
}

// Alarm is a reminder: either an offset from the start or an absolute time.
type Alarm struct {
	OffsetMinutes *int64     `json:"offsetMinutes,omitempty"`
	At            *time.Time `json:"at,omitempty"`
	Action        string     `json:"action,omitempty"`
}

// ItemError is a problem with one item or file; the rest of the source
// still indexes.
type ItemError struct {
	Path string
	UID  string
	Err  error
}

func (e ItemError) Error() string {
	switch {
	case e.UID != "" && e.Path != "":
		return fmt.Sprintf("%s: event %s: %v", e.Path, e.UID, e.Err)
	case e.Path != "":
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("event %s: %v", e.UID, e.Err)
}

// SourceResult is everything one source yielded in a read.
type SourceResult struct {
	Items []Item
	// ItemErrors are per-item or per-file problems.
	ItemErrors []ItemError
	// FailedPaths are files that could not be read at all: rows previously
	// indexed from them are kept rather than deleted, because a failed read
	// is not evidence that the events are gone.
	FailedPaths []string
}

// Errors a source read can report for the whole source. They are wrapped
// with a message that tells the user what to do.
var (
	// ErrPermission means the OS refused access (on macOS: Full Disk Access).
	ErrPermission = localsource.ErrPermission
	// ErrLocked means another process holds the database lock.
	ErrLocked = localsource.ErrLocked
	// ErrMissing means the configured path does not exist.
	ErrMissing = localsource.ErrMissing
)

// appleEpoch is the reference date of Core Data timestamps.
var appleEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

func appleTime(sec float64) time.Time {
	return appleEpoch.Add(time.Duration(sec * float64(time.Second))).Truncate(time.Second)
}
