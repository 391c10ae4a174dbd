package gateway

import (
	"encoding/json"
	"errors"
	"slices"
)

// errNotObject reports a request body that is not one JSON object.
var errNotObject = errors.New("not a JSON object")

// splitObject returns the members of the JSON object body without decoding
// their values: each value is a slice of body. It validates body once and
// walks only its top level, where decoding into a map of json.RawMessage
// scans and copies the whole body twice — a chat with a long history sends
// tens of kilobytes with every turn. A repeated key keeps its last value,
// as encoding/json does.
func splitObject(body []byte) (map[string]json.RawMessage, error) {
	if !json.Valid(body) {
		return nil, errNotObject
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, errNotObject
	}
	fields := map[string]json.RawMessage{}
	i = skipSpace(body, i+1)
	if body[i] == '}' {
		return fields, nil
	}
	for {
		// body is valid JSON, so a key string, a colon and a value follow.
		end := skipString(body, i)
		key := body[i:end]
		var k string
		if plainKey(key) {
			k = string(key[1 : len(key)-1])
		} else if err := json.Unmarshal(key, &k); err != nil {
			return nil, errNotObject
		}
		i = skipSpace(body, end)
		i = skipSpace(body, i+1) // the colon
		end = skipValue(body, i)
		fields[k] = body[i:end:end]
		i = skipSpace(body, end)
		if body[i] == '}' {
			return fields, nil
		}
		i = skipSpace(body, i+1) // the comma
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}

// joinObject encodes fields as a JSON object with sorted keys, copying each
// value as it is (they came from a validated body or from json.Marshal).
func joinObject(fields map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(fields))
	n := 2
	for k, v := range fields {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendKey(out, k)
		out = append(out, ':')
		out = append(out, fields[k]...)
	}
	return append(out, '}')
}

// appendKey appends k as a JSON string.
func appendKey(out []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(k)
			return append(out, q...)
		}
	}
	out = append(out, '"')
	out = append(out, k...)
	return append(out, '"')
}

// plainKey reports whether a quoted key needs no unescaping and no UTF-8
// repair (encoding/json replaces invalid UTF-8 in keys).
func plainKey(q []byte) bool {
	for _, c := range q {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
