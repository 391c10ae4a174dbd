// Package promote is the mail → wiki promotion pipeline (spec: "Email To
// LLM Wiki Promotion"): it reads recently active threads from the mail
// mirror, skips those whose content hash is already recorded, rejects noise
// with the deterministic prefilter, and asks the model once per remaining
// thread — triage and distillation together, as a structured answer —
// whether it holds durable knowledge and which attachments are durable
// documents. Durable threads become one canonical note,
// raw/sources/mail/mail-thread-<id>.md in the wiki, rewritten in place when
// the thread changes; selected attachments are copied beside it. The state
// (STEWARD_HOME/mail-promoter/state.db) records filtered, skipped and
// promoted threads with their hash; a deferred thread (model unavailable,
// unusable answer, failed write) records nothing and is retried by the next
// run.
package promote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/wiki"
)

// DefaultWorkers is the worker count of a Promoter whose Options give
// none; the CLI passes MAIL_PROMOTER_CONCURRENCY (default 10).
const DefaultWorkers = 8

// unavailableAfter consecutive failed model calls make the rest of a run
// defer without calling: the endpoint is down, and every further call
// would only wait for its timeout.
const unavailableAfter = 3

// Threads reads the mirror's threads; *threads.Reader is one.
type Threads interface {
	Recent(ctx context.Context, opts threads.ListOptions) ([]threads.Summary, error)
	Hashes(ctx context.Context, ids []int64) (map[int64]string, error)
	Thread(ctx context.Context, id int64) (*threads.Thread, error)
}

// Blobs locates attachment bytes by SHA-256; *mirror.Blobs is one.
type Blobs interface {
	Path(sha string) (string, error)
}

// Rescanner asks the wiki to re-read its files once after a batch.
type Rescanner interface {
	Rescan(ctx context.Context) error
}

// RescanFunc adapts a function to Rescanner.
type RescanFunc func(ctx context.Context) error

// Rescan calls f.
func (f RescanFunc) Rescan(ctx context.Context) error { return f(ctx) }

// Auditor records audit events; *audit.Ledger is one.
type Auditor interface {
	Record(ctx context.Context, e audit.Event)
}

// Options configure a Promoter.
type Options struct {
	Threads Threads
	State   *Store
	// Model and ModelName make the triage call (through the gateway,
	// attributed mail-promoter / triage).
	Model     Model
	ModelName string
	// VaultDir is the wiki; notes and attachments go under its raw/sources/.
	VaultDir string
	// Blobs holds the attachment bytes; nil selects no attachment.
	Blobs Blobs
	// Rescan, when set, is asked once after a batch that wrote something.
	Rescan Rescanner
	// Audit records every write; nil records none.
	Audit Auditor
	// Actor is the audit actor (default audit.ActorScheduler).
	Actor string
	// Workers run candidates in parallel (default DefaultWorkers).
	Workers int
	// MessageLinks selects message:// provenance (Mail on macOS opens it);
	// otherwise notes link the mirror. Default: on macOS only.
	MessageLinks *bool
	Log          *slog.Logger
	Now          func() time.Time
}

// Promoter runs promotion batches.
type Promoter struct {
	opts Options
	link linker
}

// New returns a Promoter.
func New(opts Options) (*Promoter, error) {
	if opts.Threads == nil || opts.State == nil || opts.VaultDir == "" {
		return nil, errors.New("mail promotion needs the mirror's threads, its state store and the wiki folder")
	}
	if opts.Model == nil || opts.ModelName == "" {
		return nil, errors.New("mail promotion needs a model and its name")
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Actor == "" {
		opts.Actor = audit.ActorScheduler
	}
	p := &Promoter{opts: opts, link: mirrorLinks}
	if (opts.MessageLinks == nil && runtime.GOOS == "darwin") || (opts.MessageLinks != nil && *opts.MessageLinks) {
		p.link = messageLinks
	}
	return p, nil
}

// RunOptions select a batch.
type RunOptions struct {
	// Since bounds candidates to threads active at or after it (zero: all).
	Since time.Time
	// Limit caps the candidates (0: no cap), most recent first.
	Limit int
	// DryRun reads and prefilters but calls no model and writes nothing:
	// it reports which threads would be triaged.
	DryRun bool
	// Progress is called after each thread (from one goroutine at a time).
	Progress func(Progress)
}

// Progress is a run's state after each thread.
type Progress struct {
	Done, Total int
	Counts
}

// String is the progress line.
func (p Progress) String() string {
	return fmt.Sprintf("promote: %d/%d threads — %d promoted, %d skipped, %d filtered, %d deferred, %d unchanged",
		p.Done, p.Total, p.Promoted, p.Skipped, p.Filtered, p.Deferred, p.Unchanged)
}

// Item is what happened to one thread (unchanged threads are not listed).
type Item struct {
	Key         string   `json:"key"`
	Subject     string   `json:"subject"`
	Outcome     string   `json:"outcome"`
	Reason      string   `json:"reason,omitempty"`
	Note        string   `json:"note,omitempty"`
	Attachments []string `json:"attachments,omitempty"`
	Rejected    []string `json:"rejected,omitempty"`
}

// maxReportItems bounds the items a report lists.
const maxReportItems = 500

// Report is a run's result.
type Report struct {
	Counts
	DryRun     bool   `json:"dryRun,omitempty"`
	Notes      int    `json:"notes"`       // notes written
	Files      int    `json:"attachments"` // attachments copied
	Rescan     string `json:"rescan"`      // done, failed, not needed, not configured
	Error      string `json:"rescanError,omitempty"`
	DurationMS int64  `json:"durationMs"`
	Items      []Item `json:"threads"`
	// More counts items left out of Items.
	More int `json:"moreThreads,omitempty"`
	// ModelUnavailable is set when model calls failed and none succeeded.
	ModelUnavailable bool `json:"modelUnavailable,omitempty"`
}

// run is one batch in progress.
type run struct {
	p        *Promoter
	opts     RunOptions
	hashes   map[string]string
	failing  atomic.Int32 // consecutive failed model calls
	failed   atomic.Int32 // failed model calls
	answered atomic.Int32 // model calls that returned

	mu     sync.Mutex
	rep    *Report
	done   int
	total  int
	wrote  bool
	copied map[string]bool // attachment copies of this run, by destination
}

// Run promotes one batch: the candidates, most recently active first,
// through Workers workers. It returns an error only when the batch could
// not run at all (the mirror or the state unreadable); per-thread failures
// are deferrals in the report. A cancelled context stops the workers: what
// finished is recorded, the rest stays for the next run. Only one batch may
// run per state and wiki at a time (`steward mail promote` holds a lock):
// a batch clears the temporary files a killed one left.
func (p *Promoter) Run(ctx context.Context, opts RunOptions) (*Report, error) {
	start := p.opts.Now()
	sums, err := p.opts.Threads.Recent(ctx, threads.ListOptions{Since: opts.Since, Limit: opts.Limit})
	if err != nil {
		return nil, fmt.Errorf("list mail threads: %w", err)
	}
	hashes, err := p.opts.State.Hashes(ctx)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		// A killed run may have left temporary files.
		for _, dir := range []string{NotesDir, attachmentsDir} {
			if err := wiki.RemoveStaleTemps(p.opts.VaultDir, dir); err != nil {
				p.opts.Log.Warn("could not clear stale temporary files", "dir", dir, "err", err)
			}
		}
	}
	r := &run{p: p, opts: opts, hashes: hashes, rep: &Report{DryRun: opts.DryRun, Items: []Item{}}, total: len(sums), copied: map[string]bool{}}
	r.rep.Candidates = len(sums)
	// Unchanged threads are recognised from their hashes alone, without
	// loading them: a rerun over an unchanged mirror reads little.
	ids := make([]int64, len(sums))
	for i, s := range sums {
		ids[i] = s.ID
	}
	current, err := p.opts.Threads.Hashes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("hash mail threads: %w", err)
	}
	var changed []threads.Summary
	for _, s := range sums {
		if h, ok := current[s.ID]; ok && hashes[s.Key()] == h {
			r.finish(s, Item{Key: s.Key(), Outcome: OutcomeUnchanged})
			continue
		}
		changed = append(changed, s)
	}
	jobs := make(chan threads.Summary)
	var wg sync.WaitGroup
	for range min(p.opts.Workers, max(len(changed), 1)) {
		wg.Go(func() {
			for s := range jobs {
				r.finish(s, r.one(ctx, s))
			}
		})
	}
feed:
	for _, s := range changed {
		select {
		case jobs <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	r.rep.Rescan = "not needed"
	if r.wrote && p.opts.Rescan == nil {
		r.rep.Rescan = "not configured"
	} else if r.wrote {
		// Written sources stay written and recorded whatever the rescan
		// does; a failure is reported for a later rescan.
		if err := p.opts.Rescan.Rescan(context.WithoutCancel(ctx)); err != nil {
			r.rep.Rescan, r.rep.Error = "failed", err.Error()
			p.opts.Log.Warn("wiki rescan after mail promotion failed; the notes are written, run `steward wiki reindex` or wait for the wiki's periodic rescan", "err", err)
		} else {
			r.rep.Rescan = "done"
		}
	}
	r.rep.DurationMS = p.opts.Now().Sub(start).Milliseconds()
	r.rep.ModelUnavailable = r.failed.Load() > 0 && r.answered.Load() == 0
	if !opts.DryRun {
		rec := Run{StartedAt: start, FinishedAt: p.opts.Now(), Counts: r.rep.Counts, Rescan: r.rep.Rescan, Error: r.rep.Error}
		if ctx.Err() != nil {
			rec.Error = strings.TrimPrefix(rec.Error+"; interrupted", "; ")
		}
		if err := p.opts.State.RecordRun(context.WithoutCancel(ctx), rec); err != nil {
			p.opts.Log.Warn("promotion run not recorded", "err", err)
		}
	}
	return r.rep, ctx.Err()
}

// finish counts an item and reports progress.
func (r *run) finish(s threads.Summary, it Item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	c := &r.rep.Counts
	switch it.Outcome {
	case OutcomeUnchanged:
		c.Unchanged++
	case OutcomeFiltered:
		c.Filtered++
	case OutcomeSkipped:
		c.Skipped++
	case OutcomePromoted:
		c.Promoted++
	case OutcomeDeferred:
		c.Deferred++
	case OutcomeTriage:
		c.WouldTriage++
	}
	if it.Outcome != OutcomeUnchanged {
		if it.Subject == "" {
			it.Subject = oneLine(s.Subject, 120)
		}
		if len(r.rep.Items) < maxReportItems {
			r.rep.Items = append(r.rep.Items, it)
		} else {
			r.rep.More++
		}
	}
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Done: r.done, Total: r.total, Counts: *c})
	}
}

// one takes a thread through the pipeline.
func (r *run) one(ctx context.Context, s threads.Summary) Item {
	key := threads.Key(s.ID)
	it := Item{Key: key}
	if ctx.Err() != nil {
		it.Outcome, it.Reason = OutcomeDeferred, "interrupted"
		return it
	}
	t, err := r.p.opts.Threads.Thread(ctx, s.ID)
	if err != nil || t == nil {
		it.Outcome, it.Reason = OutcomeDeferred, fmt.Sprintf("read thread: %v", err)
		return it
	}
	it.Subject = subject(t)
	hash := t.Hash()
	if r.hashes[key] == hash {
		it.Outcome = OutcomeUnchanged
		return it
	}
	st := State{Key: key, ThreadID: t.ID, Hash: hash, MessageIDs: t.MessageIDs()}
	if v := threads.Prefilter(t); v.Noise {
		it.Outcome, it.Reason = OutcomeFiltered, v.Reason
		st.Outcome, st.Reason = OutcomeFiltered, v.Reason
		return r.record(ctx, it, st)
	}
	if r.opts.DryRun {
		it.Outcome, it.Reason = OutcomeTriage, "dry run: the model would be asked"
		return it
	}
	if int(r.failing.Load()) >= unavailableAfter {
		it.Outcome, it.Reason = OutcomeDeferred, "model unavailable (the last calls failed); retried by the next run"
		return it
	}
	r.mu.Lock()
	r.rep.ModelCalls++
	r.mu.Unlock()
	d, err := triage(ctx, r.p.opts.Model, r.p.opts.ModelName, t)
	if errors.Is(err, errUnavailable) {
		r.failing.Add(1)
		r.failed.Add(1)
	} else {
		r.failing.Store(0)
		r.answered.Add(1)
	}
	if err != nil {
		it.Outcome, it.Reason = OutcomeDeferred, err.Error()
		r.p.opts.Log.Warn("mail promotion deferred a thread", "thread", key, "err", err)
		return it
	}
	it.Rejected = d.Rejected
	if len(d.Rejected) > 0 {
		r.p.opts.Log.Warn("mail promotion dropped values outside the allow-lists", "thread", key, "rejected", strings.Join(d.Rejected, "; "))
	}
	if !d.Durable && len(d.Attachments) == 0 {
		it.Outcome, it.Reason = OutcomeSkipped, "no durable knowledge"
		st.Outcome, st.Reason = OutcomeSkipped, it.Reason
		return r.record(ctx, it, st)
	}
	atts, err := r.copyAttachments(ctx, t, d)
	if err != nil {
		it.Outcome, it.Reason = OutcomeDeferred, err.Error()
		return it
	}
	if !d.Durable && len(atts) == 0 {
		it.Outcome, it.Reason = OutcomeSkipped, "no durable knowledge; no selected attachment could be copied"
		st.Outcome, st.Reason = OutcomeSkipped, it.Reason
		return r.record(ctx, it, st)
	}
	note, err := renderNote(t, hash, d, atts, r.p.link, r.p.opts.Now())
	if err != nil {
		it.Outcome, it.Reason = OutcomeDeferred, err.Error()
		return it
	}
	rel := NotePath(t.ID)
	if err := wiki.WriteSource(r.p.opts.VaultDir, rel, note); err != nil {
		it.Outcome, it.Reason = OutcomeDeferred, "wiki unavailable: "+err.Error()
		return it
	}
	r.mu.Lock()
	r.wrote = true
	r.rep.Notes++
	r.mu.Unlock()
	r.audit(ctx, audit.Event{Type: "promotion.note", Correlation: key,
		Summary: fmt.Sprintf("wrote %s from %d message(s)", rel, len(t.Messages)),
		Payload: map[string]any{"thread": key, "note": rel, "hash": hash, "messages": len(t.Messages), "categories": d.Categories,
			"attachments": len(atts), "durable": d.Durable, "reviewBy": d.ReviewBy, "rejected": d.Rejected},
		Refs: []audit.Ref{{Kind: "wiki", ID: rel}, {Kind: "mail-thread", ID: strconv.FormatInt(t.ID, 10), Title: oneLine(t.Subject, 120)}}})
	it.Outcome, it.Note = OutcomePromoted, rel
	it.Reason = "durable: " + strings.Join(d.Categories, ", ")
	if !d.Durable {
		it.Reason = "durable attachments"
	}
	for _, a := range atts {
		it.Attachments = append(it.Attachments, a.Path)
	}
	st.Outcome, st.Reason, st.Note, st.Attachments, st.Categories = OutcomePromoted, it.Reason, rel, atts, d.Categories
	return r.record(ctx, it, st)
}

// record stores a final outcome. Work already done is recorded even when
// the run is being cancelled; a failed record makes the thread deferred
// (a rerun redoes it: the note path is the same, copies are reused).
func (r *run) record(ctx context.Context, it Item, st State) Item {
	if r.opts.DryRun {
		return it
	}
	st.UpdatedAt = r.p.opts.Now()
	if err := r.p.opts.State.Record(context.WithoutCancel(ctx), st); err != nil {
		it.Outcome, it.Reason = OutcomeDeferred, err.Error()
	}
	return it
}

// copyAttachments copies the selected attachments into
// raw/sources/mail/attachments/ with the wiki's collision rules.
func (r *run) copyAttachments(ctx context.Context, t *threads.Thread, d *Decision) ([]SavedAttachment, error) {
	var out []SavedAttachment
	for _, a := range d.Attachments {
		if a.SHA256 == "" || r.p.opts.Blobs == nil {
			r.p.opts.Log.Info("selected attachment has no stored bytes; not copied", "thread", t.ID, "attachment", a.ID)
			continue
		}
		src, err := r.p.opts.Blobs.Path(a.SHA256)
		if err == nil {
			_, err = os.Stat(src)
		}
		if err != nil {
			// Not stored (over the blob cap, or swept): nothing to copy, and
			// retrying would not change that.
			r.p.opts.Log.Info("selected attachment has no stored bytes; not copied", "thread", t.ID, "attachment", a.ID, "err", err)
			continue
		}
		it, err := wiki.CopySource(r.p.opts.VaultDir, attachmentsDir, fileName(a.Filename, a.ID, a.ContentType), src)
		if err != nil {
			return nil, fmt.Errorf("wiki unavailable: copy attachment %d: %w", a.ID, err)
		}
		if it.Action == "ignored" {
			r.p.opts.Log.Info("selected attachment not copied", "thread", t.ID, "file", a.Filename, "reason", it.Reason)
			continue
		}
		out = append(out, SavedAttachment{ID: strconv.FormatInt(a.ID, 10), MessageID: strconv.FormatInt(a.MessageID, 10),
			Filename: a.Filename, Path: it.Dest, SHA256: a.SHA256, Categories: a.Categories})
		r.mu.Lock()
		first := !r.copied[it.Dest]
		r.copied[it.Dest] = true
		if it.Changed() {
			r.wrote = true
			r.rep.Files++
		}
		r.mu.Unlock()
		if it.Changed() && first {
			r.audit(ctx, audit.Event{Type: "promotion.attachment", Correlation: t.Key(),
				Summary: fmt.Sprintf("copied attachment %s to %s", oneLine(a.Filename, 120), it.Dest),
				Payload: map[string]any{"attachment": a.ID, "message": a.MessageID, "dest": it.Dest, "sha256": a.SHA256, "action": it.Action, "categories": a.Categories},
				Refs:    []audit.Ref{{Kind: "wiki", ID: it.Dest}}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (r *run) audit(ctx context.Context, e audit.Event) {
	if r.p.opts.Audit == nil {
		return
	}
	e.Actor, e.Risk = r.p.opts.Actor, audit.RiskLow
	r.p.opts.Audit.Record(ctx, e)
}

// fileName makes a safe file name of an attachment's name: its base name
// without control characters or a leading dot, or "attachment-<id>" with
// an extension from its type when nothing usable is left.
func fileName(name string, id int64, contentType string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == ':' {
			return '_'
		}
		return r
	}, path.Base(strings.ReplaceAll(name, "\\", "/")))
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if r := []rune(name); len(r) > 120 {
		ext := path.Ext(name)
		name = string(r[:120-len([]rune(ext))]) + ext
	}
	if name == "" || name == "_" {
		name = "attachment-" + strconv.FormatInt(id, 10) + extFor(contentType)
	}
	return name
}

func extFor(ct string) string {
	switch strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0])) {
	case "application/pdf":
		return ".pdf"
	case "text/plain":
		return ".txt"
	case "text/html":
		return ".html"
	}
	return ""
}
