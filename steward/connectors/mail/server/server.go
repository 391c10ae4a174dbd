// Package server exposes the mail mirror as an MCP server: search_mail,
// read_message, read_thread, list_mailboxes, save_attachment and
// open_in_mail, the gated writes send_email, reply_email and schedule_email
// (with their hidden preflight companions), plus the private steward/prepareSearch request the host
// sends at start-up to warm the search connections.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
	"github.com/agentstack/agentstack/steward/connectors/mail/search"
	"github.com/agentstack/agentstack/steward/connectors/mcptool"
	"github.com/agentstack/agentstack/steward/pathguard"
)

// BlobOpener opens stored attachment content by SHA-256.
type BlobOpener interface {
	Open(sha string) (*os.File, error)
}

// Opener shows a message in the mail client.
type Opener interface {
	Open(ctx context.Context, mailURL, path string) error
}

// Options configure the server.
type Options struct {
	Engine *search.Engine
	Blobs  BlobOpener
	// Guard checks save_attachment destinations; build it with NewGuard.
	Guard PathGuard
	// Opener opens messages (default: Mail via `open` on macOS, nothing elsewhere).
	Opener  Opener
	Version string
	Log     *slog.Logger
	// Sender adds send_email, reply_email and schedule_email (and their
	// preflight companions) when set.
	Sender Sender
}

// New builds the MCP server.
func New(opts Options) (*mcp.Server, error) {
	h, err := newHandlers(opts)
	if err != nil {
		return nil, err
	}
	s := newServer(opts.Version)
	if err := addReadTools(s, func(context.Context) (*handlers, error) { return h, nil }); err != nil {
		return nil, err
	}
	if opts.Sender != nil {
		addWriteTools(s, opts.Sender)
	}
	return s, nil
}

// NewDeferred builds the server of a connector started before mail is
// configured: the read tools are served at once and open returns their
// options on the first call that succeeds (an mcptool.Lazy). Until then
// every call answers with open's error, which says what to configure; a
// mail.yaml written later is picked up by the next call, without a
// restart. The write tools need a connector restart (the tool list is set
// when the host connects).
func NewDeferred(open func(context.Context) (Options, error), version string) (*mcp.Server, error) {
	lazy := mcptool.NewLazy(func(ctx context.Context) (*handlers, error) {
		opts, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return newHandlers(opts)
	}, func(*handlers) error { return nil }) // the stores live as long as the process, as with New
	s := newServer(version)
	if err := addReadTools(s, lazy.Get); err != nil {
		return nil, err
	}
	return s, nil
}

func newHandlers(opts Options) (*handlers, error) {
	if opts.Engine == nil || opts.Blobs == nil || opts.Guard == nil {
		return nil, errors.New("mail server: engine, blob store and path guard are required")
	}
	if opts.Opener == nil && runtime.GOOS == "darwin" {
		opts.Opener = macOpener{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &handlers{Options: opts}, nil
}

func newServer(version string) *mcp.Server {
	if version == "" {
		version = "dev"
	}
	return mcp.NewServer(&mcp.Implementation{Name: "steward-mail", Version: version}, &mcp.ServerOptions{
		Instructions: "Search and read the user's mirrored mail. search_mail returns compact summaries (at most 12); " +
			"read_message and read_thread return bodies in pages with continuation offsets.",
	})
}

// addReadTools serves the read tools and steward/prepareSearch from the
// handlers get returns on each call.
func addReadTools(s *mcp.Server, get func(context.Context) (*handlers, error)) error {
	d := readTools()
	mcp.AddTool(s, d["search_mail"], deferTo(get, (*handlers).search))
	mcp.AddTool(s, d["read_message"], deferTo(get, (*handlers).read))
	mcp.AddTool(s, d["read_thread"], deferTo(get, (*handlers).thread))
	mcp.AddTool(s, d["list_mailboxes"], deferTo(get, (*handlers).mailboxes))
	mcp.AddTool(s, d["save_attachment"], deferTo(get, (*handlers).save))
	mcp.AddTool(s, d["open_in_mail"], deferTo(get, (*handlers).open))
	return mcp.AddReceivingCustomMethod(s, mcptool.PrepareMethod, func(ctx context.Context, ss *mcp.ServerSession, p *PrepareParams) (*PrepareResult, error) {
		h, err := get(ctx)
		switch {
		case errors.Is(err, mail.ErrNoConfig):
			// Nothing to prepare: the host records the task as skipped,
			// not failed, and the tools keep explaining what to configure.
			return &PrepareResult{Skipped: localsource.NotConfiguredLine(err.Error())}, nil
		case errors.Is(err, search.ErrNoMirror):
			return &PrepareResult{Skipped: localsource.AdviceHead(err.Error())}, nil
		case err != nil:
			return nil, err
		}
		return h.prepare(ctx, ss, p)
	})
}

// deferTo adapts a handler method to a tool handler that gets its handlers
// from get on every call; get's error is the tool's error result.
func deferTo[In, Out any](get func(context.Context) (*handlers, error),
	m func(*handlers, context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		h, err := get(ctx)
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		return m(h, ctx, req, in)
	}
}

// readTools declares the tools served without a Sender, by name: New and
// NewDeferred serve the same declarations (annotations included, which the
// host's policy reads).
func readTools() map[string]*mcp.Tool {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}
	local := &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)}
	return map[string]*mcp.Tool{
		"search_mail": {Name: "search_mail", Annotations: readOnly, Description: "Search mail. Combine free text (query; ranked lexically and semantically) " +
			"with substring fields (sender, recipient, cc, subjectContains, bodyContains) and filters (after, before, account, mailbox, role, unread, flagged, " +
			"hasAttachments, minSize, maxSize). Without query, browses the newest 500 matching messages (sortBy size for the largest), paged by offset/limit inside that window; page.beyondWindow says older ones need narrower filters. Results are collapsed to one per thread unless " +
			"perMessage. Returns {messages, page}; page.notice says when semantic search was unavailable."},
		"read_message": {Name: "read_message", Annotations: readOnly, Description: "Read one message by id: headers, a page of the body " +
			"(offset/maxChars, nextOffset when more), bodyState (full, partial, none), attachments and the mailUrl deep link."},
		"read_thread": {Name: "read_thread", Annotations: readOnly, Description: "Read a thread by threadId, newest messages first, " +
			"bodies cut to 1,500 characters; nextOffset pages to older history."},
		"list_mailboxes": {Name: "list_mailboxes", Annotations: readOnly, Description: "List accounts and their mailboxes with roles, message and unread counts."},
		"save_attachment": {Name: "save_attachment", Annotations: local,
			Description: "Save an attachment (attachmentId from read_message) into a folder or to a new file path. Never overwrites: a name already taken gets a numbered suffix. Protected folders are refused."},
		"open_in_mail": {Name: "open_in_mail", Annotations: local,
			Description: "Open a message in the mail client (macOS Mail through its message:// link); elsewhere returns the message file's path."},
	}
}

func boolPtr(b bool) *bool { return &b }

type handlers struct{ Options }

// toolErr turns engine errors into messages the agent can act on.
func toolErr(err error) error {
	var ae *search.ArgumentError
	switch {
	case errors.As(err, &ae), errors.Is(err, search.ErrNotFound), errors.Is(err, search.ErrNoMirror):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the mail search took longer than 30 seconds and was stopped; narrow the request")
	}
	return fmt.Errorf("mail connector error: %w", err)
}

func (h *handlers) search(ctx context.Context, _ *mcp.CallToolRequest, q search.Query) (*mcp.CallToolResult, *search.Result, error) {
	r, err := h.Engine.Search(ctx, q)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	r.Kind = "search_results"
	for i := range r.Messages {
		r.Messages[i].Kind = "email"
	}
	return nil, r, nil
}

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, req search.ReadRequest) (*mcp.CallToolResult, *search.MessageView, error) {
	v, err := h.Engine.Read(ctx, req)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	v.Kind = "email"
	return nil, v, nil
}

func (h *handlers) thread(ctx context.Context, _ *mcp.CallToolRequest, req search.ThreadRequest) (*mcp.CallToolResult, *search.ThreadView, error) {
	v, err := h.Engine.ReadThread(ctx, req)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	return nil, v, nil
}

// MailboxList is list_mailboxes' result.
type MailboxList struct {
	Accounts []search.AccountView `json:"accounts"`
}

func (h *handlers) mailboxes(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *MailboxList, error) {
	a, err := h.Engine.Mailboxes(ctx)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	if a == nil {
		a = []search.AccountView{}
	}
	return nil, &MailboxList{Accounts: a}, nil
}

// SaveRequest is save_attachment's input.
type SaveRequest struct {
	AttachmentID string `json:"attachmentId" jsonschema:"attachment id from read_message"`
	Destination  string `json:"destination" jsonschema:"absolute folder (the attachment's own name is used) or new file path"`
}

// SaveResult reports a saved attachment.
type SaveResult struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func (h *handlers) save(ctx context.Context, _ *mcp.CallToolRequest, req SaveRequest) (*mcp.CallToolResult, *SaveResult, error) {
	info, err := h.Engine.Attachment(ctx, req.AttachmentID)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	if info.SHA256 == "" {
		return nil, nil, fmt.Errorf("attachment %s (%s) was not downloaded by the mail client; open the message in Mail first", req.AttachmentID, info.Filename)
	}
	dest, err := destination(req.Destination, info.Filename)
	if err != nil {
		return nil, nil, err
	}
	if dest, err = h.Guard.Check(dest); err != nil {
		if errors.Is(err, pathguard.ErrBlocked) {
			return nil, nil, fmt.Errorf("destination is a protected location: %w", err)
		}
		return nil, nil, toolErr(err)
	}
	src, err := h.Blobs.Open(info.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("attachment content is missing from the mirror (%v); run 'steward mail reconcile'", err)
	}
	defer src.Close()
	out, path, err := createUnique(dest)
	if err != nil {
		return nil, nil, fmt.Errorf("save attachment: %w", err)
	}
	n, err := io.Copy(out, src)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("save attachment: %w", err)
	}
	return nil, &SaveResult{Path: path, Size: n, SHA256: info.SHA256}, nil
}

// destination turns the requested destination into a file path: a folder
// gets the attachment's (sanitised) name.
func destination(dest, filename string) (string, error) {
	dest = strings.TrimSpace(dest)
	if strings.HasPrefix(dest, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dest = filepath.Join(home, dest[2:])
	}
	if !filepath.IsAbs(dest) {
		return "", fmt.Errorf("destination %q must be an absolute path", dest)
	}
	dest = filepath.Clean(dest)
	name := message.SafeFilename(filename)
	if name == "" {
		name = "attachment"
	}
	if st, err := os.Stat(dest); err == nil && st.IsDir() {
		return filepath.Join(dest, name), nil
	}
	parent := filepath.Dir(dest)
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return "", fmt.Errorf("destination folder %s does not exist", parent)
	}
	if base := message.SafeFilename(filepath.Base(dest)); base != filepath.Base(dest) || base == "" {
		return "", fmt.Errorf("destination file name %q is not allowed", filepath.Base(dest))
	}
	return dest, nil
}

// createUnique creates path exclusively (never following or replacing an
// existing file), trying "name (2).ext"… when it is taken.
func createUnique(path string) (*os.File, string, error) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for i := 1; i < 1000; i++ {
		p := path
		if i > 1 {
			p = fmt.Sprintf("%s (%d)%s", stem, i, ext)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("no free file name near %s", path)
}

// OpenRequest is open_in_mail's input.
type OpenRequest struct {
	ID string `json:"id" jsonschema:"message id from search_mail"`
}

// OpenResult reports open_in_mail.
type OpenResult struct {
	MailURL string `json:"mailUrl"`
	Path    string `json:"path,omitempty"`
	Opened  bool   `json:"opened"`
	Notice  string `json:"notice,omitempty"`
}

func (h *handlers) open(ctx context.Context, _ *mcp.CallToolRequest, req OpenRequest) (*mcp.CallToolResult, *OpenResult, error) {
	u, path, err := h.Engine.Locate(ctx, req.ID)
	if err != nil {
		return nil, nil, toolErr(err)
	}
	res := &OpenResult{MailURL: u, Path: path}
	if h.Opener == nil {
		res.Notice = "no mail client to open on this system; the message file is at path"
		return nil, res, nil
	}
	if err := h.Opener.Open(ctx, u, path); err != nil {
		res.Notice = "could not open the message: " + err.Error()
		return nil, res, nil
	}
	res.Opened = true
	return nil, res, nil
}

// macOpener opens message:// links with macOS's `open`, which hands them to Mail.
type macOpener struct{}

func (macOpener) Open(ctx context.Context, mailURL, path string) error {
	if !strings.HasPrefix(mailURL, "message://") {
		return errors.New("the message has no Message-ID for Mail to find")
	}
	return exec.CommandContext(ctx, "/usr/bin/open", mailURL).Run()
}

// PrepareParams is steward/prepareSearch's (empty) input.
type PrepareParams struct {
	mcp.ParamsBase
}

// PrepareResult reports steward/prepareSearch.
type PrepareResult struct {
	mcp.ResultBase
	// Skipped is set, with the reason, when there is nothing to prepare
	// (mail is not configured, or the mirror does not exist yet), as in
	// mcptool.PrepareResult.
	Skipped string `json:"skipped,omitempty"`
	search.PrepareStats
}

func (h *handlers) prepare(ctx context.Context, _ *mcp.ServerSession, _ *PrepareParams) (*PrepareResult, error) {
	st, err := h.Engine.Prepare(ctx)
	if err != nil {
		return nil, err
	}
	h.Log.Info("mail search prepared", "vectors", st.Vectors, "duration", st.Duration)
	return &PrepareResult{PrepareStats: st}, nil
}
