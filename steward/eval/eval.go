// Package eval is Steward's offline model replay: it collects the decision
// points of stored chat sessions (each time the model called tools) into a
// catalog with the tool schemas offered, replays selected histories against
// any OpenAI-compatible endpoint and compares the tool calls it proposes
// with the historical ones. Proposed calls are recorded, never executed.
//
// Artifacts hold private transcript context, not anonymised fixtures: they
// are written owner-only, marked private, and never inside a git work tree
// or Steward's data home.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
)

// CatalogFile and ReportFile are the artifact names inside an output
// directory; PrivateNotice is the marker file written beside them.
const (
	CatalogFile   = "catalog.json"
	ReportFile    = "report.json"
	PrivateNotice = "PRIVATE-README.txt"
)

// Call is one tool call: its tool and JSON arguments.
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Case is one decision point: the conversation up to an assistant message
// that called tools, and the calls it made.
type Case struct {
	ID        string        `json:"id"` // chatID#index of the assistant message in the session
	ChatID    string        `json:"chatId"`
	ChatTitle string        `json:"chatTitle"`
	History   []llm.Message `json:"history"`
	Expected  []Call        `json:"expected"`
	// MissingTools names expected tools the catalog's schemas do not offer
	// (a connector since removed or not running when the catalog was made):
	// a replay cannot propose them.
	MissingTools []string `json:"missingTools,omitempty"`
}

// Catalog is what Collect gathers.
type Catalog struct {
	Private   bool       `json:"private"` // always true: the file holds transcript text
	CreatedAt time.Time  `json:"createdAt"`
	Source    string     `json:"source"` // the chats database read
	Tools     []llm.Tool `json:"tools"`
	Cases     []Case     `json:"cases"`
}

// Session is one stored chat as Collect reads it.
type Session struct {
	ChatID, Title string
	Messages      []llm.Message
}

// Sessions reads every chat's stored agent session, newest chat first.
func Sessions(ctx context.Context, store *chats.Store) ([]Session, error) {
	list, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	out := make([]Session, 0, len(list))
	for _, c := range list {
		msgs, err := store.Session(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, Session{ChatID: c.ID, Title: c.Title, Messages: msgs})
	}
	return out, nil
}

// CollectOptions configures Collect.
type CollectOptions struct {
	// Source names where the sessions came from (shown in the catalog).
	Source string
	// Tools are the tool schemas offered to a replayed model.
	Tools []llm.Tool
	// SystemPrompt starts each history that has no system message (the
	// host adds it at each turn rather than storing it).
	SystemPrompt string
	// Now stamps the catalog (default time.Now).
	Now func() time.Time
}

// Collect turns sessions into a catalog: one case per assistant message
// with tool calls, its history the messages before it.
func Collect(sessions []Session, opts CollectOptions) *Catalog {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	offered := map[string]bool{}
	for _, t := range opts.Tools {
		offered[t.Function.Name] = true
	}
	cat := &Catalog{Private: true, CreatedAt: now().UTC(), Source: opts.Source, Tools: opts.Tools, Cases: []Case{}}
	for _, s := range sessions {
		var prefix []llm.Message
		if opts.SystemPrompt != "" && (len(s.Messages) == 0 || s.Messages[0].Role != "system") {
			prefix = []llm.Message{{Role: "system", Content: opts.SystemPrompt}}
		}
		for i, m := range s.Messages {
			if m.Role != "assistant" || len(m.ToolCalls) == 0 {
				continue
			}
			c := Case{ID: fmt.Sprintf("%s#%d", s.ChatID, i), ChatID: s.ChatID, ChatTitle: s.Title,
				History: append(append([]llm.Message{}, prefix...), s.Messages[:i]...)}
			missing := map[string]bool{}
			for _, tc := range m.ToolCalls {
				c.Expected = append(c.Expected, Call{Name: tc.Function.Name, Arguments: rawArgs(tc.Function.Arguments)})
				if !offered[tc.Function.Name] && !missing[tc.Function.Name] {
					missing[tc.Function.Name] = true
					c.MissingTools = append(c.MissingTools, tc.Function.Name)
				}
			}
			cat.Cases = append(cat.Cases, c)
		}
	}
	return cat
}

// rawArgs keeps a call's arguments as JSON; text that is not JSON is kept
// as a JSON string so the catalog stays valid.
func rawArgs(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// Model is the endpoint a replay asks (an *llm.Client).
type Model interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResponse, error)
}

// RunOptions configures Run.
type RunOptions struct {
	Model     Model
	ModelName string
	// Cases selects case IDs; empty means all, in catalog order.
	Cases []string
	// Limit caps the cases replayed (0: no cap).
	Limit int
	// Progress, when set, hears each finished case (for a CLI's progress).
	Progress func(done, total int, r CaseResult)
	// Now stamps the report (default time.Now).
	Now func() time.Time
}

// CaseResult is one replayed case.
type CaseResult struct {
	ID       string `json:"id"`
	Expected []Call `json:"expected"`
	Proposed []Call `json:"proposed"`
	// Content is the text the model answered instead of (or with) calls.
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty"`
	// FirstTool: the first proposed tool is the first historical one.
	FirstTool bool `json:"firstToolMatch"`
	// Sequence: the same tools in the same order.
	Sequence bool `json:"sequenceMatch"`
	// Exact: the same tools in the same order with equal arguments.
	Exact      bool  `json:"exactMatch"`
	DurationMS int64 `json:"durationMs"`
}

// Report is a replay's outcome. Agreement measures similarity to the
// historical sequence, not task correctness or authorisation safety.
type Report struct {
	Private   bool         `json:"private"`
	CreatedAt time.Time    `json:"createdAt"`
	Model     string       `json:"model"`
	Endpoint  string       `json:"endpoint,omitempty"`
	Cases     int          `json:"cases"`
	Errors    int          `json:"errors"`
	FirstTool int          `json:"firstToolMatches"`
	Sequence  int          `json:"sequenceMatches"`
	Exact     int          `json:"exactMatches"`
	Results   []CaseResult `json:"results"`
}

// Run replays the selected cases, one request each, and compares. A failed
// request is counted in Errors and the run goes on; only a cancelled ctx or
// an unknown case ID stops it.
func Run(ctx context.Context, cat *Catalog, opts RunOptions) (*Report, error) {
	if opts.Model == nil || opts.ModelName == "" {
		return nil, errors.New("eval run: a model endpoint and a model name are required")
	}
	cases, err := selectCases(cat, opts.Cases, opts.Limit)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	rep := &Report{Private: true, CreatedAt: now().UTC(), Model: opts.ModelName, Results: []CaseResult{}}
	for i, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := replay(ctx, opts, cat.Tools, c)
		rep.Cases++
		if r.Error != "" {
			rep.Errors++
		}
		rep.FirstTool += b2i(r.FirstTool)
		rep.Sequence += b2i(r.Sequence)
		rep.Exact += b2i(r.Exact)
		rep.Results = append(rep.Results, r)
		if opts.Progress != nil {
			opts.Progress(i+1, len(cases), r)
		}
	}
	return rep, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func selectCases(cat *Catalog, ids []string, limit int) ([]Case, error) {
	out := cat.Cases
	if len(ids) > 0 {
		byID := map[string]Case{}
		for _, c := range cat.Cases {
			byID[c.ID] = c
		}
		out = nil
		for _, id := range ids {
			c, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("eval run: no case %q in the catalog", id)
			}
			out = append(out, c)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// replay asks the model once with the case's history and tools. Whatever it
// proposes is only recorded.
func replay(ctx context.Context, opts RunOptions, tools []llm.Tool, c Case) CaseResult {
	r := CaseResult{ID: c.ID, Expected: c.Expected, Proposed: []Call{}}
	start := time.Now()
	resp, err := opts.Model.Chat(ctx, &llm.ChatRequest{Model: opts.ModelName, Messages: c.History, Tools: tools})
	r.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if len(resp.Choices) == 0 {
		r.Error = "the endpoint answered with no choice"
		return r
	}
	msg := resp.Choices[0].Message
	r.Content = msg.Content
	for _, tc := range msg.ToolCalls {
		r.Proposed = append(r.Proposed, Call{Name: tc.Function.Name, Arguments: rawArgs(tc.Function.Arguments)})
	}
	r.FirstTool = len(r.Proposed) > 0 && len(c.Expected) > 0 && r.Proposed[0].Name == c.Expected[0].Name
	r.Sequence = len(r.Proposed) == len(c.Expected)
	r.Exact = r.Sequence
	for i := 0; r.Sequence && i < len(c.Expected); i++ {
		if r.Proposed[i].Name != c.Expected[i].Name {
			r.Sequence, r.Exact = false, false
		} else if !agent.SameArgs(r.Proposed[i].Arguments, c.Expected[i].Arguments) {
			r.Exact = false
		}
	}
	return r
}

// Artifacts is where catalogs and reports are written.
type Artifacts struct {
	// Dir is the output directory.
	Dir string
	// DataHome is Steward's data home (STEWARD_HOME), which Dir must not
	// be inside.
	DataHome string
}

// Check refuses a directory inside DataHome or inside a git work tree
// (where a commit could publish private transcripts).
func (a Artifacts) Check() error {
	if a.Dir == "" {
		return errors.New("eval: an output directory is required (--output)")
	}
	dir, err := filepath.Abs(a.Dir)
	if err != nil {
		return fmt.Errorf("eval output %s: %w", a.Dir, err)
	}
	if a.DataHome != "" {
		home, err := filepath.Abs(a.DataHome)
		if err == nil && within(resolve(dir), resolve(home)) {
			return fmt.Errorf("eval output %s is inside Steward's data home %s; choose a directory outside it", a.Dir, a.DataHome)
		}
	}
	for d := resolve(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return fmt.Errorf("eval output %s is inside the git work tree %s, where a commit could publish private transcripts; choose a directory outside it", a.Dir, d)
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// resolve follows symlinks of the longest existing prefix of path, so that a
// link cannot hide that a new directory is inside a refused one.
func resolve(path string) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if filepath.Dir(p) == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

const privateText = `PRIVATE: these files hold the text of your own Steward chats (messages, tool arguments and results).
They are not anonymised fixtures. Do not commit, share or upload them; delete them when done.
A replay sends these histories to the endpoint it was given.
`

// Write stores v as name in Dir, owner-only, with the private notice
// beside it. Dir is checked first.
func (a Artifacts) Write(name string, v any) (string, error) {
	if err := a.Check(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(a.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create eval output %s: %w", a.Dir, err)
	}
	if err := os.Chmod(a.Dir, 0o700); err != nil {
		return "", fmt.Errorf("restrict eval output %s: %w", a.Dir, err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, PrivateNotice), []byte(privateText), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", PrivateNotice, err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", name, err)
	}
	path := filepath.Join(a.Dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// ReadCatalog reads a catalog Write stored.
func ReadCatalog(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read eval catalog: %w", err)
	}
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("eval catalog %s: %w", path, err)
	}
	return &c, nil
}
