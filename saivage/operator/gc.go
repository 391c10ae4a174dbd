package operator

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// workGC is one work collection request over .saivage/work.
type workGC struct {
	dir   string // the project's .saivage
	root  string // the project directory
	procs []tools.Process
	// evidence holds the captures execution evidence names (project
	// relative, slash-separated).
	evidence map[string]bool
	mode     string // dry_run | delete
	before   time.Time
	target   *int64
	// pub removes files: each unlink is checked against the listing
	// first and made durable after; an unknown outcome is fatal.
	pub *state.Publisher
}

// gcCount is a number of files and their bytes.
type gcCount struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

type gcRetained struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// gcResult separates what would be deleted from what is known deleted.
type gcResult struct {
	Files           gcCount      `json:"would_delete"`
	Deleted         gcCount      `json:"deleted"`
	Retained        []gcRetained `json:"retained"`
	RetainedCounts  gcCount      `json:"retained_total"`
	Remaining       int64        `json:"accounted_remaining_bytes"`
	TargetShortfall int64        `json:"target_shortfall_bytes"`
	WholeSizeKnown  bool         `json:"whole_work_size_known"`
}

// gcResponse is the answer of POST /api/runtime/gc-work: inspect
// disposition, not only the HTTP status.
type gcResponse struct {
	Mode        string    `json:"mode"`
	Disposition string    `json:"disposition"` // completed | interrupted | refused
	Reason      string    `json:"reason"`
	Restoration string    `json:"restoration"` // not_acquired | resumed | not_resumed
	Result      *gcResult `json:"result"`
}

// maxRetainedShown bounds the retained paths listed in a result.
const maxRetainedShown = 50

// collectHeld runs one collection under the runtime's maintenance hold: a
// running Run is paused for the collection and resumed afterwards (unless
// an ordinary Pause, Stop or the Run's end intervened). It refuses, before
// touching anything, while an MCP server is starting or restarting, while
// a managed process group is uncontained (every file is retained then),
// and while a card is running on disk with no Run owning it.
func (s *Server) collectHeld(ctx context.Context, mode string, before time.Time, target *int64) (resp gcResponse) {
	resp = gcResponse{Mode: mode, Restoration: runtime.RestorationNotAcquired}
	refuse := func(why string) gcResponse {
		resp.Disposition, resp.Reason = "refused", why
		return resp
	}
	for _, st := range s.rt.MCP().Status() {
		if st.State == "starting" || st.State == "restarting" {
			return refuse("MCP server " + st.Name + " is " + st.State + "; collect when its lifecycle has settled")
		}
	}
	hold, err := s.rt.Hold(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		resp.Disposition, resp.Reason = "interrupted", "the runtime did not settle within the collection's minute"
		return resp
	case err != nil:
		return refuse(err.Error())
	}
	defer func() { resp.Restoration = hold.Release() }()
	procs := s.rt.Processes().List()
	for _, p := range procs {
		if p.State == tools.ProcRunning {
			return refuse("process " + p.ID + " (" + s.rt.Redact(p.Command) + ") is still running; its group is uncontained, so all work is retained")
		}
	}
	if st := s.rt.Status(); st.Status == runtime.StatusStopped {
		if id, err := s.rt.RunningCard(ctx); err != nil {
			return refuse("the card graph could not be read: " + err.Error())
		} else if id != "" {
			return refuse("card " + id + " is running on disk with no Run owning it; start a Run (it recovers the card) before collecting")
		}
	}
	evidence, err := s.evidenceCaptures(ctx)
	if err != nil {
		return refuse("the execution evidence could not be read, so no capture can be proven unreferenced: " + err.Error())
	}
	return collectWork(ctx, workGC{dir: s.rt.Project().StateDir, procs: procs, evidence: evidence,
		mode: mode, before: before, target: target, pub: s.rt.Project().Publisher})
}

// collectWork previews or deletes files under .saivage/work, the caller
// holding the runtime. It never touches the capture of a known managed
// process, and deletes oldest first until the accounted remainder reaches
// target_bytes (all eligible files when no target).
func collectWork(ctx context.Context, g workGC) gcResponse {
	resp := gcResponse{Mode: g.mode}
	work := filepath.Join(g.dir, "work")
	live := map[string]bool{}
	for _, p := range g.procs {
		live[filepath.Clean(p.Capture)] = true
	}
	type cand struct {
		path string
		info fs.FileInfo
	}
	var cands []cand
	res := &gcResult{Retained: []gcRetained{}}
	retain := func(p, why string, size int64) {
		res.RetainedCounts.Files++
		res.RetainedCounts.Bytes += size
		res.Remaining += size
		if len(res.Retained) < maxRetainedShown {
			res.Retained = append(res.Retained, gcRetained{Path: stateRel(g.dir, p), Reason: why})
		}
	}
	err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == work && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case !d.Type().IsRegular():
			retain(p, "not a regular file", 0)
		case g.evidence[stateRel(g.dir, p)]:
			retain(p, "named by execution evidence", info.Size())
		case live[filepath.Clean(p)]:
			retain(p, "capture of a managed process", info.Size())
		case !g.before.IsZero() && !info.ModTime().Before(g.before):
			retain(p, "modified after before", info.Size())
		default:
			cands = append(cands, cand{p, info})
		}
		return nil
	})
	if err != nil {
		resp.Disposition, resp.Reason = "interrupted", "listing .saivage/work stopped: "+err.Error()
		return resp
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.info.ModTime().Compare(b.info.ModTime()) })
	var total int64
	for _, c := range cands {
		total += c.info.Size()
	}
	remaining := total + res.Remaining
	for _, c := range cands {
		size := c.info.Size()
		if g.target != nil && remaining <= *g.target {
			retain(c.path, "target reached", size)
			continue
		}
		res.Files.Files++
		res.Files.Bytes += size
		remaining -= size
		if g.mode != "delete" {
			continue
		}
		if ctx.Err() != nil {
			resp.Disposition, resp.Reason, resp.Result = "interrupted", "the collection ran out of time", res
			return resp
		}
		var unknown *state.OutcomeUnknownError
		switch err := g.pub.RemoveFile(c.path, c.info); {
		case err == nil:
			res.Deleted.Files++
			res.Deleted.Bytes += size
		case errors.As(err, &unknown) || errors.Is(err, state.ErrStopped):
			// The publisher's fatal boundary has the error and does not
			// return in production; no report claims a known outcome.
			resp.Disposition, resp.Reason = "failed", "deletion outcome unknown: "+err.Error()
			return resp
		case errors.Is(err, state.ErrChanged):
			retain(c.path, "changed since it was listed", size)
		default:
			retain(c.path, "delete failed: "+err.Error(), size)
		}
	}
	// Remaining is what stays accounted after the (previewed) deletion:
	// every retained file, including failed deletions.
	if g.target != nil && res.Remaining > *g.target {
		res.TargetShortfall = res.Remaining - *g.target
	}
	resp.Disposition, resp.Result = "completed", res
	return resp
}

// stateRel names a path under .saivage the way tools display it
// (".saivage/work/…", relative to the project).
func stateRel(stateDir, p string) string {
	rel, err := filepath.Rel(stateDir, p)
	if err != nil {
		return ""
	}
	return ".saivage/" + filepath.ToSlash(rel)
}
