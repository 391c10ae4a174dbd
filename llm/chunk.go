package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// chunkDecoder decodes the data of stream events into StreamChunks. The
// common chunk — id, object, created, model and choices carrying a delta of
// plain text — is read by a small scanner that allocates only the text and
// reuses the strings every chunk of a stream repeats (id, object, model);
// anything else (escapes, tool calls, usage, errors, unknown fields with
// nested values, invalid JSON) goes to encoding/json, so the result is always
// what json.Unmarshal gives. A stream of 40 tokens costs encoding/json about
// 12 allocations per chunk.
type chunkDecoder struct {
	id, object, model string
}

func (d *chunkDecoder) decode(data []byte, c *StreamChunk) error {
	if d.fast(data, c) {
		return nil
	}
	*c = StreamChunk{}
	return json.Unmarshal(data, c)
}

// chunkScanner walks one JSON value; ok turns false at the first thing the
// fast path does not handle.
type chunkScanner struct {
	b  []byte
	i  int
	ok bool
}

func (s *chunkScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c after optional space.
func (s *chunkScanner) byte(c byte) bool {
	s.space()
	if s.ok && s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str returns the raw bytes of a string without escapes or control
// characters, holding valid UTF-8 (which decodes to itself).
func (s *chunkScanner) str() []byte {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.ok = false
		return nil
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				s.ok = false
				return nil
			}
			s.i = j + 1
			return v
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil
		case c >= 0x80:
			ascii = false
		}
	}
	s.ok = false
	return nil
}

// int reads a JSON integer that fits an int64 without a fraction or exponent.
func (s *chunkScanner) int() int64 {
	s.space()
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == digits || j-digits > 18 || (s.b[digits] == '0' && j-digits > 1) ||
		(j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E')) {
		s.ok = false
		return 0
	}
	n, err := strconv.ParseInt(string(s.b[s.i:j]), 10, 64)
	if err != nil {
		s.ok = false
	}
	s.i = j
	return n
}

var literals = [][]byte{[]byte("null"), []byte("true"), []byte("false")}

// literal consumes null, true or false and returns its index in literals.
func (s *chunkScanner) literal() int {
	s.space()
	for k, l := range literals {
		if bytes.HasPrefix(s.b[s.i:], l) {
			s.i += len(l)
			return k
		}
	}
	s.ok = false
	return -1
}

// skipScalar skips a string, number or literal of a field the chunk ignores.
func (s *chunkScanner) skipScalar() {
	s.space()
	if s.i >= len(s.b) {
		s.ok = false
		return
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		s.int()
	default:
		s.literal()
	}
}

// object calls field for every member of an object until ok turns false.
func (s *chunkScanner) object(field func(key []byte)) {
	if !s.byte('{') {
		s.ok = false
		return
	}
	if s.byte('}') {
		return
	}
	for s.ok {
		key := s.str()
		if !s.ok || !s.byte(':') {
			s.ok = false
			return
		}
		field(key)
		if s.byte('}') {
			return
		}
		if !s.byte(',') {
			s.ok = false
		}
	}
}

// known reports whether key names one of fields in another case, which
// encoding/json would match case-insensitively.
func known(key []byte, fields ...string) bool {
	for _, f := range fields {
		if bytes.EqualFold(key, []byte(f)) {
			return true
		}
	}
	return false
}

// once marks member bit of a bitmask and reports whether it was unmarked:
// a repeated member is left to encoding/json's merging rules.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// intern returns old when v spells it, without allocating.
func intern(old string, v []byte) string {
	if string(v) == old {
		return old
	}
	return string(v)
}

func (d *chunkDecoder) fast(data []byte, c *StreamChunk) bool {
	s := &chunkScanner{b: data, ok: true}
	var out StreamChunk
	var seen uint8
	s.object(func(key []byte) {
		switch string(key) {
		case "id":
			s.ok = s.ok && once(&seen, 1)
			d.id = intern(d.id, s.str())
			out.ID = d.id
		case "object":
			s.ok = s.ok && once(&seen, 2)
			d.object = intern(d.object, s.str())
			out.Object = d.object
		case "model":
			s.ok = s.ok && once(&seen, 4)
			d.model = intern(d.model, s.str())
			out.Model = d.model
		case "created":
			s.ok = s.ok && once(&seen, 8)
			out.Created = s.int()
		case "choices":
			s.ok = s.ok && once(&seen, 16)
			out.Choices = s.choices()
		default:
			if known(key, "id", "object", "model", "created", "choices", "usage", "error") {
				s.ok = false
				return
			}
			s.skipScalar()
		}
	})
	s.space()
	if !s.ok || s.i != len(data) {
		return false
	}
	*c = out
	return true
}

func (s *chunkScanner) choices() []StreamChoice {
	if !s.byte('[') {
		s.ok = false
		return nil
	}
	out := make([]StreamChoice, 0, 1) // one choice is what we ask for
	if s.byte(']') {
		return out
	}
	for s.ok {
		var ch StreamChoice
		var seen uint8
		s.object(func(key []byte) {
			switch string(key) {
			case "index":
				s.ok = s.ok && once(&seen, 1)
				n := s.int()
				if n != int64(int(n)) {
					s.ok = false
				}
				ch.Index = int(n)
			case "delta":
				s.ok = s.ok && once(&seen, 2)
				ch.Delta = s.delta()
			case "finish_reason":
				s.ok = s.ok && once(&seen, 4)
				s.space()
				if s.i < len(s.b) && s.b[s.i] == '"' {
					f := string(s.str())
					ch.FinishReason = &f
				} else if s.literal() != 0 {
					s.ok = false
				}
			default:
				if known(key, "index", "delta", "finish_reason") {
					s.ok = false
					return
				}
				s.skipScalar()
			}
		})
		out = append(out, ch)
		if s.byte(']') {
			return out
		}
		if !s.byte(',') {
			s.ok = false
		}
	}
	return nil
}

func (s *chunkScanner) delta() Delta {
	var d Delta
	var seen uint8
	s.object(func(key []byte) {
		switch string(key) {
		case "role":
			s.ok = s.ok && once(&seen, 1)
			d.Role = string(s.str())
		case "content":
			s.ok = s.ok && once(&seen, 2)
			d.Content = s.strOrNull()
		case "reasoning_content":
			s.ok = s.ok && once(&seen, 4)
			d.ReasoningContent = s.strOrNull()
		default:
			if known(key, "role", "content", "reasoning_content", "tool_calls") {
				s.ok = false
				return
			}
			s.skipScalar()
		}
	})
	return d
}

// strOrNull reads a string, or null (which leaves a string field empty).
func (s *chunkScanner) strOrNull() string {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		if s.literal() != 0 {
			s.ok = false
		}
		return ""
	}
	return string(s.str())
}
