package procgroup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func env() []string { return []string{"PATH=" + os.Getenv("PATH")} }

// pidAlive reports whether pid runs (not a zombie).
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[0] != "Z" && f[0] != "X"
}

func TestRun(t *testing.T) {
	bin := []byte("a\x00b\xff\x00\nc")
	big := bytes.Repeat([]byte("x"), 1<<20)
	tests := []struct {
		name          string
		argv          []string
		stdin         []byte
		hasStdin      bool
		timeout       time.Duration
		wantOut       []byte
		wantCode      int
		wantContained bool
		wantCancelled bool
		wantErr       bool
		survivorPID   bool // stdout's first line is a descendant's pid
	}{
		{name: "exit zero", argv: []string{"sh", "-c", "echo hi"}, wantOut: []byte("hi\n")},
		{name: "exit code", argv: []string{"sh", "-c", "exit 3"}, wantCode: 3},
		{name: "exact binary stdin", argv: []string{"cat"}, stdin: bin, hasStdin: true, wantOut: bin},
		{name: "empty stdin", argv: []string{"wc", "-c"}, stdin: nil, hasStdin: true, wantOut: []byte("0\n")},
		{name: "stdin not consumed", argv: []string{"sh", "-c", "exec 0<&-; sleep 0.2"}, stdin: big, hasStdin: true, wantErr: true},
		{name: "surviving descendant is containment", argv: []string{"sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"},
			wantContained: true, survivorPID: true},
		{name: "deadline kills the group", argv: []string{"sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!; sleep 60"},
			timeout: 500 * time.Millisecond, wantCancelled: true, wantCode: -1, survivorPID: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			var out bytes.Buffer
			res, err := Run(ctx, Spec{Argv: tc.argv, Env: env(), Stdin: tc.stdin, HasStdin: tc.hasStdin, Stdout: &out, WaitDelay: 200 * time.Millisecond})
			if tc.wantErr {
				var ie *IncompleteStdinError
				if !errors.As(err, &ie) || ie.Written >= ie.Want {
					t.Fatalf("err = %v, want incomplete stdin", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.wantCode || res.Contained != tc.wantContained || res.Cancelled != tc.wantCancelled {
				t.Fatalf("result %+v, want code %d contained %v cancelled %v", res, tc.wantCode, tc.wantContained, tc.wantCancelled)
			}
			if res.Succeeded() != (tc.wantCode == 0 && !tc.wantContained && !tc.wantCancelled) {
				t.Fatalf("Succeeded() = %v for %+v", res.Succeeded(), res)
			}
			if tc.survivorPID {
				pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(out.String(), "\n", 2)[0]))
				if err != nil {
					t.Fatalf("output %q: %v", out.String(), err)
				}
				if pidAlive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("descendant %d survived", pid)
				}
				return
			}
			if !bytes.Equal(out.Bytes(), tc.wantOut) {
				t.Fatalf("stdout %q, want %q", out.Bytes(), tc.wantOut)
			}
		})
	}
}

func TestRunStartFailure(t *testing.T) {
	if _, err := Run(context.Background(), Spec{Argv: []string{"/nonexistent/prog"}}); err == nil || !strings.Contains(err.Error(), "start") {
		t.Fatalf("err = %v", err)
	}
}
