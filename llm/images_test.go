package llm_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentstack/agentstack/llm"
)

func TestMessageImagesWireFormat(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	m := llm.Message{Role: "tool", ToolCallID: "c1", Content: "meta", Images: []llm.Image{{MIME: "image/png", Data: png}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"meta"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgpmYWtl"}}]}`
	if string(b) != want {
		t.Fatalf("wire = %s\nwant   %s", b, want)
	}
	var back llm.Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Content != "meta" || back.ToolCallID != "c1" || len(back.Images) != 1 || !bytes.Equal(back.Images[0].Data, png) || back.Images[0].MIME != "image/png" {
		t.Fatalf("round trip = %+v", back)
	}
	// A message without images keeps string content.
	plain, _ := json.Marshal(llm.Message{Role: "user", Content: "hi"})
	if string(plain) != `{"role":"user","content":"hi"}` {
		t.Errorf("plain = %s", plain)
	}
	var bad llm.Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/x.png"}}]}`), &bad); err == nil {
		t.Error("a non-data image URL was accepted")
	}
}
