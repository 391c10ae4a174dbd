package threads

import (
	"regexp"
	"strings"
	"sync"
)

// Verdict is the prefilter's decision on a thread. Reason says why it is
// noise ("sender no-reply: noreply@shop.example"), for the record a user
// reads when asking why a thread was never considered.
type Verdict struct {
	Noise  bool
	Reason string
}

// noiseRoles are the mailboxes whose mail is never a candidate.
var noiseRoles = map[string]bool{"junk": true, "trash": true, "drafts": true}

// noReplyLocal matches the local parts of addresses nobody reads. It and
// noiseSubjects compile on first use: every process of the binary links this
// package, and most (a reconcile, a connector) never run the prefilter.
var noReplyLocal = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(no[-_.]?reply|do[-_.]?not[-_.]?reply|donotreply|no[-_.]?risposta|non[-_.]?rispondere|mailer[-_.]?daemon|postmaster|bounces?|notifications?|notify|alerts?|newsletters?|news|marketing|promo(tions)?|info[-_.]?noreply)([-+_.].*)?$`)
})

// noiseSubject is a kind of subject of machine mail or low-value requests.
type noiseSubject struct {
	re     *regexp.Regexp
	reason string
}

// noiseSubjects are subjects of machine mail and low-value requests, in
// English and Italian (the languages Steward's texts support).
var noiseSubjects = sync.OnceValue(func() []noiseSubject {
	return []noiseSubject{
		{regexp.MustCompile(`(?i)\b(delivery status notification|undeliverable|undelivered mail|mail delivery (failed|failure|subsystem)|returned mail|delivery failure|mancato recapito|messaggio non recapitato)\b`), "delivery failure"},
		{regexp.MustCompile(`(?i)\b(out of (the )?office|automatic reply|auto[- ]?reply|autoreply|risposta automatica|fuori ufficio|assente dall'ufficio)\b`), "automatic reply"},
		{regexp.MustCompile(`(?i)\b(survey|questionnaire|how did we do|rate (your|us|our)|tell us (what you think|about your)|your (feedback|opinion)|leave a review|sondaggio|questionario|la tua opinione|valuta (il|la|la tua|il tuo))\b`), "survey"},
		{regexp.MustCompile(`(?i)\b(newsletter|weekly digest|daily digest|unsubscribe)\b`), "newsletter"},
	}
})

// IsNoReply reports whether addr is an address nobody reads replies to
// (no-reply, mailer-daemon, bounces, notification senders).
func IsNoReply(addr string) bool {
	addr = lower(addr)
	local, _, ok := strings.Cut(addr, "@")
	if !ok || local == "" {
		return false
	}
	return noReplyLocal().MatchString(local)
}

// bulkReason says why m is list, bulk or machine-generated mail, or "".
func bulkReason(m *Message) string {
	switch {
	case m.ListID != "":
		return "mailing list " + m.ListID
	case m.Precedence == "bulk" || m.Precedence == "list" || m.Precedence == "junk":
		return "precedence " + m.Precedence
	case m.AutoSubmitted != "" && m.AutoSubmitted != "no":
		return "auto-submitted " + m.AutoSubmitted
	}
	return ""
}

// Prefilter rejects obvious noise before any model cost, deterministically,
// from the sender, the subject, the body state and the mailbox role. Rules, in
// order, over the messages outside junk, trash and drafts:
//
//   - none left (or all flagged junk) → "mailbox <role>";
//   - no message has a readable body → "empty body";
//   - the user never wrote, and every external sender is a no-reply address
//     → "sender no-reply: <addr>";
//   - the user never wrote, and every external message is list, bulk or
//     auto-submitted mail → "bulk mail: <header>";
//   - every external message's subject is a delivery failure, an automatic
//     reply, a survey or a newsletter → "subject <kind>: <subject>".
//
// A thread the user took part in is a conversation: only the mailbox, body
// and subject rules apply to it.
func Prefilter(t *Thread) Verdict {
	var kept []*Message
	lastRole := ""
	for i := range t.Messages {
		m := &t.Messages[i]
		switch {
		case noiseRoles[m.Role]:
			lastRole = m.Role
		case m.Junk:
			lastRole = "junk"
		default:
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		if lastRole == "" {
			return Verdict{Noise: true, Reason: "empty thread"}
		}
		return Verdict{Noise: true, Reason: "mailbox " + lastRole}
	}
	readable, userWrote := false, false
	var external []*Message
	for _, m := range kept {
		if m.BodyState != "none" && strings.TrimSpace(m.Body) != "" {
			readable = true
		}
		if m.FromMe {
			userWrote = true
		} else {
			external = append(external, m)
		}
	}
	if !readable {
		return Verdict{Noise: true, Reason: "empty body"}
	}
	if len(external) == 0 {
		return Verdict{}
	}
	if !userWrote {
		if addr := allNoReply(external); addr != "" {
			return Verdict{Noise: true, Reason: "sender no-reply: " + addr}
		}
		if why := allBulk(external); why != "" {
			return Verdict{Noise: true, Reason: "bulk mail: " + why}
		}
	}
	if kind := allNoiseSubjects(external); kind != "" {
		return Verdict{Noise: true, Reason: "subject " + kind + ": " + external[len(external)-1].Subject}
	}
	return Verdict{}
}

// allNoReply returns the newest external sender when every one is a
// no-reply address, else "".
func allNoReply(external []*Message) string {
	for _, m := range external {
		if !IsNoReply(m.FromAddr) {
			return ""
		}
	}
	return lower(external[len(external)-1].FromAddr)
}

// allBulk returns the newest message's bulk reason when every external
// message is bulk mail, else "".
func allBulk(external []*Message) string {
	why := ""
	for _, m := range external {
		if why = bulkReason(m); why == "" {
			return ""
		}
	}
	return why
}

// allNoiseSubjects returns the kind of the newest subject when every external
// subject matches a noise pattern, else "".
func allNoiseSubjects(external []*Message) string {
	kind := ""
	for _, m := range external {
		kind = ""
		for _, s := range noiseSubjects() {
			if s.re.MatchString(m.Subject) {
				kind = s.reason
				break
			}
		}
		if kind == "" {
			return ""
		}
	}
	return kind
}
