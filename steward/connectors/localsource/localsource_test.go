package localsource_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
	"github.com/agentstack/agentstack/yamlstrict"
)

// source and config are a connector's configuration in miniature.
type source struct {
	Name  string `yaml:"name"`
	Kind  string `yaml:"kind"`
	Path  string `yaml:"path"`
	Label string `yaml:"label"`
}

func (s *source) fields() localsource.Fields {
	return localsource.Fields{Name: &s.Name, Kind: &s.Kind, Path: &s.Path}
}

type config struct {
	Embed   string   `yaml:"embed"`
	Sources []source `yaml:"sources"`
}

func parse(home string) func([]byte) (*config, error) {
	return func(data []byte) (*config, error) {
		var c config
		if err := yamlstrict.Decode(data, &c); err != nil {
			return nil, err
		}
		if err := localsource.CheckEmbed(c.Embed); err != nil {
			return nil, err
		}
		if err := localsource.CheckSources(c.Sources, home, (*source).fields, "file", "folder"); err != nil {
			return nil, err
		}
		return &c, nil
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string // "" for success
		want    []source
	}{
		{name: "normalised", yaml: "embed: off\nsources:\n  - {name: ' a ', kind: file, path: ~/notes/../n.txt, label: x}\n  - {name: b, kind: folder, path: /srv//n}\n",
			want: []source{{Name: "a", Kind: "file", Path: "/home/me/n.txt", Label: "x"}, {Name: "b", Kind: "folder", Path: "/srv/n"}}},
		{name: "embed URL", yaml: "embed: http://127.0.0.1:8080/v1\nsources: [{name: a, kind: file, path: /n}]\n",
			want: []source{{Name: "a", Kind: "file", Path: "/n"}}},
		{name: "empty file", yaml: "", wantErr: "at least one source"},
		{name: "unknown key", yaml: "sources: []\nembedd: off\n", wantErr: "line 2: embedd: unknown field (allowed: embed, sources)"},
		{name: "not YAML", yaml: "sources: [\n", wantErr: "line 1: invalid YAML"},
		{name: "bad embed", yaml: "embed: ftp://x\nsources: [{name: a, kind: file, path: /n}]\n", wantErr: `embed: "ftp://x" must be gateway, off or an http(s) URL`},
		{name: "no name", yaml: "sources: [{kind: file, path: /n}]\n", wantErr: "sources[0]: name is required"},
		{name: "duplicate", yaml: "sources: [{name: a, kind: file, path: /n}, {name: a, kind: file, path: /m}]\n", wantErr: `sources[1]: duplicate name "a"`},
		{name: "bad kind", yaml: "sources: [{name: a, kind: web, path: /n}]\n", wantErr: `sources[0] (a): kind must be file or folder, not "web"`},
		{name: "relative path", yaml: "sources: [{name: a, kind: file, path: notes}]\n", wantErr: `sources[0] (a): path "notes" must be absolute`},
		{name: "no path", yaml: "sources: [{name: a, kind: file}]\n", wantErr: "sources[0] (a): path is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse("/home/me")([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(c.Sources) != fmt.Sprint(tc.want) {
				t.Errorf("sources %+v, want %+v", c.Sources, tc.want)
			}
		})
	}
}

func TestExpandHome(t *testing.T) {
	for _, tc := range []struct {
		path, home, want, wantErr string
	}{
		{path: "~", home: "/home/me", want: "/home/me"},
		{path: "~/a/b/", home: "/home/me", want: "/home/me/a/b"},
		{path: "  /a/./b ", want: "/a/b"},
		{path: "~/a", wantErr: "home directory is unknown"},
		{path: "~other/a", home: "/home/me", wantErr: "must be absolute"},
		{path: "", wantErr: "path is required"},
	} {
		got, err := localsource.ExpandHome(tc.path, tc.home)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ExpandHome(%q, %q) = %q, %v; want %q, %q", tc.path, tc.home, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	found := filepath.Join(dir, "Library", "Notes", "notes.db")
	localsourcetest.WriteFile(t, found, "x")
	for _, tc := range []struct {
		name     string
		content  *string // nil: no file
		discover bool
		want     string // the first source's path, or the error's text
	}{
		{name: "file", content: ptr("sources: [{name: a, kind: file, path: /n}]\n"), want: "/n"},
		{name: "missing, discovered", discover: true, want: found},
		{name: "missing, nothing discovered", want: "not configured: no notes sources: " + filepath.Join(dir, "notes.yaml") + " does not exist; create it with, for example:\nsources: []"},
		{name: "invalid names the file", content: ptr("sources: []\n"), want: filepath.Join(dir, "notes.yaml") + ": sources: at least one source is needed"},
		{name: "too large", content: ptr(strings.Repeat("#", localsource.MaxConfigBytes+1)), want: "read notes config: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "notes.yaml")
			os.Remove(path)
			if tc.content != nil {
				localsourcetest.WriteFile(t, path, *tc.content)
			}
			o := localsource.LoadOptions[config]{What: "notes", Example: "sources: []", Parse: parse(dir)}
			if tc.discover {
				o.Discover = func() *config {
					p := localsource.Discover(dir, "darwin", "Library/Other/none.db", "Library/Notes/notes.db")
					return &config{Sources: []source{{Name: "found", Kind: "file", Path: p}}}
				}
			}
			c, err := localsource.Load(path, o)
			if notConfigured := errors.Is(err, localsource.ErrNotConfigured); notConfigured != (tc.name == "missing, nothing discovered") {
				t.Errorf("errors.Is(%v, ErrNotConfigured) = %v", err, notConfigured)
			}
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = c.Sources[0].Path
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestDiscover(t *testing.T) {
	home := t.TempDir()
	localsourcetest.WriteFile(t, filepath.Join(home, "Library", "B", "store"), "x")
	for _, tc := range []struct {
		goos, home string
		want       string
	}{
		{"darwin", home, filepath.Join(home, "Library", "B", "store")},
		{"linux", home, ""},
		{"darwin", "", ""},
		{"darwin", t.TempDir(), ""},
	} {
		if got := localsource.Discover(tc.home, tc.goos, "Library/A/store", "Library/B/store"); got != tc.want {
			t.Errorf("Discover(%q, %q) = %q, want %q", tc.home, tc.goos, got, tc.want)
		}
	}
}

func TestReadBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	localsourcetest.WriteFile(t, path, "12345")
	for _, tc := range []struct {
		path    string
		limit   int64
		want    string
		wantErr error
		wantMsg string
	}{
		{path: path, limit: 5, want: "12345"},
		{path: path, limit: 4, wantMsg: "larger than 4 bytes"},
		{path: path + ".absent", limit: 5, wantErr: fs.ErrNotExist},
	} {
		got, err := localsource.ReadBounded(tc.path, tc.limit)
		switch {
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr), tc.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.wantMsg)):
			t.Errorf("ReadBounded(%d): %v, want %v %q", tc.limit, err, tc.wantErr, tc.wantMsg)
		case tc.wantErr == nil && tc.wantMsg == "" && (err != nil || string(got) != tc.want):
			t.Errorf("ReadBounded(%d) = %q, %v", tc.limit, got, err)
		}
	}
}

func TestAccessError(t *testing.T) {
	a := localsource.Access{Items: "notes", App: "the Notes app"}
	for _, tc := range []struct {
		cause error
		want  error
		msg   string
	}{
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, localsource.ErrPermission, "no notes were read"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EPERM}, localsource.ErrPermission, "Full Disk Access"},
		{errors.New("sqlite: authorization denied"), localsource.ErrPermission, "Full Disk Access"},
		{errors.New("SQLITE_AUTH (23)"), localsource.ErrPermission, "Full Disk Access"},
		{fmt.Errorf("stat: %w", fs.ErrNotExist), localsource.ErrMissing, "check the path"},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), localsource.ErrLocked, "the Notes app may be writing); try again"},
		{errors.New("file is not a database"), nil, "read notes /x/notes.db: file is not a database"},
	} {
		err := a.Error("read notes", "/x/notes.db", tc.cause)
		if tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "read notes /x/notes.db: ") {
			t.Errorf("%v → %v, want %v mentioning %q", tc.cause, err, tc.want, tc.msg)
		}
	}
}

func TestReadAll(t *testing.T) {
	sources := []source{{Name: "a", Kind: "file", Path: "/a"}, {Name: "broken", Kind: "file", Path: "/b"}, {Name: "c", Kind: "folder", Path: "/c"}}
	read := func(ctx context.Context, s source) (string, error) {
		if s.Name == "broken" {
			return "", errors.New("permission denied: grant access")
		}
		return "data of " + s.Path, nil
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	results, failed, err := localsource.ReadAll(context.Background(), log, "notes", "notes", sources, (*source).fields, read)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results["a"] != "data of /a" || results["c"] != "data of /c" {
		t.Errorf("results %v", results)
	}
	if len(failed) != 1 || failed["broken"] != "permission denied: grant access" {
		t.Errorf("failed %v", failed)
	}
	if !strings.Contains(logs.String(), "notes source failed; its indexed notes are kept") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancelling := func(ctx context.Context, s source) (string, error) {
		cancel()
		return "", ctx.Err()
	}
	if _, _, err := localsource.ReadAll(ctx, log, "notes", "notes", sources, (*source).fields, cancelling); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v, want context.Canceled (not a source failure)", err)
	}
}

func TestVdir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cals")
	outside := t.TempDir()
	for _, f := range []string{
		"b.ics", "A.ICS", "notes.txt", ".hidden.ics", // the root is a collection too
		"work/2.ics", "work/1.vcs", "work/displayname",
		"empty/readme.md",
		".git/x.ics",
	} {
		localsourcetest.WriteFile(t, filepath.Join(root, f), "x")
	}
	localsourcetest.WriteFile(t, filepath.Join(outside, "secret.ics"), "x")
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.ics"), filepath.Join(root, "work", "link.ics")); err != nil {
		t.Fatal(err)
	}
	got, err := localsource.Vdir(root, ".ics", ".vcs")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range got {
		var files []string
		for _, p := range f.Files {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		lines = append(lines, f.Name+": "+strings.Join(files, " "))
	}
	want := []string{"cals: A.ICS b.ics", "work: work/1.vcs work/2.ics"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("collections:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if _, err := localsource.Vdir(filepath.Join(root, "absent"), ".ics"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
}

// TestAdviceHead: a "not configured" message shortens to its first
// sentence, without the example's lead-in, for each wording the
// connectors use; a one-line message stays as it is.
func TestAdviceHead(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"not configured: no calendar sources: /h/calendar.yaml does not exist; create it with, for example:\nsources:\n  - x", "not configured: no calendar sources: /h/calendar.yaml does not exist"},
		{"no mail accounts configured: create /h/mail.yaml, for example:\n\naccounts:\n  - name: personal", "no mail accounts configured: create /h/mail.yaml"},
		{"no scheduled backup: STEWARD_BACKUP_DIR is not set", "no scheduled backup: STEWARD_BACKUP_DIR is not set"},
	} {
		if got := localsource.AdviceHead(c.msg); got != c.want {
			t.Errorf("AdviceHead(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}

// TestNotConfiguredLine: the reason line starts with "not configured: "
// once, whether the message had it or not.
func TestNotConfiguredLine(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"not configured: no calendar sources: /h/calendar.yaml does not exist; create it with, for example:\nsources:\n  - x", "not configured: no calendar sources: /h/calendar.yaml does not exist"},
		{"no mail accounts configured: create /h/mail.yaml, for example:\n\naccounts:\n  - name: personal", "not configured: no mail accounts configured: create /h/mail.yaml"},
	} {
		if got := localsource.NotConfiguredLine(c.msg); got != c.want {
			t.Errorf("NotConfiguredLine(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
