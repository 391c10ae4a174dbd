package operator

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/tools"
)

// workGC is one work collection request over .saivage/work.
type workGC struct {
	dir    string // the project's .saivage
	status runtime.Status
	procs  []tools.Process
	mode   string // dry_run | delete
	before time.Time
	target *int64
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

// collectWork previews or deletes files under .saivage/work. It runs only
// while no Run executes (autonomous work may be writing there), never
// touches the capture of a running command, and deletes oldest first until
// the accounted remainder reaches target_bytes (all eligible files when no
// target). It never pauses the runtime itself, so restoration is always
// not_acquired.
func collectWork(ctx context.Context, g workGC) gcResponse {
	resp := gcResponse{Mode: g.mode, Restoration: "not_acquired"}
	switch g.status {
	case runtime.StatusStopped, runtime.StatusPaused, runtime.StatusError:
	default:
		resp.Disposition, resp.Reason = "refused", "the runtime is "+string(g.status)+"; pause or stop it before collecting work"
		return resp
	}
	work := filepath.Join(g.dir, "work")
	live := map[string]bool{}
	for _, p := range g.procs {
		if p.State == tools.ProcRunning {
			live[filepath.Clean(p.Capture)] = true
		}
	}
	type cand struct {
		path string
		size int64
		mod  time.Time
	}
	var cands []cand
	res := &gcResult{Retained: []gcRetained{}}
	retain := func(p, why string, size int64) {
		res.RetainedCounts.Files++
		res.RetainedCounts.Bytes += size
		res.Remaining += size
		if len(res.Retained) < maxRetainedShown {
			rel, _ := filepath.Rel(g.dir, p)
			res.Retained = append(res.Retained, gcRetained{Path: filepath.ToSlash(filepath.Join(".saivage", rel)), Reason: why})
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
		case live[filepath.Clean(p)]:
			retain(p, "capture of a running command", info.Size())
		case !g.before.IsZero() && !info.ModTime().Before(g.before):
			retain(p, "modified after before", info.Size())
		default:
			cands = append(cands, cand{p, info.Size(), info.ModTime()})
		}
		return nil
	})
	if err != nil {
		resp.Disposition, resp.Reason = "interrupted", "listing .saivage/work stopped: "+err.Error()
		return resp
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.mod.Compare(b.mod) })
	var total int64
	for _, c := range cands {
		total += c.size
	}
	remaining := total + res.Remaining
	for _, c := range cands {
		if g.target != nil && remaining <= *g.target {
			retain(c.path, "target reached", c.size)
			continue
		}
		res.Files.Files++
		res.Files.Bytes += c.size
		remaining -= c.size
		if g.mode != "delete" {
			continue
		}
		if ctx.Err() != nil {
			resp.Disposition, resp.Reason, resp.Result = "interrupted", "the collection ran out of time", res
			return resp
		}
		if err := os.Remove(c.path); err != nil {
			retain(c.path, "delete failed: "+err.Error(), c.size)
			continue
		}
		res.Deleted.Files++
		res.Deleted.Bytes += c.size
	}
	// Remaining is what stays accounted after the (previewed) deletion:
	// every retained file, including failed deletions.
	if g.target != nil && res.Remaining > *g.target {
		res.TargetShortfall = res.Remaining - *g.target
	}
	resp.Disposition, resp.Result = "completed", res
	return resp
}
