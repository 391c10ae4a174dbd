package host

import (
	"encoding/json"
	"sync"

	"github.com/agentstack/agentstack/steward/chats"
)

// pendingRequest is what a turn waits for the user to answer: the approval
// of a gated call or an ask_user question. Both live in one registry, keep a
// card in the transcript (pending, then how it ended) and are answered by
// their id through the kind's own frame.
type pendingRequest struct {
	id     string
	kind   string // protocol.EntryApproval or protocol.EntryQuestion
	chatID string
	frame  any      // protocol.ApprovalRequest or protocol.Question, as clients get it
	answer chan any // policy.ApprovalResponse or the answer text; buffered
}

// pendingSet is the registry of every pending request of the host's chats.
type pendingSet struct {
	mu   sync.Mutex
	byID map[string]*pendingRequest
}

func newPendingSet() *pendingSet { return &pendingSet{byID: map[string]*pendingRequest{}} }

// add registers p until the returned function is called.
func (s *pendingSet) add(p *pendingRequest) (remove func()) {
	s.mu.Lock()
	s.byID[p.id] = p
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.byID[p.id] == p {
			delete(s.byID, p.id)
		}
		s.mu.Unlock()
	}
}

// answer hands v to the pending request id of kind and unregisters it; it
// reports false when there is none (answered, timed out or cancelled).
func (s *pendingSet) answer(id, kind string, v any) bool {
	s.mu.Lock()
	p := s.byID[id]
	if p == nil || p.kind != kind {
		s.mu.Unlock()
		return false
	}
	delete(s.byID, id)
	s.mu.Unlock()
	p.answer <- v
	return true
}

// chatOf returns the chat of the pending request id of kind.
func (s *pendingSet) chatOf(id, kind string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byID[id]; p != nil && p.kind == kind {
		return p.chatID, true
	}
	return "", false
}

// frames returns the frames of chatID's pending requests of kind.
func (s *pendingSet) frames(chatID, kind string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, p := range s.byID {
		if p.chatID == chatID && p.kind == kind {
			out = append(out, p.frame)
		}
	}
	return out
}

// journalCard keeps a pending request's card in its chat's transcript as
// entry id; updateCard records how it ended. Both go through the running
// turn's journal (requests only happen inside a turn).
func (m *ChatManager) journalCard(chatID, id, kind string, card any) {
	data, _ := json.Marshal(card)
	m.journalOf(chatID).append(&chats.Entry{ID: id, Kind: kind, Data: data})
}

func (m *ChatManager) updateCard(chatID, id string, card any) {
	data, _ := json.Marshal(card)
	m.journalOf(chatID).update(id, data)
}
