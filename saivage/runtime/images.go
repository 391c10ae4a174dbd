package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image/png"
	"os"
	"path/filepath"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// ImagesDir is the directory under .saivage holding the PNG images tool
// results showed the model, one fresh file per image.
const ImagesDir = "images"

// imageDescriptor is how a tool_result row refers to an image it carried.
type imageDescriptor struct {
	Mime   string `json:"mime"`
	Path   string `json:"path"` // relative to .saivage: images/<UUID>.png
	SHA256 string `json:"sha256"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// publishImages writes each PNG as a fresh images/<UUID>.png and returns
// the descriptors the result row keeps.
func (rt *Runtime) publishImages(imgs []llm.Image) ([]imageDescriptor, error) {
	if len(imgs) == 0 {
		return nil, nil
	}
	dir := filepath.Join(rt.p.StateDir, ImagesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images directory: %w", err)
	}
	out := make([]imageDescriptor, 0, len(imgs))
	for _, img := range imgs {
		if img.MIME != "image/png" {
			return nil, fmt.Errorf("tool result image is %s; only image/png is published", img.MIME)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil {
			return nil, fmt.Errorf("tool result image: %w", err)
		}
		sum := sha256.Sum256(img.Data)
		rel := ImagesDir + "/" + state.NewUUID() + ".png"
		if err := rt.p.Publisher.CreateNew(filepath.Join(rt.p.StateDir, filepath.FromSlash(rel)), img.Data); err != nil {
			return nil, fmt.Errorf("publish %s: %w", rel, err)
		}
		out = append(out, imageDescriptor{Mime: img.MIME, Path: rel, SHA256: hex.EncodeToString(sum[:]), Width: cfg.Width, Height: cfg.Height})
	}
	return out, nil
}

// ReadImage reads a published conversation image (images/<UUID>.png)
// and checks it still has the recorded digest.
func (rt *Runtime) ReadImage(path, sha string) ([]byte, error) {
	img, err := readImage(rt.p.StateDir, imageDescriptor{Path: path, SHA256: sha})
	return img.Data, err
}

// readImage reads a descriptor's file and checks its digest.
func readImage(stateDir string, d imageDescriptor) (llm.Image, error) {
	if !filepath.IsLocal(d.Path) || filepath.Dir(filepath.FromSlash(d.Path)) != ImagesDir {
		return llm.Image{}, fmt.Errorf("image path %q is not under %s/", d.Path, ImagesDir)
	}
	b, err := os.ReadFile(filepath.Join(stateDir, filepath.FromSlash(d.Path)))
	if err != nil {
		return llm.Image{}, err
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != d.SHA256 {
		return llm.Image{}, fmt.Errorf("%s changed since it was shown (digest mismatch)", d.Path)
	}
	return llm.Image{MIME: d.Mime, Data: b}, nil
}

// attachImages gives the tool messages of msgs the images their result rows
// refer to, in order. An image that cannot be read is named in the text,
// never replaced by another source.
func attachImages(stateDir string, msgs []llm.Message, rows []conversations.Row) {
	byCall := map[string][]imageDescriptor{}
	for _, r := range rows {
		if r.Kind != "tool_result" {
			continue
		}
		if c := decodeContent(r); len(c.Images) > 0 {
			byCall[r.CallID] = c.Images
		}
	}
	if len(byCall) == 0 {
		return
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "tool" {
			continue
		}
		for _, d := range byCall[m.ToolCallID] {
			img, err := readImage(stateDir, d)
			if err != nil {
				m.Content += fmt.Sprintf("\n[image %s unavailable: %v]", d.Path, err)
				continue
			}
			m.Images = append(m.Images, img)
		}
	}
}
