package mail

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// ClassifyRequest is a mailbox whose role neither mail.yaml nor the name
// table tells.
type ClassifyRequest struct {
	Account string
	Mailbox string
	// Siblings are the account's other mailbox names: a folder called
	// "Posta inviata" among Italian names is easier to read in context.
	Siblings []string
}

// MailboxClassifier tells the role of a mailbox from its name; RoleNone
// means an ordinary folder ("other").
type MailboxClassifier interface {
	ClassifyMailbox(ctx context.Context, req ClassifyRequest) (Role, error)
}

// Attribution of role classification in the usage ledger.
const (
	ClassifyService = "mail-mirror"
	ClassifyAction  = "classify"
)

// DefaultClassifyModel is the gateway tier that classifies mailboxes: a
// cheap one, the answer being one word.
const DefaultClassifyModel = "tier-2"

// classifyTimeout bounds one classification request.
const classifyTimeout = time.Minute

// ChatClassifier asks an OpenAI-compatible chat endpoint (the gateway by
// default) for a mailbox's role, attributed mail-mirror / classify.
type ChatClassifier struct {
	Client *llm.Client
	Model  string
}

const classifyPrompt = `You classify e-mail folders by name. Folders may be named in any language or by any mail client.
Answer with exactly one word from this list:
inbox (incoming mail), sent (mail the user sent), drafts (unsent drafts), trash (deleted mail), junk (spam),
archive (archived mail), all (a copy of every message, like Gmail's All Mail), other (an ordinary folder).
Answer other unless the name clearly means one of the special folders.`

// ClassifyMailbox implements MailboxClassifier.
func (c *ChatClassifier) ClassifyMailbox(ctx context.Context, req ClassifyRequest) (Role, error) {
	ctx = llm.WithAttribution(ctx, llm.Attribution{Service: ClassifyService, Action: ClassifyAction})
	user := fmt.Sprintf("Folder: %q\nAccount: %q", req.Mailbox, req.Account)
	if len(req.Siblings) > 0 {
		sib := req.Siblings
		if len(sib) > 40 {
			sib = sib[:40]
		}
		user += "\nOther folders of the account: " + strings.Join(sib, "; ")
	}
	resp, err := c.Client.Chat(ctx, &llm.ChatRequest{Model: c.Model, Messages: []llm.Message{
		{Role: "system", Content: classifyPrompt}, {Role: "user", Content: user}}})
	if err != nil {
		return RoleNone, fmt.Errorf("classify mailbox %q via %s: %w", req.Mailbox, c.Client.BaseURL(), err)
	}
	return ParseRoleAnswer(resp.Choices[0].Message.Content)
}

// ParseRoleAnswer reads a model's one-word answer; "other" (or "none") is
// RoleNone. Anything else is an error, so a rambling answer is not cached.
func ParseRoleAnswer(answer string) (Role, error) {
	w := strings.ToLower(strings.Trim(strings.TrimSpace(answer), ".\"'`*"))
	if w == "other" || w == "none" {
		return RoleNone, nil
	}
	if r := Role(w); r != RoleNone && r.Valid() {
		return r, nil
	}
	return RoleNone, fmt.Errorf("classify mailbox: answer %q is not one of %s, other", answer, strings.Join(RoleNames(), ", "))
}

// Classifier returns the mailbox classifier MAIL_CLASSIFY_ENDPOINT names,
// or nil when classification is off (ClassifyOff then says why).
func (s *Settings) Classifier() MailboxClassifier {
	if s.ClassifyEndpoint == "" {
		return nil
	}
	return &ChatClassifier{
		Client: llm.NewClient(llm.ClientOptions{BaseURL: s.ClassifyEndpoint, APIKey: s.APIKey, HTTPClient: &http.Client{Timeout: classifyTimeout}}),
		Model:  s.ClassifyModel,
	}
}

// RoleNote is the note shown (System page, `steward mail status`) when
// classification is off (off names the setting) and some mailboxes have
// no role the name table or mail.yaml gives: they are read as ordinary
// folders. It is "" when there is nothing to say.
func RoleNote(off string, unclassified []string) string {
	if off == "" || len(unclassified) == 0 {
		return ""
	}
	list := unclassified
	more := ""
	if len(list) > 8 {
		list, more = list[:8], fmt.Sprintf(" and %d more", len(unclassified)-8)
	}
	return fmt.Sprintf("%d mailbox(es) read as ordinary folders because role classification is off (%s): %s%s; "+
		"name their roles under roles: in mail.yaml, or turn classification on", len(unclassified), off, strings.Join(list, ", "), more)
}
