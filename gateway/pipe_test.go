package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestStreamPipe(t *testing.T) {
	t.Run("writes are buffered and read in order, then EOF", func(t *testing.T) {
		p := newStreamPipe()
		for _, s := range []string{"data: a\n\n", "data: b\n\n"} {
			if n, err := p.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		p.closeWrite()
		got, err := io.ReadAll(p)
		if err != nil || string(got) != "data: a\n\ndata: b\n\n" {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
		if _, err := p.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("write after close: %v", err)
		}
	})
	t.Run("a closed reader fails the writer", func(t *testing.T) {
		p := newStreamPipe()
		cause := errors.New("caller went away")
		p.closeRead(cause)
		if _, err := p.Write([]byte("x")); !errors.Is(err, cause) {
			t.Errorf("Write = %v, want %v", err, cause)
		}
		if _, err := p.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("Read = %v", err)
		}
	})
	t.Run("a writer ahead by more than the bound waits for the reader", func(t *testing.T) {
		p := newStreamPipe()
		want := bytes.Repeat([]byte("0123456789abcdef"), 3*maxPipeBuffer/16)
		go func() {
			for b := want; len(b) > 0; b = b[min(len(b), 1000):] {
				p.Write(b[:min(len(b), 1000)])
			}
			p.closeWrite()
		}()
		var got bytes.Buffer
		buf := make([]byte, 777)
		for {
			n, err := p.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("read %d bytes, want the %d written", got.Len(), len(want))
		}
	})
}
