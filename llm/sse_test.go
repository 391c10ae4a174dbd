package llm_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // event|data
	}{
		{"names and multi-line data", "event: a\ndata: 1\ndata: 2\n\n: comment\nevent: b\ndata:3\n\n", []string{"a|1\n2", "b|3"}},
		{"CRLF lines", "event: x\r\ndata: {}\r\n\r\n", []string{"x|{}"}},
		{"event name does not leak into the next event", "event: a\n\ndata: 1\n\n", []string{"|1"}},
		{"pending event at EOF", "data: last", []string{"|last"}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: z\n\n", []string{"|z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := llm.NewSSEReader(strings.NewReader(tc.in))
			var got []string
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Event+"|"+string(ev.Data))
			}
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("got %q want %q", got, tc.want)
			}
		})
	}
}

func responseSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "responses", "*.sse"))
	if len(files) == 0 {
		f.Fatal("no seed streams")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzSSEReader checks that any byte stream yields events whose data came
// from data fields, and ends.
func FuzzSSEReader(f *testing.F) {
	responseSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := llm.NewSSEReader(strings.NewReader(string(b)))
		for n := 0; ; n++ {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if n > len(b) || len(ev.Data) > len(b) {
				t.Fatalf("event %d of %d bytes from a %d-byte stream", n, len(ev.Data), len(b))
			}
		}
	})
}

// FuzzResponsesStream checks that the translator never panics and that a
// stream it accepts produced a finish.
func FuzzResponsesStream(f *testing.F) {
	responseSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var acc llm.Accumulator
		s := llm.ResponsesStream{Producer: "p"}
		finished := false
		err := s.Run(strings.NewReader(string(b)), func(c llm.StreamChunk) error {
			for _, ch := range c.Choices {
				if ch.FinishReason != nil {
					finished = true
				}
			}
			acc.Add(c)
			return nil
		})
		if err == nil && !finished {
			t.Fatal("a stream ended successfully without a finish reason")
		}
	})
}
