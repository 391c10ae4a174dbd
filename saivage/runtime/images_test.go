package runtime_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/images"
)

// toolImages returns the data-URL images of the tool messages in a request,
// in order.
func toolImages(t *testing.T, req llmtest.Request) [][]byte {
	t.Helper()
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(req.Raw, &body); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range body.Messages {
		if m.Role != "tool" || !bytes.HasPrefix(m.Content, []byte("[")) {
			continue
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			t.Fatal(err)
		}
		if len(parts) < 2 || parts[0].Type != "text" || !strings.Contains(parts[0].Text, "source_path") {
			t.Errorf("tool content parts = %+v", parts)
		}
		for _, p := range parts[1:] {
			data, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
			if p.Type != "image_url" || !ok {
				t.Fatalf("image part = %+v", p)
			}
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// TestViewImageSendsTheNormalizedPNG: the Analyst looks at an EXIF-rotated
// JPEG; the provider receives exactly the normalized PNG, in the tool
// message of that call, on the next call and on a later turn (read back
// from the published images/<UUID>.png).
func TestViewImageSendsTheNormalizedPNG(t *testing.T) {
	e := newEnv(t, envOptions{})
	src, err := os.ReadFile(filepath.Join("..", "images", "testdata", "rotated.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "photo.jpg"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := images.Normalize(src, images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.script.Add("analyst",
		call("view_image", map[string]any{"path": "photo.jpg"}),
		text("A four-colour square."),
		text("Still the same picture."),
	)
	for _, msg := range []string{"What is in photo.jpg?", "And now?"} {
		if _, _, err := e.rt.Analyst().Submit(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if res, err := e.rt.Analyst().Wait(ctx); err != nil || res.Error != "" {
			t.Fatalf("turn = %+v, %v", res, err)
		}
	}
	reqs := e.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := toolImages(t, reqs[0]); len(got) != 0 {
		t.Errorf("first request carries %d images", len(got))
	}
	for i, r := range reqs[1:] {
		got := toolImages(t, r)
		if len(got) != 1 || !bytes.Equal(got[0], want.PNG) {
			t.Errorf("request %d: %d images, equal=%v", i+2, len(got), len(got) == 1 && bytes.Equal(got[0], want.PNG))
		}
	}
	// The row keeps a descriptor of the published file, not the pixels.
	var desc []struct {
		Path, SHA256  string
		Width, Height int
	}
	for _, r := range e.rows("", "analyst") {
		if r.Kind == "tool_result" && r.Name == "view_image" {
			var c struct {
				Images json.RawMessage `json:"images"`
			}
			_ = json.Unmarshal(r.Content, &c)
			_ = json.Unmarshal(c.Images, &desc)
			if bytes.Contains(r.Content, []byte("base64")) {
				t.Error("row embeds image data")
			}
		}
	}
	if len(desc) != 1 || desc[0].SHA256 != want.SHA256 || desc[0].Width != 64 || desc[0].Height != 48 || !strings.HasPrefix(desc[0].Path, "images/") {
		t.Fatalf("descriptors = %+v", desc)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, ".saivage", desc[0].Path)); err != nil || !bytes.Equal(b, want.PNG) {
		t.Errorf("published image differs: %v", err)
	}
}

// TestSummarySourceCarriesImagesWhole: a compaction that folds a
// view_image result sends the image to the summarizer as one whole image
// part — the exact normalized PNG, once — beside the row's text.
func TestSummarySourceCarriesImagesWhole(t *testing.T) {
	e := newEnv(t, envOptions{})
	src, err := os.ReadFile(filepath.Join("..", "images", "testdata", "rotated.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "photo.jpg"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := images.Normalize(src, images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("line of notes\n", 400)
	e.script.Add("analyst",
		call("view_image", map[string]any{"path": "photo.jpg"}),
		text("A four-colour square."),
		call("write", map[string]any{"path": "notes.txt", "content": big}),
		call("read", map[string]any{"path": "notes.txt"}),
		llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"},
		text("Done."),
	)
	e.script.Add("summary", text("SUMMARY: looked at photo.jpg, wrote notes.txt."))
	ctx := context.Background()
	for _, msg := range []string{"What is in photo.jpg?", "Write notes and read them back."} {
		if _, _, err := e.rt.Analyst().Submit(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if res, err := e.rt.Analyst().Wait(ctx); err != nil || res.Error != "" {
			t.Fatalf("turn = %+v, %v", res, err)
		}
	}
	var sent [][]byte
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "summary" {
			continue
		}
		var body struct {
			Messages []llm.Message `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatal(err)
		}
		user := body.Messages[len(body.Messages)-1]
		for _, img := range user.Images {
			sent = append(sent, img.Data)
		}
		if len(user.Images) > 0 && !strings.Contains(user.Content, "TOOL RESULT view_image") {
			t.Errorf("the image travels without its row: %.300q", user.Content)
		}
	}
	if len(sent) != 1 || !bytes.Equal(sent[0], want.PNG) {
		t.Fatalf("summary requests carried %d images (want the normalized PNG once)", len(sent))
	}
}
