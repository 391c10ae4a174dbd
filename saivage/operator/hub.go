package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// DefaultDebounce is the hint coalescing window.
const DefaultDebounce = 75 * time.Millisecond

// Hint names a resource whose REST representation may have changed.
type Hint struct {
	Topic string `json:"topic"` // runtime, card, conversation, exchange, processes, events, analyst
	Key   string `json:"key,omitempty"`
}

// SyncHub coalesces hints per exact key and fans them out to live
// sockets. A key's hint leaves DefaultDebounce after its last arrival, so
// repeated publications of one resource within the window become one hint
// while other keys are not held back; a key that keeps changing still
// leaves at the latest maxWaitFactor windows after its first pending
// arrival, so a busy resource (a parent gaining children one after another)
// is seen within two windows, not only when it falls quiet. Hints are lossy: a slow socket drops batches and must refetch.
type SyncHub struct {
	mu       sync.Mutex
	debounce time.Duration
	pending  map[Hint]*pendingHint
	order    []Hint
	timer    *time.Timer
	subs     map[chan []Hint]struct{}
	now      func() time.Time
}

type pendingHint struct{ first, due time.Time }

// maxWaitFactor bounds how long a continuously republished key waits: two
// windows keep a hint at least one window after its last arrival when two
// arrivals fall within one window, and bound the wait at 150 ms.
const maxWaitFactor = 2

// NewSyncHub returns a hub; debounce 0 means DefaultDebounce.
func NewSyncHub(debounce time.Duration) *SyncHub {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	return &SyncHub{debounce: debounce, pending: map[Hint]*pendingHint{}, subs: map[chan []Hint]struct{}{}, now: time.Now}
}

// Hint records a change; it never blocks.
func (h *SyncHub) Hint(topic, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hint := Hint{Topic: topic, Key: key}
	now := h.now()
	p := h.pending[hint]
	if p == nil {
		p = &pendingHint{first: now}
		h.pending[hint] = p
		h.order = append(h.order, hint)
	}
	p.due = now.Add(h.debounce)
	if limit := p.first.Add(maxWaitFactor * h.debounce); p.due.After(limit) {
		p.due = limit
	}
	h.scheduleLocked(now)
}

// scheduleLocked arms the timer for the earliest due hint.
func (h *SyncHub) scheduleLocked(now time.Time) {
	if len(h.order) == 0 {
		return
	}
	next := h.pending[h.order[0]].due
	for _, k := range h.order[1:] {
		if d := h.pending[k].due; d.Before(next) {
			next = d
		}
	}
	wait := max(next.Sub(now), 0)
	if h.timer == nil {
		h.timer = time.AfterFunc(wait, h.flush)
	} else {
		h.timer.Reset(wait)
	}
}

func (h *SyncHub) flush() {
	h.mu.Lock()
	now := h.now()
	var batch []Hint
	keep := h.order[:0]
	for _, k := range h.order {
		if p := h.pending[k]; !p.due.After(now) {
			batch = append(batch, k)
			delete(h.pending, k)
		} else {
			keep = append(keep, k)
		}
	}
	h.order = keep
	h.scheduleLocked(now)
	subs := make([]chan []Hint, 0, len(h.subs))
	for c := range h.subs {
		subs = append(subs, c)
	}
	h.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	for _, c := range subs {
		select {
		case c <- batch:
		default: // lossy: the socket refetches
		}
	}
}

// Subscribe returns a channel of hint batches and its cancel function.
func (h *SyncHub) Subscribe() (<-chan []Hint, func()) {
	c := make(chan []Hint, 16)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// tickets are short-lived one-time WebSocket credentials, so bearer tokens
// never appear in URLs.
type tickets struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const ticketTTL = 60 * time.Second

func newTickets() *tickets { return &tickets{m: map[string]time.Time{}} }

func (t *tickets) issue() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for k, exp := range t.m {
		if now.After(exp) {
			delete(t.m, k)
		}
	}
	t.m[id] = now.Add(ticketTTL)
	return id
}

// redeem consumes a ticket.
func (t *tickets) redeem(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.m[id]
	delete(t.m, id)
	return ok && time.Now().Before(exp)
}

func (s *Server) postTicket(w http.ResponseWriter, r *http.Request) error {
	if err := bodyless(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ticket": s.tickets.issue(), "expires_in_seconds": int(ticketTTL.Seconds())})
	return nil
}

// Topics every live socket receives without a lease; the others (card,
// conversation, exchange) need an acknowledged lease for their exact key.
var unleasedTopics = map[string]bool{"runtime": true, "analyst": true, "events": true, "processes": true}

// MaxLeases bounds the leases of one socket.
const MaxLeases = 512

// leaseMsg is a client's lease request: {"op": "subscribe"|"unsubscribe",
// "id": N, "topic": "card", "key": "project.a"}.
type leaseMsg struct {
	Op    string `json:"op"`
	ID    int64  `json:"id"`
	Topic string `json:"topic"`
	Key   string `json:"key"`
}

// leases are one connection's acknowledged exact-key leases. A subscribe
// replaces the key's lease; an unsubscribe removes it only when it names
// the current lease, so a stale unsubscribe never removes its successor.
type leases map[Hint]int64

// apply handles one request and returns the acknowledgement to send.
func (l leases) apply(m leaseMsg) map[string]any {
	key := Hint{Topic: m.Topic, Key: m.Key}
	switch {
	case m.Topic != "card" && m.Topic != "conversation" && m.Topic != "exchange":
		return map[string]any{"nack": m.ID, "error": "leases are for the card, conversation and exchange topics"}
	case m.Key == "":
		return map[string]any{"nack": m.ID, "error": "a lease needs a key"}
	}
	switch m.Op {
	case "subscribe":
		if _, ok := l[key]; !ok && len(l) >= MaxLeases {
			return map[string]any{"nack": m.ID, "error": "too many leases on this socket"}
		}
		l[key] = m.ID
	case "unsubscribe":
		if l[key] == m.ID {
			delete(l, key)
		}
	default:
		return map[string]any{"nack": m.ID, "error": "op must be subscribe or unsubscribe"}
	}
	return map[string]any{"ack": m.ID}
}

// filter keeps the hints this connection receives.
func (l leases) filter(batch []Hint) []Hint {
	var out []Hint
	for _, h := range batch {
		if _, ok := l[h]; ok || unleasedTopics[h.Topic] {
			out = append(out, h)
		}
	}
	return out
}

// live upgrades to a WebSocket that sends {"hints": [...]} batches. It
// authenticates with a one-time ticket (?ticket=) or the bearer header.
// The client holds leases on exact keys (subscribe, then wait for the
// ack, then fetch); closing the socket drops them all. Sockets only
// observe; they submit no work.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) && !s.tickets.redeem(r.URL.Query().Get("ticket")) {
		writeError(w, http.StatusUnauthorized, "Unauthorized", "a live socket needs a ticket from POST /api/auth/ws-ticket or the bearer header")
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4096)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	hints, unsubscribe := s.hub.Subscribe()
	defer unsubscribe()
	requests := make(chan leaseMsg, 16)
	go func() {
		defer cancel()
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m leaseMsg
			if json.Unmarshal(b, &m) != nil {
				m = leaseMsg{Op: "invalid"}
			}
			select {
			case requests <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	hello, _ := json.Marshal(map[string]any{"hello": "saivage", "runtime": s.rt.Status().Status})
	if err := write(ctx, conn, hello); err != nil {
		return
	}
	own := leases{}
	for {
		select {
		case <-ctx.Done():
			conn.Close(websocket.StatusNormalClosure, "")
			return
		case m := <-requests:
			b, _ := json.Marshal(own.apply(m))
			if err := write(ctx, conn, b); err != nil {
				return
			}
		case batch := <-hints:
			if batch = own.filter(batch); len(batch) == 0 {
				continue
			}
			b, _ := json.Marshal(map[string]any{"hints": batch})
			if err := write(ctx, conn, b); err != nil {
				return
			}
		}
	}
}

func write(ctx context.Context, conn *websocket.Conn, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}
