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

// SyncHub coalesces hints for DefaultDebounce and fans them out to live
// sockets. Hints are lossy: a slow socket drops batches and must refetch.
type SyncHub struct {
	mu       sync.Mutex
	debounce time.Duration
	pending  []Hint
	seen     map[Hint]bool
	timer    *time.Timer
	subs     map[chan []Hint]struct{}
}

// NewSyncHub returns a hub; debounce 0 means DefaultDebounce.
func NewSyncHub(debounce time.Duration) *SyncHub {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	return &SyncHub{debounce: debounce, seen: map[Hint]bool{}, subs: map[chan []Hint]struct{}{}}
}

// Hint records a change; it never blocks.
func (h *SyncHub) Hint(topic, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hint := Hint{Topic: topic, Key: key}
	if !h.seen[hint] {
		h.seen[hint] = true
		h.pending = append(h.pending, hint)
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.debounce, h.flush)
	}
}

func (h *SyncHub) flush() {
	h.mu.Lock()
	batch := h.pending
	h.pending, h.seen, h.timer = nil, map[Hint]bool{}, nil
	subs := make([]chan []Hint, 0, len(h.subs))
	for c := range h.subs {
		subs = append(subs, c)
	}
	h.mu.Unlock()
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

// live upgrades to a WebSocket that sends {"hints": [...]} batches. It
// authenticates with a one-time ticket (?ticket=) or the bearer header.
// Sockets only observe; they submit nothing.
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
	ctx := conn.CloseRead(r.Context())
	hints, cancel := s.hub.Subscribe()
	defer cancel()
	hello, _ := json.Marshal(map[string]any{"hello": "saivage", "runtime": s.rt.Status().Status})
	if err := write(ctx, conn, hello); err != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			conn.Close(websocket.StatusNormalClosure, "")
			return
		case batch := <-hints:
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
