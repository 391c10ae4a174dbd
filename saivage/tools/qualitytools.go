package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/quality"
)

// QualityRunner runs the code-quality analyzers (quality.Runner).
type QualityRunner interface {
	Available(analyzer string) error
	Run(ctx context.Context, analyzer, root string, paths []string) (quality.Report, quality.Invocation, error)
}

func init() {
	for _, a := range []string{quality.JavaScriptESLint, quality.TypeScriptESLint, quality.PythonRuff} {
		register("code_quality_"+a, qualityTool(a))
	}
}

var qualityLabels = map[string]string{
	quality.JavaScriptESLint: "ESLint on JavaScript files (.js, .mjs, .cjs, .jsx)",
	quality.TypeScriptESLint: "ESLint with typescript-eslint on TypeScript files (.ts, .tsx, .mts, .cts)",
	quality.PythonRuff:       "Ruff on Python files (.py, .pyi)",
}

func qualityTool(analyzer string) factory {
	name := "code_quality_" + analyzer
	return func(env *Env) agent.Tool {
		return tool(spec(name, fmt.Sprintf("Run %s under the given project paths (default: the whole project) and report the findings. The project's own ESLint config is used when present.", qualityLabels[analyzer]),
			`{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`),
			func(ctx context.Context, a struct {
				Paths []string `json:"paths,omitempty"`
			}) (agent.ToolResult, error) {
				if env.Quality == nil {
					return unavailable(name, "no code-quality analyzers are configured (set SAIVAGE_QUALITY_NODE_MODULES, or SAIVAGE_QUALITY_RUFF for Ruff alone)"), nil
				}
				if err := env.Quality.Available(analyzer); err != nil {
					return unavailable(name, strings.TrimPrefix(err.Error(), quality.ErrUnavailable.Error()+": ")), nil
				}
				for _, p := range a.Paths {
					if _, err := env.readPath(p); err != nil {
						return failf("%v", err), nil
					}
				}
				rep, _, err := env.Quality.Run(ctx, analyzer, env.Root, a.Paths)
				if err != nil {
					if ctx.Err() != nil {
						return agent.ToolResult{}, err
					}
					if errors.Is(err, quality.ErrUnavailable) {
						return unavailable(name, err.Error()), nil
					}
					return failf("%s", env.redact(err.Error())), nil
				}
				return jsonResult(rep), nil
			})
	}
}
