package mirror

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// classifySettings loads the mail settings from an environment, as the
// connector does, so MAIL_CLASSIFY_ENDPOINT is read the real way.
func classifySettings(t *testing.T, env map[string]string) *mail.Settings {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "mail.yaml"), []byte("accounts:\n  - name: posta\n    kind: maildir\n    root: /unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["STEWARD_HOME"] = home
	cfg, err := config.Load(config.LoadOptions{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mail.LoadSettings(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mailboxRoles(t *testing.T, s *Store) map[string]string {
	t.Helper()
	rows, err := s.DB().Query("SELECT name, role FROM mailboxes")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, r string
		rows.Scan(&n, &r)
		out[n] = r
	}
	return out
}

func TestMailboxRolesThroughTheGateway(t *testing.T) {
	provider := llmtest.NewServer(t)
	answers := map[string]string{"Cose spedite": "sent", "Progetti": "other", "Ablage": "Archive."}
	provider.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs := r.Body["messages"].([]any)
		user := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		for name, a := range answers {
			if strings.Contains(user, "Folder: \""+name+"\"") {
				return llmtest.Reply{Content: a}
			}
		}
		return llmtest.Reply{Content: "I am not sure, maybe sent"}
	})
	settings := classifySettings(t, map[string]string{"MAIL_CLASSIFY_ENDPOINT": provider.URL, "MAIL_CLASSIFY_MODEL": "tier-1"})
	if settings.ClassifyOff != "" || settings.ClassifyEndpoint != provider.URL {
		t.Fatalf("settings %+v", settings)
	}

	acct, md := maildirAccount(t, "posta", true)
	acct.Roles = map[string]string{"vecchia roba": "trash"} // mail.yaml override
	for _, box := range []string{"INBOX", "Posta inviata", "Cose spedite", "Progetti", "Ablage", "Vecchia roba", "Boh"} {
		mustAdd(t, md, box, testMessage(box), "S")
	}
	dir := t.TempDir()
	opts := Options{DBPath: filepath.Join(dir, "mail.db"), BlobDir: filepath.Join(dir, "blobs"), Accounts: []mail.Account{acct},
		Classifier: settings.Classifier(), ClassifyModel: settings.ClassifyModel}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(context.Background(), SyncOptions{Mode: Backfill}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"INBOX": "inbox", "Posta inviata": "sent", "Cose spedite": "sent", "Progetti": "", "Ablage": "archive", "Vecchia roba": "trash", "Boh": ""}
	if got := mailboxRoles(t, s); !mapsEqual(got, want) {
		t.Errorf("roles after the first sync %v, want %v", got, want)
	}
	// Only the mailboxes neither mail.yaml nor the table tells were asked
	// about, each once, attributed mail-mirror / classify, on the set model.
	reqs := provider.Requests()
	var asked []string
	for _, r := range reqs {
		if r.Header.Get("X-Usage-Service") != "mail-mirror" || r.Header.Get("X-Usage-Action") != "classify" || r.Model != "tier-1" {
			t.Errorf("request attributed %q / %q, model %q", r.Header.Get("X-Usage-Service"), r.Header.Get("X-Usage-Action"), r.Model)
		}
		user := string(r.Raw)
		for _, n := range []string{"Cose spedite", "Progetti", "Ablage", "Boh", "INBOX", "Posta inviata", "Vecchia roba"} {
			if strings.Contains(user, `Folder: \"`+n+`\"`) {
				asked = append(asked, n)
			}
		}
	}
	slices.Sort(asked)
	if strings.Join(asked, ",") != "Ablage,Boh,Cose spedite,Progetti" {
		t.Errorf("classified %v", asked)
	}

	// The answers are cached: a reconcile, and a reopened mirror, ask only
	// about the mailbox whose answer could not be read ("Boh"), each time
	// they read it. A reconcile reads only changed folders (an unchanged one
	// is skipped, or listed anyway when its change fell in the recorded
	// timestamp tick), so Boh gets new mail before each reconcile.
	mustAdd(t, md, "Boh", testMessage("more"), "S")
	if _, err := s.Sync(context.Background(), SyncOptions{Mode: Reconcile}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAdd(t, md, "Cose spedite", testMessage("another"), "S")
	mustAdd(t, md, "Boh", testMessage("again"), "S")
	if _, err := s.Sync(context.Background(), SyncOptions{Mode: Reconcile}); err != nil {
		t.Fatal(err)
	}
	if n := len(provider.Requests()) - len(reqs); n != 2 {
		for _, r := range provider.Requests()[len(reqs):] {
			t.Logf("%s", r.Raw)
		}
		t.Errorf("%d classification requests after the first sync, want 2 (Boh, twice)", n)
	}
	if got := mailboxRoles(t, s); !mapsEqual(got, want) {
		t.Errorf("roles after reopening %v, want %v", got, want)
	}
	// Boh is neither classified nor configured, so the note would list only it.
	names, err := UnclassifiedMailboxes(context.Background(), s.DB())
	if err != nil || strings.Join(names, ",") != "posta/Boh" {
		t.Errorf("unclassified %v %v", names, err)
	}
}

func TestMailboxRolesWithClassificationOff(t *testing.T) {
	settings := classifySettings(t, map[string]string{"MAIL_CLASSIFY_ENDPOINT": "off"})
	if settings.Classifier() != nil || settings.ClassifyOff != "MAIL_CLASSIFY_ENDPOINT=off" {
		t.Fatalf("off settings %+v", settings)
	}
	acct, md := maildirAccount(t, "posta", true)
	acct.Roles = map[string]string{"varie": ""}
	for _, box := range []string{"INBOX", "Gesendet", "Cose spedite", "Varie"} {
		mustAdd(t, md, box, testMessage(box), "S")
	}
	s := openStore(t, acct)
	if _, err := s.Sync(context.Background(), SyncOptions{Mode: Backfill}); err != nil {
		t.Fatal(err)
	}
	if got := mailboxRoles(t, s); got["Gesendet"] != "sent" || got["Cose spedite"] != "" {
		t.Errorf("roles %v", got)
	}
	names, err := UnclassifiedMailboxes(context.Background(), s.DB())
	if err != nil || strings.Join(names, ",") != "posta/Cose spedite" {
		t.Fatalf("unclassified %v %v (a mailbox mail.yaml calls other is not listed)", names, err)
	}
	note := mail.RoleNote(settings.ClassifyOff, names)
	if !strings.Contains(note, "posta/Cose spedite") || !strings.Contains(note, "MAIL_CLASSIFY_ENDPOINT=off") || !strings.Contains(note, "mail.yaml") {
		t.Errorf("note %q", note)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testMessage is a message whose Message-ID derives from its subject, unique within a test.
func testMessage(subject string) archive.Message {
	return archive.Message{ID: "classify-" + strings.ReplaceAll(subject, " ", "-") + "@x", From: "a@example.com", To: []string{"me@example.com"},
		Subject: subject, Body: "Body of " + subject, Date: day0.Add(time.Duration(len(subject)) * time.Minute)}
}
