package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/config"
)

// SkillIndexFile is the optional skill index, relative to .saivage.
const SkillIndexFile = "skills/index.json"

// Skill limits.
const (
	maxSkillIndex = 1 << 20
	maxSkillFile  = 256 << 10
)

// Skill is one entry of the skill index: a Markdown file under
// .saivage/skills that the named agents may load on explicit use.
type Skill struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	File        string   `json:"file"`
	Agents      []string `json:"agents"`
}

// SkillCatalog reads the project's optional skill index. A missing index is
// an empty catalog; any other problem is an error naming the index.
type SkillCatalog struct {
	// Dir is .saivage/skills.
	Dir    string
	Config *config.Config
}

// Skills returns the entries available to agent, in index order.
func (c SkillCatalog) Skills(agentName string) ([]Skill, error) {
	all, err := c.index()
	if err != nil {
		return nil, err
	}
	var out []Skill
	for _, s := range all {
		if slices.Contains(s.Agents, agentName) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (c SkillCatalog) index() ([]Skill, error) {
	path := filepath.Join(c.Dir, "index.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read skill index: %w", err)
	}
	if len(data) > maxSkillIndex {
		return nil, fmt.Errorf("skill index %s exceeds %d bytes", SkillIndexFile, maxSkillIndex)
	}
	var doc struct {
		FormatVersion int     `json:"format_version"`
		Skills        []Skill `json:"skills"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("skill index %s: %w", SkillIndexFile, err)
	}
	if doc.FormatVersion != 1 {
		return nil, fmt.Errorf("skill index %s: format_version must be 1, not %d", SkillIndexFile, doc.FormatVersion)
	}
	seen := map[string]bool{}
	for i, s := range doc.Skills {
		at := fmt.Sprintf("skill index %s: skills[%d]", SkillIndexFile, i)
		switch {
		case !config.ValidName(s.Name):
			return nil, fmt.Errorf("%s: name %q must use a-z, 0-9, '_' and '-'", at, s.Name)
		case seen[s.Name]:
			return nil, fmt.Errorf("%s: skill %q listed twice", at, s.Name)
		case strings.TrimSpace(s.Description) == "":
			return nil, fmt.Errorf("%s: description is required", at)
		case s.File == "" || filepath.IsAbs(s.File) || !filepath.IsLocal(s.File) || s.File == "index.json":
			return nil, fmt.Errorf("%s: file %q must be a relative path inside .saivage/skills", at, s.File)
		case len(s.Agents) == 0:
			return nil, fmt.Errorf("%s: agents must name at least one configured agent", at)
		}
		for _, a := range s.Agents {
			if _, ok := c.Config.Agents[a]; !ok {
				return nil, fmt.Errorf("%s: agent %q is not configured", at, a)
			}
		}
		seen[s.Name] = true
	}
	return doc.Skills, nil
}

// Load returns the text of skill name for agent.
func (c SkillCatalog) Load(agentName, name string) (Skill, string, error) {
	skills, err := c.Skills(agentName)
	if err != nil {
		return Skill{}, "", err
	}
	i := slices.IndexFunc(skills, func(s Skill) bool { return s.Name == name })
	if i < 0 {
		return Skill{}, "", fmt.Errorf("no skill %q for agent %s (list the skills with skill and no name)", name, agentName)
	}
	s := skills[i]
	path := filepath.Join(c.Dir, s.File)
	st, err := os.Lstat(path)
	if err != nil {
		return Skill{}, "", fmt.Errorf("skill %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return Skill{}, "", fmt.Errorf("skill %s: %s is not a regular file", name, s.File)
	}
	if st.Size() > maxSkillFile {
		return Skill{}, "", fmt.Errorf("skill %s: %s exceeds %d bytes", name, s.File, maxSkillFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Skill{}, "", fmt.Errorf("skill %s: %w", name, err)
	}
	if !utf8.Valid(data) {
		return Skill{}, "", fmt.Errorf("skill %s: %s is not UTF-8 text", name, s.File)
	}
	return s, string(data), nil
}

func init() { register("skill", skillTool) }

func skillTool(env *Env) agent.Tool {
	return tool(spec("skill", "Without name: list the skills available to you (name and description). With name: load that skill's instructions. Skills are loaded only when you ask.",
		`{"type":"object","properties":{"name":{"type":"string"}},"additionalProperties":false}`),
		func(ctx context.Context, a struct {
			Name string `json:"name,omitempty"`
		}) (agent.ToolResult, error) {
			if ag, ok := env.Config.Agents[env.Caller.Agent]; !ok || !ag.Skills {
				return failf("agent %s does not have skills: true", env.Caller.Agent), nil
			}
			cat := SkillCatalog{Dir: filepath.Join(env.StateDir, "skills"), Config: env.Config}
			if a.Name == "" {
				skills, err := cat.Skills(env.Caller.Agent)
				if err != nil {
					return failf("%v", err), nil
				}
				list := make([]map[string]string, 0, len(skills))
				for _, s := range skills {
					list = append(list, map[string]string{"name": s.Name, "description": s.Description})
				}
				return jsonResult(map[string]any{"skills": list}), nil
			}
			s, text, err := cat.Load(env.Caller.Agent, a.Name)
			if err != nil {
				return failf("%v", err), nil
			}
			return agent.ToolResult{Content: fmt.Sprintf("# Skill %s\n\n%s", s.Name, text), Data: mustJSON(map[string]any{"skill": s.Name, "file": s.File})}, nil
		})
}
