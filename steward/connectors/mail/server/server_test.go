package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/search"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

type recordingOpener struct{ urls []string }

func (r *recordingOpener) Open(ctx context.Context, u, path string) error {
	r.urls = append(r.urls, u)
	return nil
}

type env struct {
	session     *mcp.ClientSession
	saveDir     string
	stewardHome string
	opener      *recordingOpener
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	acct := mail.Account{Name: "work", Kind: mail.KindMaildir, Root: filepath.Join(dir, "Maildir"), Layout: mail.LayoutAuto}
	md := &archive.Maildir{Root: acct.Root}
	day := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	md.Add("INBOX", archive.Message{ID: "c1@x", From: "Marco <marco@solar.it>", To: []string{"me@example.com"}, Subject: "Solar certification",
		Body: "The certification is attached.", Date: day, Attach: []archive.Attachment{{Name: "../../cert.pdf", ContentType: "application/pdf", Data: []byte("%PDF cert")}}}, "")
	md.Add("INBOX", archive.Message{ID: "c2@x", From: "me@example.com", To: []string{"marco@solar.it"}, Subject: "Re: Solar certification",
		Body: "Thanks!", Date: day.Add(time.Hour), InReplyTo: "c1@x"}, "S")
	for i := 0; i < 15; i++ {
		md.Add("Newsletters", archive.Message{ID: "n" + string(rune('a'+i)) + "@x", From: "news@x.example", Subject: "Digest " + string(rune('A'+i)), Body: strings.Repeat("news ", 100),
			Date: day.Add(-time.Duration(i+1) * 24 * time.Hour)}, "S")
	}
	dbPath, blobDir := filepath.Join(dir, "mail.db"), filepath.Join(dir, "blobs")
	store, err := mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobDir, Accounts: []mail.Account{acct}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.Sync(ctx, mirror.SyncOptions{Mode: mirror.Backfill}); err != nil {
		t.Fatal(err)
	}
	engine, err := search.Open(ctx, search.Options{DBPath: dbPath, SemanticOff: "MAIL_EMBED_ENDPOINT=off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	home := filepath.Join(dir, "home")
	saveDir := filepath.Join(home, "Downloads")
	os.MkdirAll(saveDir, 0o755)
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	stewardHome := filepath.Join(dir, "steward")
	os.MkdirAll(stewardHome, 0o700)
	opener := &recordingOpener{}
	srv, err := New(Options{Engine: engine, Blobs: store.Blobs(), Guard: NewGuard(home, stewardHome), Opener: opener})
	if err != nil {
		t.Fatal(err)
	}
	return &env{session: connectPreparing(t, srv), saveDir: saveDir, stewardHome: stewardHome, opener: opener}
}

// connectPreparing connects to srv a client that can also send
// steward/prepareSearch.
func connectPreparing(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	if err := mcp.AddSendingCustomMethod[*PrepareParams, *PrepareResult](client, "steward/prepareSearch"); err != nil {
		t.Fatal(err)
	}
	return mcptooltest.ConnectClient(t, srv, client)
}

// call invokes a tool and decodes its structured result into out; it
// returns the error text when the tool reports an error.
func (e *env) call(t *testing.T, name string, args any, out any) string {
	t.Helper()
	return mcptooltest.CallStructured(t, e.session, name, args, out)
}

func TestToolsList(t *testing.T) {
	e := setup(t)
	res, err := e.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	props, _ := mcptooltest.InputSchema(t, e.session, "search_mail")["properties"].(map[string]any)
	if strings.Join(names, ",") != "list_mailboxes,open_in_mail,read_message,read_thread,save_attachment,search_mail" {
		t.Errorf("tools %v", names)
	}
	for _, p := range []string{"query", "sender", "recipient", "cc", "subjectContains", "bodyContains", "after", "before", "account", "mailbox",
		"role", "unread", "flagged", "hasAttachments", "sortBy", "perMessage", "offset", "limit"} {
		if _, ok := props[p]; !ok {
			t.Errorf("search_mail lacks argument %q", p)
		}
	}
}

func TestSearchReadSaveOverMCP(t *testing.T) {
	e := setup(t)
	var r search.Result
	if msg := e.call(t, "search_mail", map[string]any{"query": "solar certification"}, &r); msg != "" {
		t.Fatal(msg)
	}
	if len(r.Messages) != 1 || r.Page.Mode != "lexical" || r.Page.Semantic != "off" || !strings.Contains(r.Page.Notice, "MAIL_EMBED_ENDPOINT=off") {
		t.Fatalf("search %+v", r)
	}
	hit := r.Messages[0]
	if r.Kind != "search_results" || hit.Kind != "email" {
		t.Errorf("card kinds %q / %q, want search_results / email", r.Kind, hit.Kind)
	}
	if hit.ThreadID == "" || !strings.HasPrefix(hit.MailURL, "message://%3Cc") || hit.Account != "work" || hit.Mailbox != "INBOX" {
		t.Errorf("summary %+v", hit)
	}
	// Page size: default 8, at most 12.
	var all search.Result
	e.call(t, "search_mail", map[string]any{"mailbox": "Newsletters", "limit": 50}, &all)
	if len(all.Messages) != 12 || all.Page.NextOffset == nil || *all.Page.NextOffset != 12 {
		t.Errorf("page of %d, %+v", len(all.Messages), all.Page)
	}

	var v search.MessageView
	var first search.Summary
	var both search.Result
	e.call(t, "search_mail", map[string]any{"subjectContains": "certification", "perMessage": true}, &both)
	for _, m := range both.Messages {
		if m.Subject == "Solar certification" {
			first = m
		}
	}
	if msg := e.call(t, "read_message", map[string]any{"id": first.ID}, &v); msg != "" {
		t.Fatal(msg)
	}
	if v.Kind != "email" || v.Body != "The certification is attached." || v.BodyState != "full" || len(v.Attachments) != 1 || v.Attachments[0].Filename != "cert.pdf" {
		t.Fatalf("read %+v", v)
	}
	var th search.ThreadView
	e.call(t, "read_thread", map[string]any{"threadId": first.ThreadID}, &th)
	if th.MessageCount != 2 || len(th.Messages) != 2 || th.Messages[0].Subject != "Re: Solar certification" {
		t.Errorf("thread %+v", th)
	}
	var boxes MailboxList
	e.call(t, "list_mailboxes", map[string]any{}, &boxes)
	if len(boxes.Accounts) != 1 || len(boxes.Accounts[0].Mailboxes) != 2 || boxes.Accounts[0].Mailboxes[0].Unread != 1 {
		t.Errorf("mailboxes %+v", boxes)
	}

	// save_attachment: into a folder, twice (no overwrite), then refused places.
	attID := v.Attachments[0].ID
	var saved, again SaveResult
	if msg := e.call(t, "save_attachment", map[string]any{"attachmentId": attID, "destination": e.saveDir}, &saved); msg != "" {
		t.Fatal(msg)
	}
	data, _ := os.ReadFile(saved.Path)
	saveDir, _ := filepath.EvalSymlinks(e.saveDir) // the guard answers with canonical paths
	if saved.Path != filepath.Join(saveDir, "cert.pdf") || string(data) != "%PDF cert" {
		t.Errorf("saved %+v %q", saved, data)
	}
	e.call(t, "save_attachment", map[string]any{"attachmentId": attID, "destination": e.saveDir}, &again)
	if again.Path != filepath.Join(saveDir, "cert (2).pdf") {
		t.Errorf("second save %q", again.Path)
	}
	home := filepath.Dir(e.saveDir)
	for _, dest := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh", "authorized_keys"), "/etc", "relative/dir", filepath.Join(home, "missing", "x.pdf")} {
		var out SaveResult
		msg := e.call(t, "save_attachment", map[string]any{"attachmentId": attID, "destination": dest}, &out)
		if msg == "" {
			t.Errorf("save to %s was allowed", dest)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".ssh", "cert.pdf")); err == nil {
		t.Error("attachment written into ~/.ssh")
	}
	// Steward's own data directory (STEWARD_HOME) is refused as a folder and as a file path.
	for _, dest := range []string{e.stewardHome, filepath.Join(e.stewardHome, "notes.pdf")} {
		if msg := e.call(t, "save_attachment", map[string]any{"attachmentId": attID, "destination": dest}, &SaveResult{}); !strings.Contains(msg, "protected") || !strings.Contains(msg, "data directory") {
			t.Errorf("save into STEWARD_HOME (%s): %q", dest, msg)
		}
	}
	if entries, _ := os.ReadDir(e.stewardHome); len(entries) != 0 {
		t.Errorf("attachment written into STEWARD_HOME: %v", entries)
	}
	// A symbolic link cannot smuggle a write into a protected folder.
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(e.saveDir, "innocent"))
	if msg := e.call(t, "save_attachment", map[string]any{"attachmentId": attID, "destination": filepath.Join(e.saveDir, "innocent")}, &SaveResult{}); !strings.Contains(msg, "protected") {
		t.Errorf("symlinked destination: %q", msg)
	}

	var opened OpenResult
	e.call(t, "open_in_mail", map[string]any{"id": first.ID}, &opened)
	if !opened.Opened || len(e.opener.urls) != 1 || e.opener.urls[0] != "message://%3Cc1@x%3E" || !strings.HasSuffix(opened.Path, ":2,") && !strings.Contains(opened.Path, "/new/") {
		t.Errorf("open %+v %v", opened, e.opener.urls)
	}
}

func TestToolErrorsAreReadable(t *testing.T) {
	e := setup(t)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search_mail", map[string]any{"account": "nope"}, `unknown account "nope"; known accounts: work`},
		{"search_mail", map[string]any{"after": "yesterday"}, "not a date"},
		{"read_message", map[string]any{"id": "12"}, "not found"},
		{"read_message", map[string]any{"id": "x; DROP TABLE"}, "not a number"},
		{"read_thread", map[string]any{"threadId": "999999"}, "not found"},
		{"save_attachment", map[string]any{"attachmentId": "999", "destination": "/tmp"}, "not found"},
	}
	for _, c := range cases {
		var out any
		if msg := e.call(t, c.tool, c.args, &out); !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: error %q, want %q", c.tool, c.args, msg, c.want)
		}
	}
}

func TestPrepareSearchMethod(t *testing.T) {
	e := setup(t)
	res, err := mcp.CallCustomMethod[*PrepareParams, *PrepareResult](context.Background(), e.session, "steward/prepareSearch", &PrepareParams{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 17 || res.Vectors != 0 {
		t.Errorf("prepare %+v", res)
	}
}

func TestUnavailableServerExplains(t *testing.T) {
	srv, err := NewDeferred(func(context.Context) (Options, error) {
		return Options{}, errors.New("no mail accounts configured: create /home/me/.local/share/steward/mail.yaml")
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptooltest.Connect(t, srv)
	res, text := mcptooltest.CallText(t, cs, "search_mail", map[string]any{"query": "x"})
	if !res.IsError || !strings.Contains(text, "mail.yaml") {
		t.Errorf("result %+v", res)
	}

	// It lists the configured server's tools with the same annotations
	// (the host's policy allows the reads by their readOnlyHint).
	got, want := mcptooltest.Annotations(t, cs), mcptooltest.Annotations(t, setup(t).session)
	if fmt.Sprint(got) != fmt.Sprint(want) || !strings.Contains(got["search_mail"], `"readOnlyHint":true`) {
		t.Errorf("unavailable server's tools %v, want %v", got, want)
	}
}

// TestDeferredPrepareSearch: before mail is configured (or its mirror
// built) steward/prepareSearch answers skipped with a one-line reason, so
// the host records the task as skipped rather than failed; any other
// error still fails it.
func TestDeferredPrepareSearch(t *testing.T) {
	noConfig := fmt.Errorf("%w: create /home/me/steward/mail.yaml, for example:\n\naccounts:\n  - name: personal\n    kind: maildir\n", mail.ErrNoConfig)
	tests := []struct {
		name        string
		openErr     error
		wantSkipped string
		wantErr     string
	}{
		{"no mail.yaml", noConfig, "not configured: no mail accounts configured: create /home/me/steward/mail.yaml", ""},
		{"empty accounts", fmt.Errorf("mail config /home/me/mail.yaml: %w: add at least one entry under accounts", mail.ErrNoConfig),
			"not configured: mail config /home/me/mail.yaml: no mail accounts configured: add at least one entry under accounts", ""},
		{"no mirror", fmt.Errorf("%w (/home/me/mail.db)", search.ErrNoMirror), search.ErrNoMirror.Error() + " (/home/me/mail.db)", ""},
		{"broken mirror", errors.New("open mail mirror: file is not a database"), "", "file is not a database"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := NewDeferred(func(context.Context) (Options, error) { return Options{}, tc.openErr }, "test")
			if err != nil {
				t.Fatal(err)
			}
			cs := connectPreparing(t, srv)
			res, err := mcp.CallCustomMethod[*PrepareParams, *PrepareResult](context.Background(), cs, "steward/prepareSearch", &PrepareParams{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("result %+v, error %v; want an error with %q", res, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped != tc.wantSkipped {
				t.Errorf("skipped %q, want %q", res.Skipped, tc.wantSkipped)
			}
		})
	}
}
