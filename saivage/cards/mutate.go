package cards

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
)

// active reads a card that must exist and not be deleted.
func (s *Store) active(op, id string) (Head, Card, error) {
	h, c, err := s.read(id)
	if err != nil {
		return Head{}, Card{}, err
	}
	if c.Tombstoned() {
		return Head{}, Card{}, opErr(op, id, ErrTombstoned)
	}
	return h, c, nil
}

// EditInput changes card metadata; nil fields stay as they are.
type EditInput struct {
	Title        *string
	Description  *string
	Dependencies *[]string
}

// Edit changes title, description or dependencies. A no-op publishes
// nothing and reports changed == false.
func (s *Store) Edit(ctx context.Context, id string, in EditInput) (c Card, changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, c, err := s.active("edit", id)
	if err != nil {
		return Card{}, false, err
	}
	if c.Status == Cancelled {
		return Card{}, false, opErr("edit", id, fmt.Errorf("%w: card is cancelled", ErrStatus))
	}
	next := c
	if in.Title != nil {
		next.Title = *in.Title
	}
	if in.Description != nil {
		next.Description = *in.Description
	}
	if err := validText(next.Title, next.Description); err != nil {
		return Card{}, false, opErr("edit", id, err)
	}
	if in.Dependencies != nil {
		if id == RootID && len(*in.Dependencies) > 0 {
			return Card{}, false, opErr("edit", id, fmt.Errorf("%w: the root has no siblings", ErrDependency))
		}
		if id != RootID {
			_, parent, err := s.read(c.Parent)
			if err != nil {
				return Card{}, false, err
			}
			if err := s.checkDeps(parent, id, *in.Dependencies); err != nil {
				return Card{}, false, opErr("edit", id, err)
			}
		}
		next.Dependencies = slices.Clone(*in.Dependencies)
	}
	if next.Title == c.Title && next.Description == c.Description && slices.Equal(next.Dependencies, c.Dependencies) {
		return c, false, nil
	}
	_, next, err = s.publish(h, next, false)
	return next, err == nil, err
}

// Reorder moves child to position index among its parent's children
// (complete membership, tombstones included). A no-op publishes nothing.
func (s *Store) Reorder(ctx context.Context, child string, index int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if child == RootID {
		return false, opErr("reorder", child, ErrRoot)
	}
	if _, _, err := s.active("reorder", child); err != nil {
		return false, err
	}
	ph, parent, err := s.active("reorder", ParentOf(child))
	if err != nil {
		return false, err
	}
	at := slices.Index(parent.Children, child)
	if at < 0 {
		return false, opErr("reorder", child, ErrNotFound)
	}
	if index < 0 || index >= len(parent.Children) {
		return false, opErr("reorder", child, fmt.Errorf("%w: position %d outside 0..%d", ErrInvalid, index, len(parent.Children)-1))
	}
	if at == index {
		return false, nil
	}
	kids := slices.Delete(slices.Clone(parent.Children), at, at+1)
	parent.Children = slices.Insert(kids, index, child)
	_, _, err = s.publish(ph, parent, false)
	return err == nil, err
}

// setStatus publishes a status change after checking admit.
func (s *Store) setStatus(op, id string, to Status, admit func(Card) error) (Card, error) {
	h, c, err := s.active(op, id)
	if err != nil {
		return Card{}, err
	}
	if err := admit(c); err != nil {
		return Card{}, opErr(op, id, err)
	}
	c.Status = to
	_, c, err = s.publish(h, c, false)
	return c, err
}

func statusErr(c Card) error { return fmt.Errorf("%w: card is %s", ErrStatus, c.Status) }

// Activate moves an activatable card (backlog/changed/blocked/stopped)
// whose dependencies are all done to running.
func (s *Store) Activate(ctx context.Context, id string) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setStatus("activate", id, Running, func(c Card) error {
		if !c.Status.AdmitsActivation() {
			return statusErr(c)
		}
		for _, d := range c.Dependencies {
			_, dc, err := s.read(d)
			if err != nil {
				return err
			}
			if !dc.Status.CompletesDependency() {
				return fmt.Errorf("%w: %s is %s", ErrNotCompleted, d, dc.Status)
			}
		}
		if c.Parent != "" {
			if _, pc, err := s.read(c.Parent); err != nil {
				return err
			} else if pc.Status != Running {
				return fmt.Errorf("%w: parent %s is %s, not running", ErrStatus, c.Parent, pc.Status)
			}
		}
		return nil
	})
}

// Finish publishes the natural outcome of a running card: done, failed or
// blocked. Done requires every active child to be done or cancelled.
func (s *Store) Finish(ctx context.Context, id string, outcome Status) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if outcome != Done && outcome != Failed && outcome != Blocked {
		return Card{}, opErr("finish", id, fmt.Errorf("%w: outcome %s", ErrInvalid, outcome))
	}
	return s.setStatus("finish", id, outcome, func(c Card) error {
		if c.Status != Running {
			return statusErr(c)
		}
		if outcome != Done {
			return nil
		}
		for _, k := range c.Children {
			_, kc, err := s.read(k)
			if err != nil {
				return err
			}
			if !kc.Tombstoned() && !kc.Status.CompletesDescendant() {
				return fmt.Errorf("%w: child %s is %s", ErrNotCompleted, k, kc.Status)
			}
		}
		return nil
	})
}

// Stop publishes stopped for a running card (recovery or project Stop).
func (s *Store) Stop(ctx context.Context, id string) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setStatus("stop", id, Stopped, func(c Card) error {
		if c.Status != Running {
			return statusErr(c)
		}
		return nil
	})
}

// Reopen moves a blocked, done or failed card to changed.
func (s *Store) Reopen(ctx context.Context, id string) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setStatus("reopen", id, Changed, func(c Card) error {
		if !c.Status.AdmitsReopen() {
			return statusErr(c)
		}
		return nil
	})
}

// subtree returns the active descendants of id (not id itself).
func (s *Store) subtree(c Card) ([]Card, error) {
	var out []Card
	queue := slices.Clone(c.Children)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		_, k, err := s.read(id)
		if err != nil {
			return nil, err
		}
		if k.Tombstoned() {
			continue
		}
		out = append(out, k)
		queue = append(queue, k.Children...)
	}
	return out, nil
}

// Cancel cancels a card and every active descendant that is not done or
// cancelled, publishing deepest first. Done descendants are preserved.
func (s *Store) Cancel(ctx context.Context, id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := s.active("cancel", id)
	if err != nil {
		return nil, err
	}
	if !c.Status.AdmitsCancel() {
		return nil, opErr("cancel", id, statusErr(c))
	}
	desc, err := s.subtree(c)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(desc, func(a, b Card) int { return cmp.Compare(b.Depth, a.Depth) })
	var cancelled []string
	for _, d := range append(desc, c) {
		if !d.Status.AdmitsCancel() {
			continue
		}
		if _, err := s.setStatus("cancel", d.ID, Cancelled, func(Card) error { return nil }); err != nil {
			return cancelled, err
		}
		cancelled = append(cancelled, d.ID)
	}
	return cancelled, nil
}

// Delete publishes a tombstone for a card. The tombstone keeps the card's
// membership and position; traversal stops at it. The root, running cards,
// cards with running descendants and cards an active sibling depends on
// cannot be deleted.
func (s *Store) Delete(ctx context.Context, id string) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == RootID {
		return Card{}, opErr("delete", id, ErrRoot)
	}
	h, c, err := s.active("delete", id)
	if err != nil {
		return Card{}, err
	}
	desc, err := s.subtree(c)
	if err != nil {
		return Card{}, err
	}
	for _, d := range append(desc, c) {
		if d.Status == Running {
			return Card{}, opErr("delete", id, fmt.Errorf("%w: %s is running", ErrStatus, d.ID))
		}
	}
	_, parent, err := s.read(c.Parent)
	if err != nil {
		return Card{}, err
	}
	for _, sib := range parent.Children {
		if sib == id {
			continue
		}
		_, sc, err := s.read(sib)
		if err != nil {
			return Card{}, err
		}
		if !sc.Tombstoned() && slices.Contains(sc.Dependencies, id) {
			return Card{}, opErr("delete", id, fmt.Errorf("%w: %s", ErrDependedOn, sib))
		}
	}
	c.Kind = KindTombstone
	_, c, err = s.publish(h, c, false)
	return c, err
}

// Message is a queued notification for a card's designated recipient.
type Message struct {
	UUID string `json:"uuid"`
	Card string `json:"card"`
	From string `json:"from"`
	Text string `json:"text"`
}

// MaxMessage bounds a notification's text.
const MaxMessage = 1000

// Enqueue publishes a message document and then a head that adds it to the
// card's mailbox. Only the revision advances; no card version is written.
func (s *Store) Enqueue(ctx context.Context, id, from, text string) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, c, err := s.active("notify", id)
	if err != nil {
		return Message{}, err
	}
	if !c.Status.AdmitsChildCreation() {
		return Message{}, opErr("notify", id, statusErr(c))
	}
	if strings.TrimSpace(text) == "" || len(text) > MaxMessage {
		return Message{}, opErr("notify", id, fmt.Errorf("%w: message must be 1..%d bytes", ErrInvalid, MaxMessage))
	}
	m := Message{UUID: state.NewUUID(), Card: id, From: from, Text: text}
	data, _ := json.Marshal(m)
	if err := s.pub.CreateNew(filepath.Join(s.CardDir(id), "mailbox", m.UUID+".json"), data); err != nil {
		return Message{}, err
	}
	h.Revision++
	h.HeadUUID = state.NewUUID()
	h.Mailbox = append(slices.Clone(h.Mailbox), m.UUID)
	return m, s.publishHead(h, false)
}

// Dequeue removes delivered message UUIDs from the mailbox selection.
func (s *Store) Dequeue(ctx context.Context, id string, uuids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _, err := s.active("dequeue", id)
	if err != nil {
		return err
	}
	next := slices.DeleteFunc(slices.Clone(h.Mailbox), func(u string) bool { return slices.Contains(uuids, u) })
	if len(next) == len(h.Mailbox) {
		return nil
	}
	h.Mailbox, h.Revision, h.HeadUUID = next, h.Revision+1, state.NewUUID()
	return s.publishHead(h, false)
}

// History returns every version of a card, oldest first, following each
// document's predecessor link from the selected one.
func (s *Store) History(ctx context.Context, id string) ([]Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := s.read(id)
	if err != nil {
		return nil, err
	}
	out := []Card{c}
	for c.Version > 1 {
		if c, err = s.readDoc(id, c.Previous, c.Version-1); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Reverse(out)
	return out, nil
}

// RecordRef returns the reference of a record declared by an active card's
// type.
func (s *Store) RecordRef(ctx context.Context, id, name string) (records.Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := s.active("record", id)
	if err != nil {
		return records.Ref{}, err
	}
	return s.recordRef(c, name)
}

func (s *Store) recordRef(c Card, name string) (records.Ref, error) {
	tbl, _ := s.wf.Table(c.Type)
	if _, ok := tbl.Record(name); !ok {
		return records.Ref{}, opErr("record", c.ID, fmt.Errorf("%w: type %s declares no record %q", ErrInvalid, c.Type, name))
	}
	return records.Ref{CardDir: s.CardDir(c.ID), Card: c.ID, Name: name}, nil
}

// EditRecord directly accepts content into a card's record (operator or
// Analyst edit). Backlog, changed, running and stopped cards keep their
// status; blocked, done and failed cards reopen as changed; cancelled cards
// refuse.
func (s *Store) EditRecord(ctx context.Context, id, name, content, author string) (records.Accepted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, c, err := s.active("edit record of", id)
	if err != nil {
		return records.Accepted{}, err
	}
	if !c.Status.AdmitsRecordEdit() {
		return records.Accepted{}, opErr("edit record of", id, statusErr(c))
	}
	ref, err := s.recordRef(c, name)
	if err != nil {
		return records.Accepted{}, err
	}
	a, err := s.records.AcceptContent(ref, content, author)
	if err != nil {
		return records.Accepted{}, err
	}
	if c.Status.AdmitsReopen() {
		c.Status = Changed
		if _, _, err := s.publish(h, c, false); err != nil {
			return records.Accepted{}, err
		}
	}
	return a, nil
}

// Messages returns the messages selected by a card's mailbox, in order.
func (s *Store) Messages(ctx context.Context, id string) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _, err := s.active("read mailbox of", id)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(h.Mailbox))
	for _, u := range h.Mailbox {
		p := filepath.Join(s.CardDir(id), "mailbox", u+".json")
		data, err := state.ReadFile(p)
		if err != nil {
			return nil, admErr(p, "%v", err)
		}
		var m Message
		if err := strictJSON(data, &m); err != nil || m.UUID != u || m.Card != id {
			return nil, admErr(p, "invalid mailbox message")
		}
		out = append(out, m)
	}
	return out, nil
}
