package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/protocol"
)

// authWait is how long a connection may take to send its auth frame.
const authWait = 10 * time.Second

// writeTimeout is how long one frame may take to reach a client before the
// connection is dropped.
const writeTimeout = 10 * time.Second

// hub keeps the authenticated WebSocket clients and fans frames out to them.
// A client too slow to keep up is disconnected rather than slowing the others.
type hub struct {
	mu      sync.Mutex
	clients map[*wsClient]struct{}
	log     *slog.Logger
}

type wsClient struct {
	conn *websocket.Conn
	send chan []byte
	done chan struct{}
	once sync.Once
	// follows are the chats whose streaming frames this client receives:
	// the ones it created, opened or wrote in. Guarded by hub.mu.
	follows map[string]bool
	// focus is the chat this client shows while visible ("" for none).
	// Guarded by hub.mu.
	focus string
}

func (c *wsClient) close(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		close(c.done)
		c.conn.Close(code, reason)
	})
}

func (h *hub) add(c *wsClient) {
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(c *wsClient) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

// Clients returns how many authenticated clients are connected.
func (h *hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// Broadcast sends frame to every client.
func (h *hub) Broadcast(frame any) { h.deliver("", frame) }

// Publish sends a chat's frame to the clients following that chat.
func (h *hub) Publish(chatID string, frame any) { h.deliver(chatID, frame) }

// follow makes c receive chatID's frames.
func (h *hub) follow(c *wsClient, chatID string) {
	h.mu.Lock()
	c.follows[chatID] = true
	h.mu.Unlock()
}

// setFocus records the chat c shows ("" for none).
func (h *hub) setFocus(c *wsClient, chatID string) {
	h.mu.Lock()
	c.focus = chatID
	h.mu.Unlock()
}

// Focused reports whether some connected client is showing chatID.
func (h *hub) Focused(chatID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if c.focus == chatID {
			return true
		}
	}
	return false
}

func (h *hub) deliver(chatID string, frame any) {
	var b []byte
	if d, ok := frame.(protocol.AssistantDelta); ok {
		b = d.AppendJSON(make([]byte, 0, 96+len(d.Text))) // one per streamed token
	} else {
		var err error
		if b, err = json.Marshal(frame); err != nil {
			h.log.Error("cannot encode a frame", "err", err)
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if chatID != "" && !c.follows[chatID] {
			continue
		}
		select {
		case c.send <- b:
		default:
			h.log.Warn("disconnecting a WebSocket client that cannot keep up")
			delete(h.clients, c)
			go c.close(websocket.StatusPolicyViolation, "client too slow")
		}
	}
}

func (h *hub) closeAll() { h.closeAllWith(websocket.StatusGoingAway, "host shutting down") }

// closeAllWith disconnects every client with code and reason; it returns
// how many there were.
func (h *hub) closeAllWith(code websocket.StatusCode, reason string) int {
	h.mu.Lock()
	cs := make([]*wsClient, 0, len(h.clients))
	for c := range h.clients {
		cs = append(cs, c)
	}
	h.clients = map[*wsClient]struct{}{}
	h.mu.Unlock()
	for _, c := range cs {
		c.close(code, reason)
	}
	return len(cs)
}

// handleWS serves /ws: authentication by the first frame or the
// Sec-WebSocket-Protocol header, never by the URL.
func (h *Host) handleWS(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" && r.URL.Query().Has("token") {
		http.Error(w, "tokens are never accepted in URLs; send them in the first frame or the Sec-WebSocket-Protocol header", http.StatusBadRequest)
		return
	}
	authed := false
	for _, p := range websocketProtocols(r) {
		if tok, ok := strings.CutPrefix(p, protocol.TokenSubprotocolPrefix); ok {
			if !h.validToken(tok) {
				writeJSONError(w, http.StatusUnauthorized, "wrong token")
				return
			}
			authed = true
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   []string{protocol.Subprotocol},
		OriginPatterns: h.originPatterns,
	})
	if err != nil {
		return // Accept already answered (e.g. 403 for a foreign origin)
	}
	conn.SetReadLimit(protocol.MaxFrameBytes)
	c := &wsClient{conn: conn, send: make(chan []byte, 256), done: make(chan struct{}), follows: map[string]bool{}}
	ctx := h.ctx

	if !authed {
		actx, cancel := context.WithTimeout(ctx, authWait)
		_, data, err := conn.Read(actx)
		cancel()
		var a protocol.Auth
		if err != nil || json.Unmarshal(data, &a) != nil || a.Type != protocol.TypeAuth || !h.validToken(a.Token) {
			h.writeNow(conn, protocol.Error{Envelope: protocol.Env(protocol.TypeError, a.ID), Code: protocol.ErrUnauthorized,
				Message: "the first frame must be {\"v\":1,\"type\":\"auth\",\"token\":…} with the host token"})
			conn.Close(websocket.StatusPolicyViolation, "unauthorized")
			return
		}
	}
	go c.writeLoop(ctx)
	c.send <- mustJSON(protocol.Hello{Envelope: protocol.Env(protocol.TypeHello, ""), Server: "steward", Version: h.opts.Version})
	h.hub.add(c)
	h.audit(ctx, AuditEvent{Actor: "user", Type: "session.connect", Risk: "low", Summary: "client connected", Payload: map[string]any{"remote": r.RemoteAddr}})
	defer func() {
		h.hub.remove(c)
		c.close(websocket.StatusNormalClosure, "")
		h.audit(ctx, AuditEvent{Actor: "user", Type: "session.disconnect", Risk: "low", Summary: "client disconnected"})
	}()
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
				h.log.Warn("closed a WebSocket client that sent an oversized frame", "limit", protocol.MaxFrameBytes)
			}
			return
		}
		if typ != websocket.MessageText {
			c.reply(protocol.Error{Envelope: protocol.Env(protocol.TypeError, ""), Code: protocol.ErrBadFrame, Message: "frames must be JSON text"})
			continue
		}
		h.dispatch(ctx, c, data)
	}
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

func (h *Host) writeNow(conn *websocket.Conn, frame any) {
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	conn.Write(ctx, websocket.MessageText, mustJSON(frame))
}

func (c *wsClient) writeLoop(ctx context.Context) {
	// One watchdog timer for the connection instead of a deadline context
	// per frame (a timer, a context and a cancellation hook for every
	// token): a write still blocked after writeTimeout drops the connection,
	// which ends the write. The writes themselves take a context that is
	// never cancelled; closing the connection (the watchdog, the client
	// leaving, the host closing) is what ends them.
	watchdog := time.AfterFunc(writeTimeout, func() { c.conn.CloseNow() })
	watchdog.Stop()
	defer watchdog.Stop()
	wctx := context.WithoutCancel(ctx)
	for {
		select {
		case b := <-c.send:
			watchdog.Reset(writeTimeout)
			err := c.conn.Write(wctx, websocket.MessageText, b)
			watchdog.Stop()
			if err != nil {
				c.close(websocket.StatusGoingAway, "write failed")
				return
			}
		case <-c.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// reply queues a frame for this client only.
func (c *wsClient) reply(frame any) {
	select {
	case c.send <- mustJSON(frame):
	case <-c.done:
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode frame: %v", err))
	}
	return b
}

func (h *Host) dispatch(ctx context.Context, c *wsClient, data []byte) {
	var env protocol.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		c.reply(protocol.Error{Envelope: protocol.Env(protocol.TypeError, ""), Code: protocol.ErrBadFrame, Message: "the frame is not a JSON object: " + err.Error()})
		return
	}
	fail := func(code, msg, chatID string) {
		c.reply(protocol.Error{Envelope: protocol.Env(protocol.TypeError, env.ID), Code: code, Message: msg, ChatID: chatID})
	}
	if env.V != protocol.Version {
		fail(protocol.ErrBadVersion, fmt.Sprintf("protocol version %d is not supported; this host speaks %d", env.V, protocol.Version), "")
		return
	}
	decode := func(v any) bool {
		if err := json.Unmarshal(data, v); err != nil {
			fail(protocol.ErrBadFrame, fmt.Sprintf("bad %s frame: %v", env.Type, err), "")
			return false
		}
		return true
	}
	storeErr := func(err error, chatID string) {
		if errors.Is(err, chats.ErrNotFound) {
			fail(protocol.ErrNotFound, "no such chat", chatID)
			return
		}
		h.log.Error("chat store failed", "err", err)
		fail(protocol.ErrInternal, "the host could not complete the request; see its log", chatID)
	}
	store := h.opts.Chats.Store
	switch env.Type {
	case protocol.TypeAuth:
		c.reply(protocol.Hello{Envelope: protocol.Env(protocol.TypeHello, env.ID), Server: "steward", Version: h.opts.Version})
	case protocol.TypeChatList:
		list, err := store.List(ctx)
		if err != nil {
			storeErr(err, "")
			return
		}
		c.reply(protocol.Chats{Envelope: protocol.Env(protocol.TypeChats, env.ID), Chats: toProtocolChats(list)})
	case protocol.TypeChatCreate:
		var f protocol.ChatCreate
		if !decode(&f) {
			return
		}
		ch, err := store.Create(ctx, f.Title, "user")
		if err != nil {
			storeErr(err, "")
			return
		}
		h.hub.follow(c, ch.ID)
		h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, env.ID), Chat: toProtocolChat(*ch)})
	case protocol.TypeChatRename:
		var f protocol.ChatRename
		if !decode(&f) {
			return
		}
		if err := store.Rename(ctx, f.ChatID, f.Title); err != nil {
			if errors.Is(err, chats.ErrNotFound) {
				storeErr(err, f.ChatID)
			} else {
				fail(protocol.ErrBadFrame, err.Error(), f.ChatID)
			}
			return
		}
		ch, _ := store.Get(ctx, f.ChatID)
		h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, env.ID), Chat: toProtocolChat(*ch)})
	case protocol.TypeChatDelete:
		var f protocol.ChatRef
		if !decode(&f) {
			return
		}
		h.manager.Forget(f.ChatID)
		if err := store.Delete(ctx, f.ChatID); err != nil {
			storeErr(err, f.ChatID)
			return
		}
		h.manager.deleted(f.ChatID)
		h.hub.Broadcast(protocol.ChatDeleted{Envelope: protocol.Env(protocol.TypeChatDeleted, env.ID), ChatID: f.ChatID})
	case protocol.TypeChatOpen:
		var f protocol.ChatRef
		if !decode(&f) {
			return
		}
		// Follow first: a frame published from now on reaches the client,
		// and the entry behind it is already queued or written.
		h.hub.follow(c, f.ChatID)
		entries, err := h.manager.Transcript(ctx, f.ChatID)
		if err != nil {
			storeErr(err, f.ChatID)
			return
		}
		store.SetUnread(ctx, f.ChatID, false)
		out := protocol.Transcript{Envelope: protocol.Env(protocol.TypeTranscript, env.ID), ChatID: f.ChatID,
			Pending: h.manager.PendingApprovals(f.ChatID), Questions: h.manager.PendingQuestions(f.ChatID), Running: h.manager.Running(f.ChatID)}
		for _, e := range entries {
			out.Entries = append(out.Entries, protocol.Entry{ID: e.ID, Kind: e.Kind, At: e.At, Data: e.Data})
		}
		c.reply(out)
	case protocol.TypeUserMessage:
		var f protocol.UserMessage
		if !decode(&f) {
			return
		}
		if strings.TrimSpace(f.Text) == "" && len(f.Files) == 0 {
			fail(protocol.ErrBadFrame, "an empty message", f.ChatID)
			return
		}
		if n := utf8.RuneCountInString(f.Text); n > protocol.MaxMessageChars {
			fail(protocol.ErrTooLarge, fmt.Sprintf("the message has %d characters; the limit is %d", n, protocol.MaxMessageChars), f.ChatID)
			return
		}
		if err := h.manager.CheckChat(ctx, f.ChatID); err != nil {
			storeErr(err, f.ChatID)
			return
		}
		h.hub.follow(c, f.ChatID)
		files, err := h.files.resolve(ctx, f.Files)
		if err != nil {
			fail(protocol.ErrNotFound, err.Error(), f.ChatID)
			return
		}
		// The turn belongs to the host, not the connection: a page reload
		// does not abort it.
		h.turns.Add(1)
		go func() {
			defer h.turns.Done()
			h.manager.RunTurn(ctx, f.ChatID, f.Text, TurnOptions{Files: files, chatChecked: true})
		}()
	case protocol.TypeAbort:
		var f protocol.ChatRef
		if !decode(&f) {
			return
		}
		if !h.manager.Abort(f.ChatID) {
			fail(protocol.ErrNotFound, "no turn is running in this chat", f.ChatID)
		}
	case protocol.TypeApprovalRespond:
		var f protocol.ApprovalRespond
		if !decode(&f) {
			return
		}
		if err := h.manager.Respond(f); err != nil {
			code := protocol.ErrBadFrame
			if errors.Is(err, ErrNoApproval) {
				code = protocol.ErrNotFound
			}
			fail(code, err.Error(), "")
		}
	case protocol.TypeClientFocus:
		var f protocol.ClientFocus
		if !decode(&f) {
			return
		}
		focus := f.ChatID
		if !f.Visible {
			focus = ""
		}
		h.hub.setFocus(c, focus)
	case protocol.TypeQuestionAnswer:
		var f protocol.QuestionAnswer
		if !decode(&f) {
			return
		}
		if err := h.manager.Answer(f); err != nil {
			code := protocol.ErrBadFrame
			if errors.Is(err, ErrNoQuestion) {
				code = protocol.ErrNotFound
			}
			fail(code, err.Error(), "")
		}
	default:
		fail(protocol.ErrUnknownType, fmt.Sprintf("unknown frame type %q", env.Type), "")
	}
}

func toProtocolChat(c chats.Chat) protocol.Chat {
	return protocol.Chat{ID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Unread: c.Unread, Origin: c.Origin}
}

func toProtocolChats(list []chats.Chat) []protocol.Chat {
	out := make([]protocol.Chat, 0, len(list))
	for _, c := range list {
		out = append(out, toProtocolChat(c))
	}
	return out
}
