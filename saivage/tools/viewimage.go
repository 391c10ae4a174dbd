package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/images"
)

func init() { register("view_image", viewImageTool) }

func viewImageTool(env *Env) agent.Tool {
	return tool(spec("view_image", fmt.Sprintf("Look at an image file of the project (PNG, JPEG or WebP, at most %d MiB and %d megapixels). You receive it oriented (EXIF) and scaled to at most %d px on its longest side.", images.MaxSourceBytes>>20, images.MaxSourcePixels/1_000_000, images.DefaultMaxDimension),
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Path string `json:"path"`
		}) (agent.ToolResult, error) {
			p, err := env.readPath(a.Path)
			if err != nil {
				return failf("%v", err), nil
			}
			f, err := os.Open(p)
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return failf("%v", cleanErr(err, env.display(p))), nil
			}
			if !st.Mode().IsRegular() {
				return failf("%s is not a regular file", env.display(p)), nil
			}
			src, err := io.ReadAll(io.LimitReader(f, images.MaxSourceBytes+1))
			if err != nil {
				return failf("read %s: %v", env.display(p), err), nil
			}
			img, err := images.Normalize(src, images.Options{})
			if errors.Is(err, images.ErrUnsupported) {
				return failf("%s is %v", env.display(p), err), nil
			}
			if err != nil {
				return failf("%s: %v", env.display(p), err), nil
			}
			meta := map[string]any{"source_path": env.display(p), "image": img}
			res := jsonResult(meta)
			res.Images = []llm.Image{{MIME: "image/png", Data: img.PNG}}
			return res, nil
		})
}
