package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
)

// Scan bounds (spec: "Performance, Bounding And Backpressure").
const (
	DefaultWindow     = 14 * 24 * time.Hour
	DefaultPool       = 300
	DefaultMaxThreads = 50
	// maxReads bounds the context lookups of one thread.
	maxReads = 6
	// maxObservation bounds one lookup's text in the snapshot and the prompt.
	maxObservation = 5000
)

// ContextReader runs one read-only lookup through Steward's connectors (the
// same tools the chat uses) and returns its text.
type ContextReader interface {
	Read(ctx context.Context, tool string, args json.RawMessage) (string, error)
}

// FlowEmbedders embed flows (attributed action-center / flow-index) and the
// text they are matched against (… / flow-retrieve). Either may be nil.
type FlowEmbedders struct {
	Index, Query FlowEmbedder
}

// ScanOptions configures one scan.
type ScanOptions struct {
	// Mail reads the mirror; nil skips the mail producer (no mirror yet).
	Mail    *threads.Reader
	Planner *Planner
	// Context runs the planner's read-only lookups; nil runs none.
	Context ContextReader
	Flows   FlowEmbedders
	// Calendar configures the reminder producer (IndexPath, Days).
	Calendar ReminderOptions
	// NoSeed is ACTION_CENTER_NO_SEED=1: the first activation reviews the
	// recent window instead of marking it seen.
	NoSeed bool
	// Window, Pool and MaxThreads default to 14 days, 300 and 50.
	// MaxThreads bounds the model calls of a scan (an analysed thread costs
	// one call, two when it is actionable), hence also the analysed threads.
	Window     time.Duration
	Pool       int
	MaxThreads int
	// Now is the scan's clock (time.Now when zero).
	Now time.Time
	// Progress hears one line per thread (nil: silent).
	Progress func(string)
	// Record receives one tool-ledger row per background read.
	Record func(ctx context.Context, tool string, d time.Duration, ok bool, errText string)
}

// ScanReport is what a scan did; `steward actions scan --json` prints it.
type ScanReport struct {
	Disabled    bool           `json:"disabled,omitempty"`
	Mail        string         `json:"mail,omitempty"` // why the mail producer did not run
	Seeded      int            `json:"seeded"`
	Pool        int            `json:"pool"`
	NewMessages int            `json:"newMessages"`
	Threads     int            `json:"threads"`
	Prefiltered int            `json:"prefiltered"`
	Rejections  map[string]int `json:"rejections"`
	Analysed    int            `json:"analysed"`
	ModelCalls  int            `json:"modelCalls"`
	Reads       int            `json:"reads"`
	NoAction    int            `json:"noAction"`
	Created     int            `json:"created"`
	Updated     int            `json:"updated"`
	Reopened    int            `json:"reopened"`
	Unchanged   int            `json:"unchanged"`
	CrossThread int            `json:"crossThread"`
	Failed      int            `json:"failed"`
	Deferred    int            `json:"deferred"`
	Calendar    ReminderReport `json:"calendar"`
	Diagnostics []string       `json:"diagnostics,omitempty"`
}

const metaSeeded = "mail.seeded_at"

// Scan runs both producers once. The calendar reminders never stop the
// mail scan; a planner failure leaves its thread unseen for the next scan,
// while a no-action outcome is recorded in the seen ledger.
func (s *Store) Scan(ctx context.Context, o ScanOptions) (*ScanReport, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Pool <= 0 {
		o.Pool = DefaultPool
	}
	if o.MaxThreads <= 0 {
		o.MaxThreads = DefaultMaxThreads
	}
	rep := &ScanReport{Rejections: map[string]int{}}
	st, err := s.Settings(ctx)
	if err != nil {
		return nil, err
	}
	if !st.Enabled {
		rep.Disabled = true
		return rep, nil
	}
	if st.CalendarEnabled {
		co := o.Calendar
		co.Now, co.Cutoff, co.Language = o.Now, st.CalendarCutoff(), st.TextLanguage
		if rep.Calendar, err = s.CalendarReminders(ctx, co); err != nil {
			rep.Diagnostics = append(rep.Diagnostics, "calendar reminders: "+err.Error())
		}
	} else {
		rep.Calendar.Skipped = "calendar reminders are off (calendarEnabled false)"
	}
	if o.Mail == nil {
		rep.Mail = "no mail mirror"
		return rep, nil
	}
	return rep, s.scanMail(ctx, o, st, rep)
}

func ledgerKey(m threads.MessageRef) string {
	if m.MessageID != "" {
		return m.MessageID
	}
	return "mirror:" + strconv.FormatInt(m.ID, 10)
}

func (s *Store) scanMail(ctx context.Context, o ScanOptions, st Settings, rep *ScanReport) error {
	refs, err := o.Mail.MessagesSince(ctx, 0, o.Now.Add(-o.Window), 0)
	if err != nil {
		return fmt.Errorf("scan mail: %w", err)
	}
	if len(refs) > o.Pool {
		refs = refs[len(refs)-o.Pool:] // mirror ids grow with the date: the newest
	}
	rep.Pool = len(refs)
	if _, seeded, err := s.Meta(ctx, metaSeeded); err != nil {
		return err
	} else if !seeded {
		if !o.NoSeed {
			keys := make([]string, len(refs))
			for i, r := range refs {
				keys[i] = ledgerKey(r)
			}
			if err := s.MarkSeen(ctx, "", "seeded", keys...); err != nil {
				return err
			}
			rep.Seeded = len(keys)
		}
		if err := s.SetMeta(ctx, metaSeeded, o.Now.Format(time.RFC3339)); err != nil {
			return err
		}
		if !o.NoSeed {
			return nil
		}
	}
	// Genuinely new message ids, grouped by the mirror's thread, newest
	// activity first.
	cutoff := st.MailCutoff()
	groups := map[int64][]threads.MessageRef{}
	for _, r := range refs {
		if !cutoff.IsZero() && r.Ingested.Before(cutoff) {
			continue
		}
		seen, err := s.Seen(ctx, ledgerKey(r))
		if err != nil {
			return err
		}
		if !seen {
			groups[r.ThreadID] = append(groups[r.ThreadID], r)
			rep.NewMessages++
		}
	}
	order := make([]int64, 0, len(groups))
	for id := range groups {
		order = append(order, id)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := groups[order[i]], groups[order[j]]
		return a[len(a)-1].ID > b[len(b)-1].ID
	})
	rep.Threads = len(order)
	for _, id := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		keys := make([]string, 0, len(groups[id]))
		for _, r := range groups[id] {
			keys = append(keys, ledgerKey(r))
		}
		outcome, err := s.considerThread(ctx, o, st, rep, id)
		if err != nil {
			rep.Failed++
			rep.Diagnostics = append(rep.Diagnostics, fmt.Sprintf("thread %d deferred for retry: %v", id, err))
			continue // stays unseen
		}
		if outcome == "" {
			continue // over the analysis limit: next scan
		}
		if err := s.MarkSeen(ctx, threads.Key(id), outcome, keys...); err != nil {
			return err
		}
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("thread %d: %s", id, outcome))
		}
	}
	return nil
}

// considerThread decides one thread. It returns the outcome to record in the
// seen ledger, "" to leave the thread for a later scan, or an error (a
// planner failure) that also leaves it unseen.
func (s *Store) considerThread(ctx context.Context, o ScanOptions, st Settings, rep *ScanReport, id int64) (string, error) {
	t, err := o.Mail.Thread(ctx, id)
	if err != nil {
		return "", fmt.Errorf("read thread: %w", err)
	}
	if v := threads.Prefilter(t); v.Noise {
		rep.Prefiltered++
		rep.Rejections[rejectionClass(v.Reason)]++
		return "noise: " + v.Reason, nil
	}
	anchor := t.Representative()
	if anchor == nil {
		rep.Prefiltered++
		rep.Rejections["from the user only"]++
		return "noise: only the user's own messages", nil
	}
	// The budget bounds model calls, not only threads: a thread is analysed
	// only when both of its possible calls (analysis, planning) fit, so a
	// scan makes at most MaxThreads calls and never strands a half-planned
	// thread.
	if rep.Analysed >= o.MaxThreads || rep.ModelCalls+2 > o.MaxThreads {
		rep.Deferred++
		return "", nil
	}
	rendering := threads.Render(t, threads.RenderOptions{})
	flows, err := s.retrieveFlows(ctx, t.Subject+"\n"+anchor.Body, o.Flows)
	if err != nil {
		return "", err
	}
	related, err := s.crossThreadCandidates(ctx, t, anchor, o.Now)
	if err != nil {
		return "", err
	}
	prompt := rendering
	if len(related) > 0 {
		prompt += "\n\nOpen actions from the same correspondent domain (if this thread answers or updates one, return \"updates\": [{\"id\": <id>, \"summary\": \"<new summary>\"}]):\n"
		for _, it := range related {
			prompt += fmt.Sprintf("- action %d: %s — %s\n", it.ID, it.Title, it.Summary)
		}
	}
	rep.Analysed++
	rep.ModelCalls++
	a, err := o.Planner.Analyse(ctx, prompt, flows, o.Now, st.TextLanguage)
	if err != nil {
		return "", err
	}
	for _, u := range a.Updates {
		for _, it := range related {
			if it.ID == u.ID && u.Summary != "" {
				if err := s.SetSummary(ctx, it.ID, u.Summary, t.Key()); err != nil {
					return "", err
				}
				rep.CrossThread++
			}
		}
	}
	if !a.Actionable {
		rep.NoAction++
		return "no-action", nil
	}
	observations := s.gatherContext(ctx, o, rep, a.Reads)
	rep.ModelCalls++
	plan, err := o.Planner.Propose(ctx, a, rendering, flows, observations, st.TextLanguage)
	if err != nil {
		return "", err
	}
	it := mailItem(t, anchor, a, plan, flows, observations)
	_, out, err := s.Upsert(ctx, it, false)
	if err != nil {
		return "", err
	}
	switch out {
	case Created:
		rep.Created++
	case Updated:
		rep.Updated++
	case Reopened:
		rep.Reopened++
	default:
		rep.Unchanged++
	}
	return "item", nil
}

// rejectionClass groups prefilter reasons for the report ("sender no-reply:
// a@b" → "sender no-reply").
func rejectionClass(reason string) string {
	if c, _, ok := strings.Cut(reason, ":"); ok {
		return c
	}
	return reason
}

func (s *Store) retrieveFlows(ctx context.Context, text string, emb FlowEmbedders) ([]Flow, error) {
	var e FlowEmbedder
	if emb.Index != nil && emb.Query != nil {
		e = &cachedFlowEmbedder{s: s, index: emb.Index, query: emb.Query}
	}
	return s.RetrieveFlows(ctx, text, e)
}

// crossThreadCandidates are open mail items whose correspondent shares the
// anchor's domain, updated within the recent window: a later message can
// answer a task from another thread. At most five, newest first.
func (s *Store) crossThreadCandidates(ctx context.Context, t *threads.Thread, anchor *threads.Message, now time.Time) ([]Item, error) {
	_, domain, ok := strings.Cut(strings.ToLower(anchor.FromAddr), "@")
	if !ok || domain == "" {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM items WHERE status IN ('new','read') AND source_key LIKE 'mail:%'
		AND source_key <> ? AND updated_at >= ? AND json_extract(snapshot, '$.trigger.domain') = ? ORDER BY updated_at DESC LIMIT 5`,
		"mail:"+t.Key(), now.Add(-DefaultWindow).UnixMilli(), domain)
	if err != nil {
		return nil, fmt.Errorf("find related actions: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	var out []Item
	for _, id := range ids {
		it, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *it)
	}
	return out, nil
}

// gatherContext runs the analysis' lookups with the spec's bounded pages;
// failures become observations, never a failed scan.
func (s *Store) gatherContext(ctx context.Context, o ScanOptions, rep *ScanReport, reads []ReadRequest) []json.RawMessage {
	var out []json.RawMessage
	if o.Context == nil {
		return nil
	}
	for i, r := range reads {
		if i >= maxReads {
			break
		}
		bounds, ok := ReadTools[r.Tool]
		if !ok {
			continue // not a read tool: never run from a background scan
		}
		args := map[string]any{}
		json.Unmarshal(r.Args, &args)
		for k, hi := range bounds {
			if v, ok := args[k].(float64); !ok || v <= 0 || v > float64(hi.(int)) {
				args[k] = hi
			}
		}
		b, _ := json.Marshal(args)
		start := time.Now()
		text, err := o.Context.Read(ctx, r.Tool, b)
		ok = err == nil
		errText := ""
		if err != nil {
			errText = err.Error()
			text = "error: " + errText
		}
		if o.Record != nil {
			o.Record(ctx, r.Tool, time.Since(start), ok, errText)
		}
		rep.Reads++
		s.audit(ctx, "action.background_read", "Action Center read "+r.Tool, audit.RiskLow, map[string]any{"tool": r.Tool, "args": args, "ok": ok})
		obs, _ := json.Marshal(map[string]any{"tool": r.Tool, "args": args, "result": clipText(text, maxObservation)})
		out = append(out, obs)
	}
	return out
}

func mailItem(t *threads.Thread, anchor *threads.Message, a *Analysis, plan *Plan, flows []Flow, obs []json.RawMessage) Item {
	latest := t.Messages[len(t.Messages)-1].Date
	_, domain, _ := strings.Cut(strings.ToLower(anchor.FromAddr), "@")
	trigger, _ := json.Marshal(map[string]any{"threadId": t.ID, "subject": t.Subject, "account": t.Account,
		"from": anchor.FromAddr, "fromName": anchor.FromName, "domain": domain, "messageId": strconv.FormatInt(anchor.ID, 10),
		"date": anchor.Date.Format(time.RFC3339), "latest": latest.Format(time.RFC3339), "body": clipText(anchor.Body, 4000)})
	it := Item{SourceKey: "mail:" + t.Key(), Kind: orDefault(a.Kind, "other"), Title: orDefault(a.Title, t.Subject), Summary: a.Summary,
		Priority: PriorityNormal, SourceAt: latest, Proposal: plan.Alternatives,
		Snapshot: Snapshot{Trigger: trigger, Context: obs, Rationale: strings.TrimSpace(a.Reason + "\n" + plan.Rationale)}}
	switch a.Priority {
	case PriorityLow, PriorityHigh:
		it.Priority = a.Priority
	}
	if due, err := time.Parse(time.RFC3339, a.DueAt); err == nil {
		it.DueAt = &due
	}
	for _, f := range flows {
		if f.ID == a.FlowID {
			it.Snapshot.Flows = []FlowRef{{ID: f.ID, Version: f.Version, Name: f.Name}}
		}
	}
	if len(it.Proposal) == 0 {
		it.Diagnostics = []string{"the planner produced no executable alternative"}
	}
	return it
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// cachedFlowEmbedder embeds each flow version once (flow-index), keeping
// the vector in the store's metadata, and the matched text per call
// (flow-retrieve).
type cachedFlowEmbedder struct {
	s            *Store
	index, query FlowEmbedder
}

// Embed is called by RetrieveFlows with the text first, then the flows'
// texts in the order Flows(enabled) returns them.
func (c *cachedFlowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	flows, err := c.s.Flows(ctx, true)
	if err != nil || len(flows) != len(texts)-1 {
		return nil, fmt.Errorf("embed flows: %v", err)
	}
	out := make([][]float32, len(texts))
	q, err := c.query.Embed(ctx, texts[:1])
	if err != nil || len(q) != 1 {
		return nil, fmt.Errorf("embed the text for flow retrieval: %v", err)
	}
	out[0] = q[0]
	for i, f := range flows {
		key := fmt.Sprintf("flowvec:%d:%d", f.ID, f.Version)
		if v, ok, _ := c.s.Meta(ctx, key); ok && json.Unmarshal([]byte(v), &out[i+1]) == nil {
			continue
		}
		vecs, err := c.index.Embed(ctx, texts[i+1:i+2])
		if err != nil || len(vecs) != 1 {
			return nil, fmt.Errorf("embed flow %d: %v", f.ID, err)
		}
		out[i+1] = vecs[0]
		b, _ := json.Marshal(vecs[0])
		c.s.SetMeta(ctx, key, string(b))
	}
	return out, nil
}
