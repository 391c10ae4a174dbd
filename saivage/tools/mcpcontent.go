package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/images"
)

// Native MCP content limits. None of them pages or cuts: a result over one
// is refused whole.
const (
	// MCPMaxWire bounds one message a server sends.
	MCPMaxWire = 48 << 20
	// MCPMaxDecoded bounds the decoded binary content (images, audio,
	// blobs) of one result, all blocks together.
	MCPMaxDecoded = 32 << 20
)

// nativeBlock is one content block of a native MCP result as mcpbridge
// keeps it in ToolResult.Data (the wire form, base64 decoded by encoding/json).
type nativeBlock struct {
	Type     string `json:"type"`
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"data"`
	Text     string `json:"text"`
	URI      string `json:"uri"`
	Resource *struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType"`
		Blob     []byte `json:"blob"`
		Text     string `json:"text"`
	} `json:"resource"`
}

// contentMeta is what the session keeps of a block: ordered metadata, never
// the bytes (an image's pixels travel as the result's image).
type contentMeta struct {
	Type     string        `json:"type"`
	MIMEType string        `json:"mime_type,omitempty"`
	Bytes    int           `json:"bytes,omitempty"`
	URI      string        `json:"uri,omitempty"`
	Image    *images.Image `json:"image,omitempty"`
	// NotShown says why an image block's pixels were not given to the model.
	NotShown string `json:"not_shown,omitempty"`
}

// projectResult applies the native content limits to a server's result and
// converts its image blocks into images for the model: each PNG, JPEG or
// WebP image is normalized (images.Normalize) and attached in order; the
// result's data keeps ordered metadata instead of the base64 bytes. An error
// result keeps at most MCPMaxError bytes of text and selects no pixels.
func projectResult(res agent.ToolResult) agent.ToolResult {
	if res.IsError {
		res.Data, res.Images = nil, nil
		if len(res.Content) > MCPMaxError {
			res.Content = truncUTF8(res.Content, MCPMaxError) + "…"
		}
		return res
	}
	if len(res.Content) > MCPMaxProjected {
		return failf("the tool's result is %d bytes, over the %d-byte limit; ask for less (narrower arguments)", len(res.Content), MCPMaxProjected)
	}
	if len(res.Data) == 0 {
		return res
	}
	var native struct {
		Content           []nativeBlock   `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	}
	if err := json.Unmarshal(res.Data, &native); err != nil {
		return failf("the tool's result content could not be read: %v", err)
	}
	decoded := 0
	for _, b := range native.Content {
		decoded += len(b.Data)
		if b.Resource != nil {
			decoded += len(b.Resource.Blob)
		}
	}
	if decoded > MCPMaxDecoded {
		return failf("the tool's result carries %d bytes of binary content, over the %d-byte limit; ask for less", decoded, MCPMaxDecoded)
	}
	meta := make([]contentMeta, 0, len(native.Content))
	var notes []string
	for _, b := range native.Content {
		m := contentMeta{Type: b.Type, MIMEType: b.MIMEType, Bytes: len(b.Data), URI: b.URI}
		if b.Resource != nil {
			m.URI, m.MIMEType, m.Bytes = b.Resource.URI, b.Resource.MIMEType, len(b.Resource.Blob)+len(b.Resource.Text)
		}
		if b.Type == "image" {
			img, err := nativeImage(b)
			if err != nil {
				m.NotShown = err.Error()
				notes = append(notes, fmt.Sprintf("[image %s not shown: %v]", b.MIMEType, err))
			} else {
				m.Image = &img
				res.Images = append(res.Images, llm.Image{MIME: "image/png", Data: img.PNG})
			}
		}
		meta = append(meta, m)
	}
	if len(notes) > 0 {
		res.Content = strings.TrimLeft(res.Content+"\n"+strings.Join(notes, "\n"), "\n")
	}
	data, err := json.Marshal(map[string]any{"content": meta, "structuredContent": native.StructuredContent})
	if err != nil {
		return failf("the tool's result metadata could not be encoded: %v", err)
	}
	if len(data)+len(res.Content) > MCPMaxProjected {
		return failf("the tool's result is %d bytes with its metadata, over the %d-byte limit; ask for less", len(data)+len(res.Content), MCPMaxProjected)
	}
	res.Data = data
	return res
}

// nativeImage admits one native image block: PNG, JPEG or WebP whose bytes
// match its declared type, normalized like a workspace image.
func nativeImage(b nativeBlock) (images.Image, error) {
	want := map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/webp": "webp"}[b.MIMEType]
	if want == "" {
		return images.Image{}, fmt.Errorf("%q is not image/png, image/jpeg or image/webp", b.MIMEType)
	}
	img, err := images.Normalize(b.Data, images.Options{})
	if err != nil {
		return images.Image{}, err
	}
	if img.SourceFormat != want {
		return images.Image{}, fmt.Errorf("declared %s but the bytes are %s", b.MIMEType, img.SourceFormat)
	}
	return img, nil
}
