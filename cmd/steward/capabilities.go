package main

import (
	"github.com/agentstack/agentstack/steward/voice"
	"github.com/agentstack/agentstack/steward/watch"
)

// writeCapabilities registers the write tools agent watches may be granted
// (spec: "Generic Watch Engine Internals"): each declares the argument
// fields a grant may pass, those every call needs, and that every passed
// field must be constrained. All run once per grant: the watch engine's
// durable claim keeps a retried delivery from running them again, and the
// journal never re-executes an uncertain write.
func writeCapabilities() []watch.Capability {
	mailFields := []string{"account", "from", "to", "cc", "bcc", "subject", "body"}
	return []watch.Capability{
		{Tool: "mcp__mail__send_email", Description: "send an email through the write journal",
			Allowed: mailFields, Required: []string{"to", "subject", "body"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__mail__reply_email", Description: "reply to a mirrored message through the write journal",
			Allowed:  []string{"messageId", "account", "from", "to", "cc", "subject", "body", "replyAll", "quote"},
			Required: []string{"messageId", "body"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__mail__schedule_email", Description: "schedule an email through the write journal",
			Allowed: append(append([]string{}, mailFields...), "sendAt"), Required: []string{"to", "subject", "body", "sendAt"},
			ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__calendar__create_event", Description: "create a calendar event (stable calendarId preferred; a title must name exactly one calendar)",
			Allowed:  []string{"calendarId", "calendar", "title", "start", "end", "allDay", "timeZone", "location", "notes", "url", "alarms", "recurrence"},
			Required: []string{"title", "start", "end"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__calendar__update_event", Description: "change a calendar event",
			Allowed:  []string{"uid", "occurrenceStart", "scope", "title", "start", "end", "allDay", "timeZone", "location", "notes", "url", "alarms", "recurrence"},
			Required: []string{"uid"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__calendar__delete_event", Description: "delete a calendar event",
			Allowed: []string{"uid", "occurrenceStart", "scope"}, Required: []string{"uid"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__contacts__create_contact", Description: "add a contact",
			Allowed:             []string{"addressBook", "fullName", "first", "last", "nickname", "organization", "title", "notes", "birthday", "emails", "phones", "addresses"},
			ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		{Tool: "mcp__contacts__update_contact", Description: "change a contact",
			Allowed:  []string{"uid", "nativeId", "fullName", "first", "last", "nickname", "organization", "title", "notes", "birthday", "emails", "phones", "addresses"},
			Required: []string{"uid"}, ConstraintsRequired: true, Mode: "journaled", MaxInvocations: 1},
		// A watch may call the user (STEWARD_VOICE_TRANSPORT): one dial per
		// event, claimed before dialing; the call replaces the push unless
		// every matched rule says voiceFallback "push".
		{Tool: "mcp__voice__" + voice.ToolCallStart, Description: "call the user on the phone with an opening line",
			Allowed: []string{"openingLine"}, ConstraintsRequired: true, Mode: watch.CapabilityVoice, MaxInvocations: 1},
	}
}
