package actions

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"
)

// A calendar reminder's proposal and snapshot are functions of its event:
// the row keeps only the event's fields (column reminder_event, schema
// version 4) and reading rebuilds both exactly as the producer built them.
// A 10,000-reminder pass then writes about half the pages and encodes no
// JSON; what a reader gets is unchanged.

// reminderPayloadVersion is the first byte of an encoded reminder event.
const reminderPayloadVersion = 1

// storedPayload is an item's payload columns as stored.
type storedPayload struct {
	proposal, diagnostics, snapshot []byte
	event                           []byte // reminder_event: nil for a full payload
}

// expand sets the proposal and snapshot a reminder for t carries.
func (t *reminderTrigger) expand(it *Item) {
	trigger, _ := json.Marshal(t)
	readArgs, _ := json.Marshal(struct {
		UID string `json:"uid"`
	}{t.RefID})
	it.Snapshot = Snapshot{Trigger: trigger, Rationale: "deterministic calendar reminder"}
	it.Proposal = []Alternative{{Summary: "Review the event before it starts", Confidence: 1,
		Steps: []Step{{Label: "Open the event", Type: "tool", Tool: "mcp__calendar__read_event", Args: readArgs}}}}
}

// formatted returns t with Start and End formatted (RFC 3339, local time).
func (t *reminderTrigger) formatted() *reminderTrigger {
	if t.Start != "" || t.startAt.IsZero() {
		return t
	}
	f := *t
	f.Start, f.End = t.startAt.Format(time.RFC3339), t.endAt.Format(time.RFC3339)
	return &f
}

// fields lists t's strings in their encoded order.
func (t *reminderTrigger) fields() []*string {
	return []*string{&t.RefID, &t.UID, &t.Title, &t.Location, &t.Calendar, &t.Account, &t.Source, &t.Start, &t.End}
}

// appendReminderEvent encodes t: the version byte, each string
// length-prefixed (uvarint), then the all-day flag.
func appendReminderEvent(b []byte, t *reminderTrigger) []byte {
	t = t.formatted()
	b = append(b, reminderPayloadVersion)
	for _, f := range t.fields() {
		b = binary.AppendUvarint(b, uint64(len(*f)))
		b = append(b, *f...)
	}
	if t.AllDay {
		return append(b, 1)
	}
	return append(b, 0)
}

var errReminderEvent = errors.New("malformed reminder event")

// decodeReminderEvent is appendReminderEvent's inverse.
func decodeReminderEvent(b []byte) (*reminderTrigger, error) {
	if len(b) == 0 || b[0] != reminderPayloadVersion {
		return nil, errReminderEvent
	}
	b = b[1:]
	var t reminderTrigger
	for _, f := range t.fields() {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errReminderEvent
		}
		*f, b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	if len(b) != 1 || b[0] > 1 {
		return nil, errReminderEvent
	}
	t.AllDay = b[0] == 1
	return &t, nil
}
