package mail

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
)

func TestParseConfig(t *testing.T) {
	good := `accounts:
  - name: work
    kind: Maildir
    root: /home/me/Mail/work
    addresses: [Me@Example.com]
    roles: {"Archivio 2024": archive}
  - name: mac
    kind: applemail
    root: /Users/me/Library/Mail/V10
`
	cfg, err := ParseConfig([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Accounts[0]
	if a.Kind != KindMaildir || a.Layout != LayoutAuto || a.Addresses[0] != "me@example.com" || a.Roles["archivio 2024"] != "archive" {
		t.Errorf("account %+v", a)
	}
	if !a.Owns("ME@example.com") || a.Owns("other@example.com") {
		t.Error("Owns")
	}
	if r := a.ClassifyMailbox("Archivio 2024"); r != RoleArchive {
		t.Errorf("configured role %q", r)
	}
	bad := []struct{ yaml, want string }{
		{"accounts:\n  - name: a\n    kind: maildir\n    root: /x\n    rooot: /y\n", "rooot"},
		{"accounts:\n  - name: a\n    kind: imap\n    root: /x\n", "not maildir or applemail"},
		{"accounts:\n  - name: a\n    kind: maildir\n    root: rel/path\n", "absolute"},
		{"accounts:\n  - name: a\n    kind: maildir\n    root: /x\n  - name: A\n    kind: maildir\n    root: /y\n", "duplicate"},
		{"accounts:\n  - name: a\n    kind: maildir\n    root: /x\n    roles: {Foo: bogus}\n", "bogus"},
		{"accounts:\n  - name: a\n    kind: maildir\n    root: /x\n    addresses: [nobody]\n", "not an email"},
		{"", "no mail accounts"},
	}
	for _, b := range bad {
		if _, err := ParseConfig([]byte(b.yaml)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("config %q: error %v, want %q", b.yaml, err, b.want)
		}
	}
}

func TestDiscoverAppleMail(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"V9/OLD", "V10/ACC-1/INBOX.mbox", "V10/ACC-2", "V10/MailData"} {
		os.MkdirAll(filepath.Join(dir, p), 0o755)
	}
	cfg, err := DiscoverAppleMail(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range cfg.Accounts {
		names = append(names, a.Name)
		if a.Kind != KindAppleMail || !strings.Contains(a.Root, "V10") {
			t.Errorf("account %+v", a)
		}
	}
	if strings.Join(names, ",") != "ACC-1,ACC-2" {
		t.Errorf("accounts %v", names)
	}
	if _, err := DiscoverAppleMail(filepath.Join(dir, "absent")); !errors.Is(err, ErrNoConfig) {
		t.Errorf("absent folder: %v", err)
	}
}

func TestClassifyName(t *testing.T) {
	tests := map[string]Role{"INBOX": RoleInbox, "[Gmail]/Sent Mail": RoleSent, "INBOX.Drafts": RoleDrafts, "Posta indesiderata": RoleJunk,
		"Deleted Messages": RoleTrash, "[Gmail]/All Mail": RoleAll, "Archive": RoleArchive, "Projects/Solar": RoleNone, `\Sent`: RoleSent,
		"ELEMENTS ENVOYES": RoleSent, "Gelöschte  Elemente": RoleTrash, "INBOX/Éléments supprimés": RoleTrash}
	for name, want := range tests {
		if got := ClassifyName(name); got != want {
			t.Errorf("ClassifyName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestLocalisedSpecialFolders checks that every special folder has its
// common names in each supported language, as Gmail, Outlook and Apple Mail
// write them.
func TestLocalisedSpecialFolders(t *testing.T) {
	names := map[string]map[Role][]string{
		"en": {RoleSent: {"Sent", "Sent Items", "Sent Messages", "[Gmail]/Sent Mail"}, RoleDrafts: {"Drafts"}, RoleTrash: {"Trash", "Deleted Items", "Deleted Messages", "Bin"},
			RoleJunk: {"Junk", "Spam", "Junk E-mail"}, RoleArchive: {"Archive"}, RoleAll: {"[Gmail]/All Mail"}},
		"it": {RoleSent: {"Posta inviata", "Inviati", "Elementi inviati"}, RoleDrafts: {"Bozze"}, RoleTrash: {"Cestino", "Posta eliminata", "Elementi eliminati"},
			RoleJunk: {"Posta indesiderata", "Indesiderata"}, RoleArchive: {"Archivio"}, RoleAll: {"[Gmail]/Tutti i messaggi"}},
		"de": {RoleSent: {"Gesendet", "Gesendete Elemente", "Gesendete Objekte"}, RoleDrafts: {"Entwürfe"}, RoleTrash: {"Papierkorb", "Gelöschte Elemente", "Gelöschte Objekte"},
			RoleJunk: {"Junk-E-Mail", "Spamverdacht"}, RoleArchive: {"Archiv"}, RoleAll: {"[Gmail]/Alle Nachrichten"}},
		"fr": {RoleSent: {"Éléments envoyés", "Messages envoyés", "Envoyés"}, RoleDrafts: {"Brouillons"}, RoleTrash: {"Corbeille", "Éléments supprimés"},
			RoleJunk: {"Courrier indésirable", "Indésirables"}, RoleArchive: {"Archives"}, RoleAll: {"[Gmail]/Tous les messages"}},
		"es": {RoleSent: {"Enviados", "Elementos enviados"}, RoleDrafts: {"Borradores"}, RoleTrash: {"Papelera", "Elementos eliminados"},
			RoleJunk: {"Correo no deseado"}, RoleArchive: {"Archivo"}, RoleAll: {"[Gmail]/Todos"}},
	}
	for lang, roles := range names {
		for _, role := range []Role{RoleSent, RoleDrafts, RoleTrash, RoleJunk, RoleArchive, RoleAll} {
			if len(roles[role]) == 0 {
				t.Errorf("%s: no name for %s", lang, role)
			}
			for _, n := range roles[role] {
				if got := ClassifyName(n); got != role {
					t.Errorf("%s: ClassifyName(%q) = %q, want %q", lang, n, got, role)
				}
			}
		}
	}
}

func TestGatewayEmbedder(t *testing.T) {
	var got struct {
		auth, service, action, path string
		body                        llm.EmbeddingsRequest
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.auth, got.service, got.action, got.path = r.Header.Get("Authorization"), r.Header.Get("x-usage-service"), r.Header.Get("x-usage-action"), r.URL.Path
		json.NewDecoder(r.Body).Decode(&got.body)
		if got.body.Input[0] == "fail" {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(`{"error":{"message":"model not loaded"}}`))
			return
		}
		// Answer out of order and leave out index 1: a partial failure.
		w.Write([]byte(`{"data":[{"index":2,"embedding":[0,1]},{"index":0,"embedding":[1,0]}]}`))
	}))
	defer srv.Close()
	e := (&Settings{EmbedEndpoint: embedBaseURL(srv.URL + "/v1/embeddings/"), APIKey: "sk-secret"}).Embedder("mail-mirror", "embed")
	vecs, err := e.Embed(context.Background(), []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || vecs[0][0] != 1 || vecs[1] != nil || vecs[2][1] != 1 {
		t.Errorf("vectors %v", vecs)
	}
	if got.auth != "Bearer sk-secret" || got.service != "mail-mirror" || got.action != "embed" || got.body.Model != "local-embed" || got.path != "/v1/embeddings" {
		t.Errorf("request %+v", got)
	}
	_, err = e.Embed(context.Background(), []string{"fail"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 502: model not loaded") || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("error %v", err)
	}
	srv.Close()
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("closed server error %v", err)
	}
}

func TestQuantizeInt8(t *testing.T) {
	v := []float32{3, -4, 0, 0.001}
	scale, q, err := DecodeInt8(QuantizeInt8(v))
	if err != nil {
		t.Fatal(err)
	}
	u := Normalize(v)
	for i := range v {
		if d := math.Abs(float64(scale*float32(q[i]) - u[i])); d > float64(scale) {
			t.Errorf("dim %d: %v vs %v", i, scale*float32(q[i]), u[i])
		}
	}
	if q[1] != -127 {
		t.Errorf("largest magnitude maps to %d", q[1])
	}
	if ValidVector([]float32{0, 0}) || ValidVector([]float32{float32(math.NaN())}) || !ValidVector([]float32{0, 1}) {
		t.Error("ValidVector")
	}
}
