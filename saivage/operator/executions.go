package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// Limits of the Executions read model.
const (
	DefaultExecutions = 100
	MaxExecutions     = 500
	// previewRunes bounds the argument and result previews of a row.
	previewRunes = 240
)

// execFile is a file an invocation names: the output capture of a managed
// command, or the project file a file tool targeted.
type execFile struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	Path  string `json:"path"`
}

// execution is one tool invocation of a card's sessions: its call, and its
// result when one was recorded. A missing result says only that none was
// recorded, never that the call is still running.
type execution struct {
	ID       string     `json:"id"`
	Ordinal  int        `json:"ordinal"`
	Session  string     `json:"session"`
	Agent    string     `json:"agent"`
	Segment  int        `json:"segment"`
	CallID   string     `json:"call_id"`
	Tool     string     `json:"tool"`
	State    string     `json:"state"` // succeeded | failed | no_result
	Args     string     `json:"arguments"`
	Result   *string    `json:"result"`
	Files    []execFile `json:"files"`
	captures string
}

// executions reads the card's sessions (in workflow agent order; within a
// session, segment and row order) and pairs each tool call with its result.
func (s *Server) executions(r *http.Request) (string, []execution, error) {
	_, c, err := s.cardParam(r)
	if err != nil {
		return "", nil, err
	}
	infos, err := s.rt.CardSessions(r.Context(), c)
	if err != nil {
		return "", nil, err
	}
	out := []execution{}
	for _, info := range infos {
		err := s.toolCalls(info, func(seg, i int, call conversations.Row, results map[string]conversations.Row) {
			out = append(out, s.execution(info.ID, info.Agent, seg, i, call, results))
		})
		if err != nil {
			return "", nil, err
		}
	}
	for i := range out {
		out[i].Ordinal = i
	}
	return c.ID, out, nil
}

// toolCalls calls fn for each tool call of a session, in segment and row
// order, with the segment's results by call id.
func (s *Server) toolCalls(info runtime.SessionInfo, fn func(seg, pos int, call conversations.Row, results map[string]conversations.Row)) error {
	sessions := s.rt.Project().Sessions
	idx, err := sessions.ReadIndex(info.Dir, info.ID)
	if err != nil {
		return err
	}
	for _, seg := range idx.Segments {
		rows, err := sessions.Segment(info.Dir, info.ID, seg.N)
		if err != nil {
			return err
		}
		results := map[string]conversations.Row{}
		for _, row := range rows {
			if row.Kind == "tool_result" {
				results[row.CallID] = row
			}
		}
		for i, row := range rows {
			if row.Kind == "tool_call" {
				fn(seg.N, i, row, results)
			}
		}
	}
	return nil
}

// captureOf returns the process capture a tool result names, or "".
func captureOf(res conversations.Row) string {
	var rc struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(res.Content, &rc)
	var proc struct {
		Output struct {
			Capture string `json:"capture"`
		} `json:"output"`
	}
	if json.Unmarshal([]byte(rc.Content), &proc) != nil {
		return ""
	}
	return proc.Output.Capture
}

// evidenceCaptures returns the process captures named by the execution
// evidence of every global session and reached active card (project
// relative paths): work GC keeps them.
func (s *Server) evidenceCaptures(ctx context.Context) (map[string]bool, error) {
	infos, err := s.rt.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, info := range infos {
		err := s.toolCalls(info, func(_, _ int, call conversations.Row, results map[string]conversations.Row) {
			if res, ok := results[call.CallID]; ok {
				if c := captureOf(res); c != "" {
					out[filepath.ToSlash(filepath.Clean(c))] = true
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) execution(session, agent string, seg, pos int, call conversations.Row, results map[string]conversations.Row) execution {
	var args struct {
		Arguments string `json:"arguments"`
	}
	_ = json.Unmarshal(call.Content, &args)
	e := execution{ID: fmt.Sprintf("%s.%d.%d", agent, seg, pos), Session: session, Agent: agent, Segment: seg, CallID: call.CallID,
		Tool: call.Name, State: "no_result", Args: s.rt.Redact(args.Arguments), Files: []execFile{}}
	if res, ok := results[call.CallID]; ok {
		var rc struct {
			Content string `json:"content"`
			IsError bool   `json:"is_error"`
		}
		_ = json.Unmarshal(res.Content, &rc)
		text := s.rt.Redact(rc.Content)
		e.Result, e.State = &text, "succeeded"
		if rc.IsError {
			e.State = "failed"
		}
		if c := captureOf(res); c != "" {
			e.captures = c
			e.Files = append(e.Files, execFile{Key: "output", Label: "command output", Path: c})
		}
	}
	var target struct {
		Path string `json:"path"`
	}
	if json.Unmarshal([]byte(args.Arguments), &target) == nil && target.Path != "" && !strings.HasPrefix(target.Path, "/") && !strings.HasPrefix(target.Path, recordAlias) {
		switch call.Name {
		case "write", "edit", "read":
			e.Files = append(e.Files, execFile{Key: "target", Label: call.Name + " target", Path: target.Path})
		}
	}
	return e
}

func clipRunes(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func (s *Server) getExecutions(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", DefaultExecutions, 1, MaxExecutions)
	if err != nil {
		return err
	}
	before, err := queryInt(r, "before", -1, 0, 1<<30)
	if err != nil {
		return err
	}
	card, all, err := s.executions(r)
	if err != nil {
		return err
	}
	end := len(all)
	if before >= 0 {
		end = min(before, end)
	}
	page := all[max(end-limit, 0):end]
	rows := make([]execution, len(page))
	for i, e := range page {
		e.Args = clipRunes(e.Args, previewRunes)
		if e.Result != nil {
			short := clipRunes(*e.Result, previewRunes)
			e.Result = &short
		}
		rows[i] = e
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": card, "total": len(all), "executions": rows,
		"has_earlier": end-limit > 0})
}

// invocation finds {invocationId} among the card's executions.
func (s *Server) invocation(r *http.Request) (string, execution, error) {
	id := r.PathValue("invocationId")
	parts := strings.Split(id, ".")
	if len(parts) < 3 {
		return "", execution{}, badRequest("InvalidInvocationId", fmt.Sprintf("%q is not an invocation id (AGENT.SEGMENT.POSITION)", id))
	}
	for _, p := range parts[len(parts)-2:] {
		if _, err := strconv.Atoi(p); err != nil {
			return "", execution{}, badRequest("InvalidInvocationId", fmt.Sprintf("%q is not an invocation id (AGENT.SEGMENT.POSITION)", id))
		}
	}
	card, all, err := s.executions(r)
	if err != nil {
		return "", execution{}, err
	}
	for _, e := range all {
		if e.ID == id {
			return card, e, nil
		}
	}
	return "", execution{}, notFound("card " + card + " has no invocation " + id)
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) error {
	card, e, err := s.invocation(r)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": card, "execution": e})
}

// getExecutionFile previews (or downloads) a file an invocation names,
// through the same confidential-text owner as Files.
func (s *Server) getExecutionFile(download bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		key := r.PathValue("fileKey")
		if key != "output" && key != "target" {
			return badRequest("InvalidFileKey", "fileKey is output or target")
		}
		_, e, err := s.invocation(r)
		if err != nil {
			return err
		}
		var f *execFile
		for i := range e.Files {
			if e.Files[i].Key == key {
				f = &e.Files[i]
			}
		}
		if f == nil {
			return notFound(fmt.Sprintf("invocation %s names no %s file", e.ID, key))
		}
		var tv textView
		if key == "output" {
			// A command's capture lives under .saivage/work/processes; the
			// recorded name is trusted only inside that directory.
			root := s.rt.Project().Root
			dir := filepath.Join(s.rt.Project().StateDir, "work", "processes")
			abs := filepath.Join(root, filepath.FromSlash(e.captures))
			if filepath.Dir(abs) != dir {
				return notFound("the capture of " + e.ID + " is not a managed process capture")
			}
			fh, st, err := openRegular(abs, f.Path)
			if err != nil {
				return err
			}
			defer fh.Close()
			if tv, err = s.projectText(f.Path, fh, st.Size()); err != nil {
				return err
			}
		} else {
			fh, st, rel, err := s.openAdmitted(f.Path)
			if err != nil {
				return err
			}
			defer fh.Close()
			if tv, err = s.projectText(rel, fh, st.Size()); err != nil {
				return err
			}
		}
		if !download {
			return s.writeRedacted(w, http.StatusOK, map[string]any{"invocation": e.ID, "key": key, "file": tv})
		}
		name := strings.ReplaceAll(filepath.Base(f.Path), `"`, "")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, err = w.Write([]byte(tv.Text))
		return err
	}
}
