package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"
)

func chunkSeeds(t testing.TB) [][]byte {
	b, err := os.ReadFile("testdata/chunks/openai.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

// checkChunk decodes data both ways and fails when they differ.
func checkChunk(t *testing.T, d *chunkDecoder, data []byte) (fast bool) {
	t.Helper()
	var want StreamChunk
	wantErr := json.Unmarshal(data, &want)
	var got StreamChunk
	fast = d.fast(data, &got)
	if !fast {
		got = StreamChunk{}
		err := d.decode(data, &got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decode(%q) error %v, json.Unmarshal error %v", data, err, wantErr)
		}
	} else if wantErr != nil {
		t.Fatalf("fast path accepted %q, which json.Unmarshal refuses: %v", data, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decode(%q) = %+v, want %+v", data, got, want)
	}
	return fast
}

func TestChunkDecoderMatchesEncodingJSON(t *testing.T) {
	var d chunkDecoder
	var fast []int // 1-based lines of testdata/chunks/openai.txt
	for i, s := range chunkSeeds(t) {
		if checkChunk(t, &d, s) {
			fast = append(fast, i+1)
		}
	}
	// The role chunk (line 1), the plain text chunk (2), the finish chunk
	// (3), the reasoning chunk with a null content (6) and the spaced one (10)
	// take the fast path; escapes, tool calls, usage, errors, other cases of
	// names, duplicate keys and invalid JSON do not.
	if want := []int{1, 2, 3, 6, 10}; !slices.Equal(fast, want) {
		t.Errorf("lines %v took the fast path, want %v", fast, want)
	}
}

func TestChunkDecoderReusesStreamStrings(t *testing.T) {
	var d chunkDecoder
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"tok "}}]}`)
	var c StreamChunk
	d.decode(data, &c) // the first chunk of a stream keeps its strings
	allocs := testing.AllocsPerRun(100, func() {
		c = StreamChunk{}
		if err := d.decode(data, &c); err != nil || c.Choices[0].Delta.Content != "tok " || c.Model != "m" {
			t.Fatalf("decode = %+v, %v", c, err)
		}
	})
	if allocs > 2 { // the choices slice and the text
		t.Errorf("%.0f allocations per chunk, want at most 2", allocs)
	}
}

// FuzzChunkDecoder checks the decoder against json.Unmarshal: the same
// verdict and the same chunk for any input.
func FuzzChunkDecoder(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d chunkDecoder
		checkChunk(t, &d, data)
		checkChunk(t, &d, data) // again, with the strings of the first
	})
}

func BenchmarkChunkDecode(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732962000,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`)
	b.Run("fast", func(b *testing.B) {
		var d chunkDecoder
		b.ReportAllocs()
		for b.Loop() {
			var c StreamChunk
			d.decode(data, &c)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c StreamChunk
			json.Unmarshal(data, &c)
		}
	})
}
