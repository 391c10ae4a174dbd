package osascript_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/osascript"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, `"plain"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"two\nlines\r\n\ttab", `"two\nlines\r\n\ttab"`},
		{"bell\x07 and del\x7f", `"bell and del"`},
		{`" & (do shell script "rm -rf ~") & "`, `"\" & (do shell script \"rm -rf ~\") & \""`},
		{"àèì ✓", `"àèì ✓"`},
	} {
		if got := osascript.Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSetDate(t *testing.T) {
	rome, _ := time.LoadLocation("Europe/Rome")
	got := osascript.SetDate("sd", time.Date(2026, 1, 31, 7, 30, 5, 0, time.UTC), rome)
	want := "set sd to current date\nset day of sd to 1\nset year of sd to 2026\nset month of sd to 1\nset day of sd to 31\nset time of sd to 30605\n"
	if got != want {
		t.Errorf("SetDate = %q, want %q", got, want)
	}
}

func TestParseError(t *testing.T) {
	e := osascript.ParseError("0:120: execution error: Calendar got an error: Can’t get calendar \"X\". (-1728)\n")
	if e.Number != -1728 || e.Message != "Calendar got an error: Can’t get calendar \"X\"." {
		t.Errorf("ParseError = %+v", e)
	}
}

// Exec hands the script to the program on standard input and reports a
// failing script with its message and number (a stand-in osascript here).
func TestExec(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "osascript")
	script := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *fail*) echo '0:4: execution error: boom (-2700)' >&2; exit 1;; esac\nprintf 'got: %s\\n' \"$in\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	x := osascript.Exec{Path: fake}
	out, err := x.Run(context.Background(), `return "x"`)
	if err != nil || out != `got: return "x"` {
		t.Errorf("Run = %q, %v", out, err)
	}
	_, err = x.Run(context.Background(), "fail")
	if e, ok := err.(*osascript.Error); !ok || e.Number != -2700 || e.Message != "boom" {
		t.Errorf("failing script: %v", err)
	}
	if _, err := (osascript.Exec{Path: filepath.Join(dir, "missing")}).Run(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "run osascript") {
		t.Errorf("missing program: %v", err)
	}
}
