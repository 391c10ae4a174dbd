package actions

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// A calendar reminder's proposal and snapshot are functions of its event:
// the row keeps only the event's fields (column reminder_event, schema
// version 4) and reading rebuilds both exactly as the producer built them.
// A 10,000-reminder pass then writes about half the pages and encodes no
// JSON; what a reader gets is unchanged.

// The first byte of an encoded reminder event is its version.
const (
	// reminderEventV1: every string of the trigger, Start and End formatted,
	// length-prefixed, then the all-day flag (the first compact rows).
	reminderEventV1 = 1
	// reminderEventV2: a flags byte, the strings without the refId when the
	// source key repeats it, then the start's zone offset, the end as
	// seconds after the start and the end's zone offset (varints). The start
	// is the row's due_at. About 70 bytes a row less, and no time formatting
	// on the write path.
	reminderEventV2 = 2
)

// Flags of a version-2 reminder event.
const (
	reminderAllDay   = 1 << iota
	reminderKeyIsRef // the refId is the source key after "calendar:"
)

// storedPayload is an item's payload columns as stored.
type storedPayload struct {
	proposal, diagnostics, snapshot []byte
	event                           []byte // reminder_event: nil for a full payload
}

// expand sets the proposal and snapshot a reminder for t carries.
func (t *reminderTrigger) expand(it *Item) {
	trigger, _ := json.Marshal(t.formatted())
	readArgs, _ := json.Marshal(struct {
		UID string `json:"uid"`
	}{t.RefID})
	it.Snapshot = Snapshot{Trigger: trigger, Rationale: "deterministic calendar reminder"}
	it.Proposal = []Alternative{{Summary: "Review the event before it starts", Confidence: 1,
		Steps: []Step{{Label: "Open the event", Type: "tool", Tool: "mcp__calendar__read_event", Args: readArgs}}}}
}

// formatted returns t with Start and End formatted (RFC 3339, in the zone
// the times carry).
func (t *reminderTrigger) formatted() *reminderTrigger {
	if t.Start != "" || t.startAt.IsZero() {
		return t
	}
	f := *t
	f.Start, f.End = t.startAt.Format(time.RFC3339), t.endAt.Format(time.RFC3339)
	return &f
}

// strings lists t's strings in their encoded order, the refId first.
func (t *reminderTrigger) strings() []*string {
	return []*string{&t.RefID, &t.UID, &t.Title, &t.Location, &t.Calendar, &t.Account, &t.Source}
}

// appendReminderEvent encodes t, a reminder stored under key, as version 2
// (t's times are set: reminderItem builds it).
func appendReminderEvent(b []byte, key string, t *reminderTrigger) []byte {
	var flags byte
	if t.AllDay {
		flags |= reminderAllDay
	}
	fields := t.strings()
	if ref, ok := strings.CutPrefix(key, "calendar:"); ok && ref != "" && ref == t.RefID {
		flags |= reminderKeyIsRef
		fields = fields[1:]
	}
	b = append(b, reminderEventV2, flags)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(*f)))
		b = append(b, *f...)
	}
	_, startOff := t.startAt.Zone()
	_, endOff := t.endAt.Zone()
	b = binary.AppendVarint(b, int64(startOff))
	b = binary.AppendVarint(b, t.endAt.Unix()-t.startAt.Unix())
	return binary.AppendVarint(b, int64(endOff))
}

var errReminderEvent = errors.New("malformed reminder event")

// decodeReminderEvent is appendReminderEvent's inverse for a row with that
// source key and due_at (Unix milliseconds, the event's start); it also
// reads version 1.
func decodeReminderEvent(b []byte, key string, due sql.NullInt64) (*reminderTrigger, error) {
	if len(b) == 0 {
		return nil, errReminderEvent
	}
	var t reminderTrigger
	switch b[0] {
	case reminderEventV1:
		return decodeReminderEventV1(b[1:])
	case reminderEventV2:
	default:
		return nil, errReminderEvent
	}
	if len(b) < 2 || b[1]&^(reminderAllDay|reminderKeyIsRef) != 0 || !due.Valid {
		return nil, errReminderEvent
	}
	flags := b[1]
	b = b[2:]
	fields := t.strings()
	if flags&reminderKeyIsRef != 0 {
		ref, ok := strings.CutPrefix(key, "calendar:")
		if !ok || ref == "" {
			return nil, errReminderEvent
		}
		t.RefID, fields = ref, fields[1:]
	}
	var err error
	for _, f := range fields {
		if *f, b, err = readString(b); err != nil {
			return nil, err
		}
	}
	var v [3]int64
	for i := range v {
		n, k := binary.Varint(b)
		if k <= 0 {
			return nil, errReminderEvent
		}
		v[i], b = n, b[k:]
	}
	const day = 24 * 60 * 60
	if len(b) != 0 || v[0] < -day || v[0] > day || v[2] < -day || v[2] > day {
		return nil, errReminderEvent
	}
	t.AllDay = flags&reminderAllDay != 0
	start := time.UnixMilli(due.Int64)
	t.startAt = start.In(time.FixedZone("", int(v[0])))
	t.endAt = time.Unix(start.Unix()+v[1], 0).In(time.FixedZone("", int(v[2])))
	return &t, nil
}

// decodeReminderEventV1 reads version 1 (after its version byte).
func decodeReminderEventV1(b []byte) (*reminderTrigger, error) {
	var t reminderTrigger
	var err error
	for _, f := range append(t.strings(), &t.Start, &t.End) {
		if *f, b, err = readString(b); err != nil {
			return nil, err
		}
	}
	if len(b) != 1 || b[0] > 1 {
		return nil, errReminderEvent
	}
	t.AllDay = b[0] == 1
	return &t, nil
}

// readString reads one uvarint-length-prefixed string off b.
func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, errReminderEvent
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}
