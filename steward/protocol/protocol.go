// Package protocol is the versioned JSON contract between Steward's host and
// any client (the web app, a phone, a script) over the WebSocket at /ws.
// Every frame is one JSON object with "v" (the protocol version) and "type";
// a client may add "id" to a request, and the host echoes it on the reply or
// error. docs/protocol.md shows one example of every frame.
package protocol

import (
	"encoding/json"
	"time"
)

// Version is the protocol version this host speaks.
const Version = 1

// Subprotocol is the WebSocket subprotocol the host selects. A browser may
// authenticate by also offering TokenSubprotocolPrefix + token.
const (
	Subprotocol            = "steward.v1"
	TokenSubprotocolPrefix = "steward.token."
)

// Limits the host enforces on client frames.
const (
	MaxFrameBytes   = 1 << 20 // a larger frame closes the connection with 1009
	MaxMessageChars = 100_000 // a longer user message is refused with an error frame
)

// Client-to-host frame types.
const (
	TypeAuth            = "auth"
	TypeChatList        = "chat.list"
	TypeChatCreate      = "chat.create"
	TypeChatRename      = "chat.rename"
	TypeChatDelete      = "chat.delete"
	TypeChatOpen        = "chat.open"
	TypeUserMessage     = "user.message"
	TypeAbort           = "abort"
	TypeApprovalRespond = "approval.respond"
	TypeQuestionAnswer  = "question.answer"
	TypeClientFocus     = "client.focus"
)

// Host-to-client frame types (chat.list also answers the request of that name).
const (
	TypeHello            = "hello"
	TypeChats            = "chats"
	TypeChatUpdated      = "chat.updated"
	TypeChatDeleted      = "chat.deleted"
	TypeTranscript       = "chat.transcript"
	TypeUserMessageSaved = "user.message.saved"
	TypeAssistantDelta   = "assistant.delta"
	TypeAssistantMessage = "assistant.message"
	TypeToolStart        = "tool.start"
	TypeToolResult       = "tool.result"
	TypeToolError        = "tool.error"
	TypeApprovalRequest  = "approval.request"
	TypeApprovalResolved = "approval.resolved"
	TypeQuestion         = "question"
	TypeTurnDone         = "turn.done"
	TypeError            = "error"
	TypeSummarised       = "conversation.summarised"
)

// Envelope is the part every frame has.
type Envelope struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	ID   string `json:"id,omitempty"` // the client's request id, echoed
}

// Env returns an envelope of the current version.
func Env(typ, id string) Envelope { return Envelope{V: Version, Type: typ, ID: id} }

// --- client to host ---

// Auth authenticates a connection with the host token as its first frame.
type Auth struct {
	Envelope
	Token string `json:"token"`
}

// ChatCreate creates a chat.
type ChatCreate struct {
	Envelope
	Title string `json:"title,omitempty"`
}

// ChatRename renames a chat.
type ChatRename struct {
	Envelope
	ChatID string `json:"chatId"`
	Title  string `json:"title"`
}

// ChatRef names a chat: chat.delete, chat.open and abort.
type ChatRef struct {
	Envelope
	ChatID string `json:"chatId"`
}

// UserMessage sends the user's text (and uploaded files) into a chat.
type UserMessage struct {
	Envelope
	ChatID string   `json:"chatId"`
	Text   string   `json:"text"`
	Files  []string `json:"files,omitempty"` // upload tokens from POST /upload
}

// ClientFocus tells the host which chat this client shows while its page is
// visible (ChatID empty or Visible false: none). The host skips the Web Push
// of a finished reply or a pending approval for a chat a client is showing.
type ClientFocus struct {
	Envelope
	ChatID  string `json:"chatId,omitempty"`
	Visible bool   `json:"visible"`
}

// Approval decisions a client can send.
const (
	DecisionApprove = "approve" // with optional edited Args
	DecisionDeny    = "deny"    // with optional Note
	DecisionRevise  = "revise"  // Note goes back to the model; nothing runs
)

// ApprovalRespond answers an approval request.
type ApprovalRespond struct {
	Envelope
	ApprovalID string          `json:"approvalId"`
	Decision   string          `json:"decision"`
	Args       json.RawMessage `json:"args,omitempty"` // edited arguments (approve only)
	Note       string          `json:"note,omitempty"`
}

// QuestionAnswer answers a question the agent asked.
type QuestionAnswer struct {
	Envelope
	QuestionID string `json:"questionId"`
	Answer     string `json:"answer"`
}

// --- host to client ---

// Hello greets an authenticated connection.
type Hello struct {
	Envelope
	Server  string `json:"server"`
	Version string `json:"version"`
}

// Chat is a chat in the list.
type Chat struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Unread    bool      `json:"unread"`
	Origin    string    `json:"origin"` // user, quick-send, watch
}

// Chats is the chat list, most recent first.
type Chats struct {
	Envelope
	Chats []Chat `json:"chats"`
}

// ChatUpdated announces a created or renamed chat.
type ChatUpdated struct {
	Envelope
	Chat Chat `json:"chat"`
}

// ChatDeleted announces a deleted chat.
type ChatDeleted struct {
	Envelope
	ChatID string `json:"chatId"`
}

// Entry is one transcript item; Data is the frame that created it (a
// user.message.saved, assistant.message, tool card, approval or question
// card, turn error or summary: the Entry* kinds name its Go type, and
// DecodeEntry decodes it).
type Entry struct {
	ID   string          `json:"id"`
	Kind string          `json:"kind"` // user, assistant, tool, approval, error, summary
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Transcript is a chat's history plus what is still pending in it.
type Transcript struct {
	Envelope
	ChatID  string            `json:"chatId"`
	Entries []Entry           `json:"entries"`
	Pending []ApprovalRequest `json:"pendingApprovals"`
	// Questions are the chat's ask_user questions still waiting for an
	// answer (answer them with question.answer).
	Questions []Question `json:"pendingQuestions,omitempty"`
	Running   bool       `json:"running"` // a turn is in progress
}

// UserMessageSaved echoes a stored user message.
type UserMessageSaved struct {
	Envelope
	ChatID    string `json:"chatId"`
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
	Files     []File `json:"files,omitempty"`
}

// File is an uploaded file attached to a message.
type File struct {
	Token string `json:"token"`
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	Type  string `json:"type"`
}

// AssistantDelta is streamed assistant text.
type AssistantDelta struct {
	Envelope
	ChatID string `json:"chatId"`
	TurnID string `json:"turnId"`
	Text   string `json:"text"`
}

// AssistantMessage is a complete assistant message.
type AssistantMessage struct {
	Envelope
	ChatID    string `json:"chatId"`
	TurnID    string `json:"turnId"`
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
}

// ToolCard is a tool call as the transcript keeps it; tool.start,
// tool.result and tool.error carry it as it progresses.
type ToolCard struct {
	CallID string          `json:"callId"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	// Status is running, done, error or blocked.
	Status string `json:"status"`
	// EffectiveArgs are the arguments it really ran with, when an approval
	// with edits replaced the model's.
	EffectiveArgs json.RawMessage `json:"effectiveArgs,omitempty"`
	Content       string          `json:"content,omitempty"`
	IsError       bool            `json:"isError,omitempty"`
	// Kind names the shape of Data for rich cards (email, file, event,
	// search_results; see docs/protocol.md).
	Kind       string          `json:"kind,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"durationMs,omitempty"`
}

// ToolEvent is tool.start, tool.result or tool.error.
type ToolEvent struct {
	Envelope
	ChatID string `json:"chatId"`
	TurnID string `json:"turnId"`
	ToolCard
}

// ApprovalRequest asks the user to approve a gated tool call.
type ApprovalRequest struct {
	Envelope
	ChatID     string          `json:"chatId"`
	ApprovalID string          `json:"approvalId"`
	CallID     string          `json:"callId"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	ExpiresAt  time.Time       `json:"expiresAt"`
}

// ApprovalResolved reports how an approval ended: approved, denied, revise,
// timeout or no_channel.
type ApprovalResolved struct {
	Envelope
	ChatID     string          `json:"chatId"`
	ApprovalID string          `json:"approvalId"`
	Verdict    string          `json:"verdict"`
	Args       json.RawMessage `json:"args,omitempty"`
	Note       string          `json:"note,omitempty"`
}

// Question is the agent asking the user something.
type Question struct {
	Envelope
	ChatID     string   `json:"chatId"`
	QuestionID string   `json:"questionId"`
	Text       string   `json:"text"`
	Options    []string `json:"options,omitempty"`
}

// TurnResult is the outcome of one turn: on success the persisted assistant
// message; on failure the error and whether the user aborted.
type TurnResult struct {
	OK        bool   `json:"ok"`
	MessageID string `json:"messageId,omitempty"`
	Text      string `json:"text"`
	Error     string `json:"error,omitempty"`
	Aborted   bool   `json:"aborted,omitempty"`
	// Cause and Fix explain a failed turn in plain language (Error keeps
	// the technical chain, for the details).
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
}

// Summarised says the older part of the chat's agent conversation was
// replaced by a summary to fit the model's context (the transcript keeps
// every entry). It is stored as a "summary" transcript entry at the point
// where it happened; clients show it as a marked entry that expands to
// the summary.
type Summarised struct {
	Envelope
	ChatID    string `json:"chatId"`
	TurnID    string `json:"turnId"`
	EntryID   string `json:"entryId"`
	Summary   string `json:"summary"`
	Covered   int    `json:"coveredMessages"` // messages the summary stands for
	Remaining int    `json:"remainingMessages"`
}

// TurnDone ends a turn.
type TurnDone struct {
	Envelope
	ChatID string `json:"chatId"`
	TurnID string `json:"turnId"`
	TurnResult
}

// Error codes.
const (
	ErrBadFrame     = "bad_frame"    // not JSON, or missing fields
	ErrUnknownType  = "unknown_type" // a type this host does not know
	ErrBadVersion   = "bad_version"  // a "v" this host does not speak
	ErrUnauthorized = "unauthorized" // missing or wrong token
	ErrNotFound     = "not_found"    // no such chat or approval
	ErrTooLarge     = "too_large"    // a message over the limits
	ErrBusy         = "busy"         // the chat is running a turn
	ErrInternal     = "internal"     // the host failed; see its log
)

// Error reports a problem with a client's frame or request.
type Error struct {
	Envelope
	Code    string `json:"code"`
	Message string `json:"message"`
	ChatID  string `json:"chatId,omitempty"`
}
