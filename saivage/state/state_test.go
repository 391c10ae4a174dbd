package state_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/saivage/state"
)

type fatalRecorder struct{ errs []error }

func (f *fatalRecorder) fatal(err error) { f.errs = append(f.errs, err) }

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

func TestReplace(t *testing.T) {
	dir := t.TempDir()
	p := state.New(state.Options{Fatal: func(err error) { t.Fatalf("unexpected fatal: %v", err) }})
	target := filepath.Join(dir, "doc.json")
	for _, content := range []string{"one", "two"} {
		if err := p.Replace(target, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, target); got != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("leftover files: %v", names)
	}
}

func TestReplaceFaults(t *testing.T) {
	tests := []struct {
		step        state.Step
		wantUnknown bool
		wantContent string
	}{
		{state.StepWrite, false, "old"},
		{state.StepFsync, false, "old"},
		{state.StepClose, false, "old"},
		{state.StepRename, true, "old"},
		{state.StepSyncDir, true, "new"},
	}
	for _, tt := range tests {
		t.Run(string(tt.step), func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "doc.json")
			if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			rec := &fatalRecorder{}
			fired := false
			p := state.New(state.Options{Fatal: rec.fatal, Fault: func(s state.Step, _ string) error {
				if s == tt.step && !fired {
					fired = true
					return syscall.EIO
				}
				return nil
			}})
			err := p.Replace(target, []byte("new"))
			if err == nil || !errors.Is(err, syscall.EIO) {
				t.Fatalf("err = %v", err)
			}
			var unknown *state.OutcomeUnknownError
			if got := errors.As(err, &unknown); got != tt.wantUnknown {
				t.Fatalf("unknown outcome = %v, want %v (%v)", got, tt.wantUnknown, err)
			}
			if tt.wantUnknown != (len(rec.errs) == 1) {
				t.Fatalf("fatal hook calls = %d", len(rec.errs))
			}
			if got := read(t, target); got != tt.wantContent {
				t.Fatalf("content = %q", got)
			}
			// After an unknown outcome nothing else is written or read.
			err = p.Replace(filepath.Join(dir, "other.json"), []byte("x"))
			if tt.wantUnknown {
				if !errors.Is(err, state.ErrStopped) {
					t.Fatalf("write after unknown outcome: %v", err)
				}
				if _, statErr := os.Stat(filepath.Join(dir, "other.json")); !os.IsNotExist(statErr) {
					t.Fatal("a write happened after the unknown outcome")
				}
				if _, err := p.ReadJSONL(target, state.ReadOptions{}); !errors.Is(err, state.ErrStopped) {
					t.Fatalf("read after unknown outcome: %v", err)
				}
			} else if err != nil {
				t.Fatalf("ordinary failure stopped the publisher: %v", err)
			}
		})
	}
}

func TestCreateNewRefusesPresentObjects(t *testing.T) {
	dir := t.TempDir()
	p := state.New(state.Options{})
	fresh := filepath.Join(dir, "1.json")
	if err := p.CreateNew(fresh, []byte("a")); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "2.json")
	if err := os.Symlink(filepath.Join(dir, "missing"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{fresh, dangling} {
		if err := p.CreateNew(target, []byte("b")); !errors.Is(err, state.ErrExists) {
			t.Fatalf("%s: err = %v", target, err)
		}
	}
	if read(t, fresh) != "a" {
		t.Fatal("immutable document changed")
	}
}

func TestPublishHead(t *testing.T) {
	dir := t.TempDir()
	p := state.New(state.Options{})
	if err := p.PublishHead(dir, "head.json", []byte("v1"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "head.prev.json")); !os.IsNotExist(err) {
		t.Fatal("initial publication created prev")
	}
	if err := p.PublishHead(dir, "head.json", []byte("v2"), false); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(dir, "head.json")) != "v2" || read(t, filepath.Join(dir, "head.prev.json")) != "v1" {
		t.Fatal("head/prev not selected")
	}
	if err := p.PublishHead(dir, "head.json", []byte("v3"), false); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(dir, "head.prev.json")) != "v2" {
		t.Fatal("prev not advanced")
	}
	// A non-initial publication without an established head fails at link
	// and never falls back to initial mode.
	empty := t.TempDir()
	if err := p.PublishHead(empty, "head.json", []byte("x"), false); err == nil {
		t.Fatal("link of a missing head succeeded")
	}
	if _, err := os.Stat(filepath.Join(empty, "head.json")); !os.IsNotExist(err) {
		t.Fatal("fell back to initial publication")
	}
}

func env(v int, rows ...string) state.Envelope {
	e := state.Envelope{V: v}
	for _, r := range rows {
		e.Rows = append(e.Rows, json.RawMessage(r))
	}
	return e
}

func TestJSONLAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.jsonl")
	p := state.New(state.Options{})
	if err := p.Append(path, env(2, `{"id":"a"}`), false); !os.IsNotExist(errors.Unwrap(err)) {
		t.Fatalf("append without create on a missing file: %v", err)
	}
	if err := p.Append(path, env(2, `{"id":"a"}`), true); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Stat(path)
	span, err := p.AppendSpan(path, env(2, `{"id":"b"}`, `{"id":"c"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := os.Stat(path); span.Start != first.Size() || span.End != now.Size() {
		t.Fatalf("span %+v, file grew from %d to %d", span, first.Size(), now.Size())
	}
	if err := p.Append(path, state.Envelope{V: 2}, false); err == nil {
		t.Fatal("empty envelope appended")
	}
	res, err := p.ReadJSONL(path, state.ReadOptions{Versions: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Envelopes) != 2 || len(res.Envelopes[1].Rows) != 2 || res.Truncated != 0 {
		t.Fatalf("res = %+v", res)
	}
}

func TestJSONLTails(t *testing.T) {
	valid := `{"v":2,"rows":[{"id":"a"}]}` + "\n"
	tests := []struct {
		name      string
		content   string
		tail      state.TailPolicy
		wantErr   string
		wantAfter string // file content afterwards
		wantEnvs  int
	}{
		{"clean", valid, state.TailTruncate, "", valid, 1},
		{"torn tail truncated", valid + `{"v":2,"ro`, state.TailTruncate, "", valid, 1},
		{"torn tail that parses is still torn", valid + `{"v":2,"rows":[{"id":"b"}]}`, state.TailTruncate, "", valid, 1},
		{"torn tail ignored by observer", valid + `{"v":2`, state.TailIgnore, "", valid + `{"v":2`, 1},
		{"torn tail in immutable stream", valid + `{"v":2`, state.TailFail, "torn tail", valid + `{"v":2`, 0},
		{"torn tail without valid prefix", `{"v":2,"ro`, state.TailTruncate, "no valid prefix", `{"v":2,"ro`, 0},
		{"complete malformed line", valid + "{not json}\n", state.TailTruncate, "line 2: malformed", valid + "{not json}\n", 0},
		{"complete malformed line before torn tail", "garbage\n" + `{"v"`, state.TailTruncate, "line 1: malformed", "garbage\n" + `{"v"`, 0},
		{"unknown version", `{"v":9,"rows":[{}]}` + "\n", state.TailTruncate, "unsupported envelope version", `{"v":9,"rows":[{}]}` + "\n", 0},
		{"unknown field", `{"v":2,"rows":[{}],"x":1}` + "\n", state.TailTruncate, "unknown field", `{"v":2,"rows":[{}],"x":1}` + "\n", 0},
		{"no rows", `{"v":2,"rows":[]}` + "\n", state.TailTruncate, "no rows", `{"v":2,"rows":[]}` + "\n", 0},
		{"empty file", "", state.TailTruncate, "empty stream", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			p := state.New(state.Options{Fatal: func(err error) { t.Fatalf("fatal: %v", err) }})
			res, err := p.ReadJSONL(path, state.ReadOptions{Versions: []int{2}, Tail: tt.tail})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want %q naming the file", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if len(res.Envelopes) != tt.wantEnvs {
				t.Fatalf("envelopes = %d", len(res.Envelopes))
			}
			if got := read(t, path); got != tt.wantAfter {
				t.Fatalf("file after = %q, want %q", got, tt.wantAfter)
			}
		})
	}
}

func TestJSONLValidateHookAndUnknownOutcomes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	valid := `{"v":2,"rows":[{"id":"a"}]}` + "\n"
	if err := os.WriteFile(path, []byte(valid+valid), 0o644); err != nil {
		t.Fatal(err)
	}
	p := state.New(state.Options{})
	seen := map[string]bool{}
	_, err := p.ReadJSONL(path, state.ReadOptions{Validate: func(line int, e state.Envelope) error {
		var row struct{ ID string }
		_ = json.Unmarshal(e.Rows[0], &row)
		if seen[row.ID] {
			return errors.New("duplicate id " + row.ID)
		}
		seen[row.ID] = true
		return nil
	}})
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "duplicate id a") {
		t.Fatalf("err = %v", err)
	}
	for _, step := range []state.Step{state.StepAppendWrite, state.StepAppendFsync, state.StepAppendClose} {
		rec := &fatalRecorder{}
		p := state.New(state.Options{Fatal: rec.fatal, Fault: func(s state.Step, _ string) error {
			if s == step {
				return syscall.ENOSPC
			}
			return nil
		}})
		err := p.Append(path, env(2, `{"id":"z"}`), false)
		var unknown *state.OutcomeUnknownError
		if !errors.As(err, &unknown) || len(rec.errs) != 1 || !p.Stopped() {
			t.Fatalf("%s: err = %v, fatal calls %d", step, err, len(rec.errs))
		}
	}
	// Truncation failures are unknown outcomes too.
	if err := os.WriteFile(path, []byte(valid+"{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &fatalRecorder{}
	p = state.New(state.Options{Fatal: rec.fatal, Fault: func(s state.Step, _ string) error {
		if s == state.StepTruncate {
			return syscall.EIO
		}
		return nil
	}})
	if _, err := p.ReadJSONL(path, state.ReadOptions{Tail: state.TailTruncate}); len(rec.errs) != 1 || err == nil {
		t.Fatalf("truncate fault: err = %v, fatal calls = %d", err, len(rec.errs))
	}
}

// The helper process performs a publication and either kills itself at a
// step (crash test) or hits an injected rename failure with the default
// fatal hook (exit-1 test).
func TestMain(m *testing.M) {
	if mode := os.Getenv("SAIVAGE_STATE_HELPER"); mode != "" {
		helper(mode, os.Getenv("SAIVAGE_STATE_DIR"))
		return
	}
	os.Exit(m.Run())
}

func helper(mode, dir string) {
	target := filepath.Join(dir, "doc.json")
	switch {
	case strings.HasPrefix(mode, "kill:"):
		step := state.Step(strings.TrimPrefix(mode, "kill:"))
		p := state.New(state.Options{AfterStep: func(s state.Step, _ string) {
			if s == step {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}})
		if step == state.StepAppendWrite {
			_ = p.Append(filepath.Join(dir, "s.jsonl"), env(2, `{"id":"new"}`), false)
		} else {
			_ = p.Replace(target, []byte("new"))
		}
	case mode == "unknown":
		p := state.New(state.Options{Fault: func(s state.Step, _ string) error {
			if s == state.StepRename {
				return syscall.EIO
			}
			return nil
		}})
		_ = p.Replace(target, []byte("new"))
		// Never reached: the default hook exits first.
		_ = os.WriteFile(filepath.Join(dir, "after"), nil, 0o644)
	}
	os.Exit(0)
}

func runHelper(t *testing.T, mode, dir string) (*exec.Cmd, string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SAIVAGE_STATE_HELPER="+mode, "SAIVAGE_STATE_DIR="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	return cmd, stderr.String(), err
}

func TestCrashDuringReplace(t *testing.T) {
	tests := []struct {
		step state.Step
		want string
	}{
		{state.StepWrite, "old"},   // killed before rename: old document selected
		{state.StepRename, "new"},  // killed before the directory fsync
		{state.StepSyncDir, "new"}, // killed after the complete publication
	}
	for _, tt := range tests {
		t.Run(string(tt.step), func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "doc.json")
			if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd, _, err := runHelper(t, "kill:"+string(tt.step), dir)
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if err == nil || !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("helper was not killed: %v", err)
			}
			if got := read(t, target); got != tt.want {
				t.Fatalf("after crash at %s: %q, want %q", tt.step, got, tt.want)
			}
			// Any leftover temporary keeps the reserved prefix and is ignored.
			for _, n := range entries(t, dir) {
				if n != "doc.json" && !strings.HasPrefix(n, state.TempPrefix) {
					t.Fatalf("unexpected file %s", n)
				}
			}
		})
	}
}

func TestCrashDuringAppend(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	valid := `{"v":2,"rows":[{"id":"a"}]}` + "\n"
	if err := os.WriteFile(path, []byte(valid), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runHelper(t, "kill:"+string(state.StepAppendWrite), dir); err == nil {
		t.Fatal("helper was not killed")
	}
	res, err := state.New(state.Options{}).ReadJSONL(path, state.ReadOptions{Tail: state.TailTruncate})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Envelopes) != 2 {
		t.Fatalf("envelopes after crash = %d", len(res.Envelopes))
	}
}

func TestUnknownOutcomeExitsOne(t *testing.T) {
	dir := t.TempDir()
	cmd, stderr, err := runHelper(t, "unknown", dir)
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit = %v (%v)", cmd.ProcessState, err)
	}
	if !strings.Contains(stderr, "publication outcome unknown: rename") {
		t.Fatalf("stderr = %q", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); !os.IsNotExist(err) {
		t.Fatal("the process wrote after the unknown outcome")
	}
}

// An observer (TailIgnore) reads a stream a live writer keeps appending to:
// every read succeeds with a prefix at least as long as the one before, a
// line being written counting as a torn tail (it once failed with "file grew
// while reading" whenever an append landed during the read).
func TestJSONLObserverReadsBesideALiveWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.jsonl")
	p := state.New(state.Options{})
	if err := p.Append(path, env(2, `{"id":"first"}`), true); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		line := []byte(`{"v":2,"rows":[{"id":"` + strings.Repeat("x", 1000) + `"}]}` + "\n")
		for range 1500 {
			f.Write(line[:500]) // half a line: a torn tail until the rest lands
			f.Write(line[500:])
		}
	}()
	reads, last := 0, 0
	for running := true; running || reads < 100; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		res, err := p.ReadJSONL(path, state.ReadOptions{Versions: []int{2}, Tail: state.TailIgnore})
		if err != nil {
			t.Fatalf("read %d beside the writer: %v", reads, err)
		}
		if len(res.Envelopes) < last {
			t.Fatalf("read %d saw %d envelopes after %d", reads, len(res.Envelopes), last)
		}
		last = len(res.Envelopes)
	}
	if last != 1501 {
		t.Errorf("last read saw %d envelopes, want 1501", last)
	}
}
