package protocol

import (
	"encoding/json"
	"strconv"
)

// AppendJSON appends the frame encoded exactly as json.Marshal encodes it.
// The host sends one delta per streamed token, so it encodes them without
// reflection.
func (f AssistantDelta) AppendJSON(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(f.V), 10)
	b = append(b, `,"type":`...)
	b = appendString(b, f.Type)
	if f.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, f.ID)
	}
	b = append(b, `,"chatId":`...)
	b = appendString(b, f.ChatID)
	b = append(b, `,"turnId":`...)
	b = appendString(b, f.TurnID)
	b = append(b, `,"text":`...)
	b = appendString(b, f.Text)
	return append(b, '}')
}

// appendString appends s as encoding/json writes it: plain ASCII is copied,
// anything it would escape goes through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
