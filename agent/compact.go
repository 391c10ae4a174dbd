package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // RasterTokens reads JPEG headers
	_ "image/png"  // and PNG headers
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentstack/agentstack/llm"
)

// EstimateTokens estimates the prompt tokens of a request: a quarter of its
// JSON size, which errs on the high side for prose and code alike. Images
// count as their raster reservation (RasterTokens), not as base64 text: a
// 2 MB screenshot is about a thousand tokens, not half a million.
func EstimateTokens(msgs []llm.Message, tools []llm.Tool) int {
	reserve := 0
	if slices.ContainsFunc(msgs, func(m llm.Message) bool { return len(m.Images) > 0 }) {
		msgs = slices.Clone(msgs)
		for i := range msgs {
			for _, img := range msgs[i].Images {
				reserve += RasterTokens(img)
			}
			msgs[i].Images = nil
		}
	}
	b, _ := json.Marshal(msgs)
	t, _ := json.Marshal(tools)
	return (len(b)+len(t)+3)/4 + reserve
}

// Accounting is a request's exact local accounting, the candidate
// builder's: its canonical body (the JSON the provider is sent; images
// travel beside it as parts) and the raster reservation of each image it
// carries.
type Accounting struct {
	Body []byte
	// Raster is the images' reservation in tokens (RasterTokens each).
	Raster int
}

// Account serializes req once and reserves its images.
func Account(req *llm.ChatRequest) Accounting {
	body, _ := json.Marshal(req)
	a := Accounting{Body: body}
	for _, m := range req.Messages {
		for _, img := range m.Images {
			a.Raster += RasterTokens(img)
		}
	}
	return a
}

// Tokens is the admission estimate: ceil(UTF-8 body bytes / 4) plus the
// raster reservations.
func (a Accounting) Tokens() int { return (len(a.Body)+3)/4 + a.Raster }

// Bytes is the image-aware accounting size local-exact compaction
// compares: the body plus four bytes per reserved raster token.
func (a Accounting) Bytes() int { return len(a.Body) + 4*a.Raster }

// RasterTokens is an image's token reservation, 2·⌈w/32⌉·⌈h/32⌉ (0 when its
// PNG or JPEG header cannot be read).
func RasterTokens(img llm.Image) int {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil {
		return 0
	}
	return 2 * ((cfg.Width + 31) / 32) * ((cfg.Height + 31) / 32)
}

// Default budget fractions.
const (
	DefaultUtilization  = 0.9
	DefaultTrigger      = 0.8
	DefaultTail         = 0.3
	DefaultOutputTokens = 4096
)

// Budget is how much of a model's context window a conversation may use.
type Budget struct {
	// ContextWindow is the model's context in tokens; 0 when unknown (only
	// a provider's context-length rejection then compacts).
	ContextWindow int
	// MaxOutput is reserved for the reply (default DefaultOutputTokens).
	MaxOutput int
	// Utilization is the share of the window considered safe to fill
	// (default DefaultUtilization).
	Utilization float64
	// Trigger is the share of the usable input at which a conversation is
	// compacted before the next model step (default DefaultTrigger).
	Trigger float64
}

// UsableInput is floor(window × utilisation) − reserved output, or 0 when
// the window is unknown.
func (b Budget) UsableInput() int {
	if b.ContextWindow <= 0 {
		return 0
	}
	u := b.Utilization
	if u <= 0 {
		u = DefaultUtilization
	}
	out := b.MaxOutput
	if out <= 0 {
		out = DefaultOutputTokens
	}
	return max(int(math.Floor(float64(b.ContextWindow)*u))-out, 0)
}

// Over reports whether a request of tokens should be compacted first.
func (b Budget) Over(tokens int) bool {
	usable := b.UsableInput()
	if usable <= 0 {
		return false
	}
	t := b.Trigger
	if t <= 0 {
		t = DefaultTrigger
	}
	return float64(tokens) >= t*float64(usable)
}

// CompactStep is what a Compactor sees before a model step.
type CompactStep struct {
	// Messages are the conversation about to be sent.
	Messages []llm.Message
	Tools    []llm.Tool
	// Model and ModelName are the run's, for a summary step.
	Model     Model
	ModelName string
	// Rejected says the provider has just refused the conversation as too
	// long for its context: compact harder, whatever the estimate says.
	Rejected bool
}

// Compaction is a conversation made shorter.
type Compaction struct {
	// Messages replace the whole conversation.
	Messages []llm.Message
	// Summary is the text that stands for the covered messages.
	Summary string
	// Covered is how many messages of the old conversation the summary
	// replaced (they were its first non-system messages).
	Covered int
}

// Compactor is asked before each model step whether the conversation must be
// made shorter. It returns nil when nothing needs (or can) be compacted.
// The loop keeps every tool call paired with its result, so a Compactor may
// only cut where no tool result would lose its call.
type Compactor interface {
	Compact(ctx context.Context, step CompactStep) (*Compaction, error)
}

// SummaryPrefix opens the message that carries a summary of earlier
// conversation, so that a later compaction (and a reader of a stored
// session) can tell it from what the user said.
const SummaryPrefix = "[Earlier conversation summarised]\n"

// IsSummary reports whether m is a summary message made by SummaryCompactor.
func IsSummary(m llm.Message) bool {
	return m.Role == "user" && strings.HasPrefix(m.Content, SummaryPrefix)
}

// DefaultSummaryPrompt instructs the summary step of SummaryCompactor.
const DefaultSummaryPrompt = "You compact the conversation between a user and their assistant so that it can continue. " +
	"Write a faithful summary of the transcript you are given: what the user asked and decided, the facts found with the tools " +
	"(names, dates, paths, identifiers and numbers exactly), actions taken and their outcome, open questions and what was to happen next. " +
	"Do not invent anything and do not address the user."

// SummaryCompactor replaces the older part of a conversation with a summary
// written by the model, keeping a tail of recent messages verbatim. The
// leading system messages are always kept; the cut never separates a tool
// result from its call.
type SummaryCompactor struct {
	Budget Budget
	// TailFraction is the share of the usable input kept verbatim (default
	// DefaultTail); after a rejection at most half the conversation is kept.
	TailFraction float64
	// SummaryModel is the public model name of the summary step (default
	// the run's).
	SummaryModel string
	// SummaryMaxTokens bounds the summary (default SummaryOutputTokens);
	// it is reserved in the summary requests' admission.
	SummaryMaxTokens int
	// Prompt instructs the summary step (default DefaultSummaryPrompt).
	Prompt string
}

// Compact implements Compactor.
func (c *SummaryCompactor) Compact(ctx context.Context, step CompactStep) (*Compaction, error) {
	msgs := step.Messages
	before := EstimateTokens(msgs, step.Tools)
	if !step.Rejected && !c.Budget.Over(before) {
		return nil, nil
	}
	lead := 0
	for lead < len(msgs) && msgs[lead].Role == "system" {
		lead++
	}
	body := msgs[lead:]
	size := func(m llm.Message) int { return EstimateTokens([]llm.Message{m}, nil) }
	tail := c.TailFraction
	if tail <= 0 {
		tail = DefaultTail
	}
	tailBudget := int(tail * float64(c.Budget.UsableInput()))
	if step.Rejected || tailBudget <= 0 {
		total := 0
		for _, m := range body {
			total += size(m)
		}
		if tailBudget <= 0 {
			tailBudget = total / 2
		}
		tailBudget = min(tailBudget, total/2)
	}
	cut, kept := -1, 0
	for i := len(body) - 1; i > 0; i-- {
		kept += size(body[i])
		if kept > tailBudget {
			break
		}
		if body[i].Role != "tool" {
			cut = i
		}
	}
	if cut < 0 {
		// The newest round alone exceeds the tail: keep its start.
		for i := len(body) - 1; i > 0; i-- {
			if body[i].Role != "tool" {
				cut = i
				break
			}
		}
	}
	if cut <= 0 {
		return nil, nil
	}
	text, err := c.summarize(ctx, step, body[:cut])
	if err != nil {
		return nil, err
	}
	out := make([]llm.Message, 0, lead+1+len(body)-cut)
	out = append(out, msgs[:lead]...)
	out = append(out, llm.Message{Role: "user", Content: SummaryPrefix + text})
	out = append(out, body[cut:]...)
	if EstimateTokens(out, step.Tools) >= before {
		return nil, nil // no smaller: nothing changes
	}
	return &Compaction{Messages: out, Summary: text, Covered: cut}, nil
}

func (c *SummaryCompactor) summarize(ctx context.Context, step CompactStep, covered []llm.Message) (string, error) {
	model := c.SummaryModel
	if model == "" {
		model = step.ModelName
	}
	maxTokens := c.SummaryMaxTokens
	if maxTokens <= 0 {
		maxTokens = SummaryOutputTokens
	}
	prompt := c.Prompt
	if prompt == "" {
		prompt = DefaultSummaryPrompt
	}
	// A transcript larger than the summarizer can take is folded in
	// sequential ranges (refine), each request admitted exactly.
	r := &Refine{
		Usable: SummaryUsable(c.Budget.ContextWindow, c.Budget.Utilization, maxTokens),
		Request: func(acc string, source []SourcePart, correction bool) *llm.ChatRequest {
			// Streamed as Model.ChatStream sends it, so the bytes
			// admitted are the bytes sent.
			return &llm.ChatRequest{Model: model, MaxTokens: maxTokens, Stream: true, StreamOptions: &llm.StreamOptions{IncludeUsage: true},
				Messages: []llm.Message{{Role: "system", Content: prompt}, RefineMessage(acc, source, correction)}}
		},
		Send: func(ctx context.Context, req *llm.ChatRequest) (string, error) {
			resp, err := step.Model.ChatStream(ctx, req, func(llm.StreamChunk) error { return nil })
			if err != nil || resp == nil || len(resp.Choices) == 0 {
				return "", err
			}
			return resp.Choices[0].Message.Content, nil
		},
	}
	text, err := r.Advance(ctx, "", transcriptParts(covered))
	if err != nil {
		return "", fmt.Errorf("summarise %d earlier messages: %w", len(covered), err)
	}
	return text, nil
}

// RefineMessage is the user message of one refine step: the summary so far
// (when there is one), then the new source — its texts joined by blank
// lines, each image marked in place and attached to the message — and the
// correction request when the previous reply had no usable text.
func RefineMessage(acc string, source []SourcePart, correction bool) llm.Message {
	var b strings.Builder
	var images []llm.Image
	if acc != "" {
		b.WriteString("SUMMARY SO FAR:\n" + acc + "\n\nNEW TRANSCRIPT (extend the summary with it):\n")
	}
	for i, p := range source {
		if i > 0 {
			b.WriteString("\n\n")
		}
		if p.Image != nil {
			images = append(images, *p.Image)
			fmt.Fprintf(&b, "[image %d of this message]", len(images))
			continue
		}
		b.WriteString(p.Text)
	}
	if correction {
		b.WriteString("\n\nYour previous reply had no usable summary text. Reply with the complete summary as plain text only, within the output limit.")
	}
	return llm.Message{Role: "user", Content: b.String(), Images: images}
}

// transcriptParts renders each message as one plain-text part, followed by
// its images. Messages are whole, never clipped: Refine transports the
// source once over disjoint ranges, cutting a message too large for one
// request between code points, and a source beyond the call budget fails
// the compaction (ErrSummaryBudget) rather than shortening the summary.
func transcriptParts(msgs []llm.Message) []SourcePart {
	var parts []SourcePart
	for _, m := range msgs {
		var s string
		switch {
		case IsSummary(m):
			s = "EARLIER SUMMARY: " + strings.TrimPrefix(m.Content, SummaryPrefix)
		case m.Role == "tool":
			s = "TOOL RESULT " + m.ToolCallID + ": " + m.Content
		default:
			s = strings.ToUpper(m.Role) + ": " + m.Content
			for _, tc := range m.ToolCalls {
				s += fmt.Sprintf("\nTOOL CALL %s %s %s", tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
		}
		parts = append(parts, SourcePart{Text: s})
		for i := range m.Images {
			parts = append(parts, SourcePart{Image: &m.Images[i]})
		}
	}
	return parts
}

// Truncate shortens s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// MaxSummaryCalls is the logical summary calls one compaction may make:
// every refine step and the one correction share it.
const MaxSummaryCalls = 16

// SummaryOutputTokens is the output a summary request asks for; it enters
// the summary's admission as the reserved output.
const SummaryOutputTokens = 2000

// DefaultSummaryUsable is the usable input Refine admits summary requests
// against when the summarizer's context window is unknown (64 KiB of body).
const DefaultSummaryUsable = 16 << 10

// SummaryUsable is a summarizer's usable input, floor(window ×
// utilisation) − output: 0 when the window is unknown (Refine then uses
// DefaultSummaryUsable), at least 1 when it is known (a window with no
// room admits nothing).
func SummaryUsable(window int, utilization float64, output int) int {
	if window <= 0 {
		return 0
	}
	return max(Budget{ContextWindow: window, MaxOutput: output, Utilization: utilization}.UsableInput(), 1)
}

// Errors of Refine.Advance.
var (
	// ErrSummaryBudget: the call budget ran out before the whole source
	// was folded. A partial fold covers nothing.
	ErrSummaryBudget = errors.New("the summary call budget is exhausted")
	// ErrSummaryInadmissible: not even the smallest next range (one code
	// point of text, or the next image whole) makes a summary request
	// within the summarizer's usable input.
	ErrSummaryInadmissible = errors.New("no summary request fits the summarizer's usable input")
)

// SourcePart is one component of a summary source, oldest first: a text
// (one rendered row, which a fold may cut between two code points) or an
// image (atomic: it travels whole in one request or waits for the next).
type SourcePart struct {
	Text  string
	Image *llm.Image
}

// Refine is one sequential refine accumulator: it folds disjoint source
// ranges into one running summary, each call seeing the summary so far and
// only source it has not seen. Every request is admitted exactly: the
// actual request (Request: wrappers, escaping, the prepared blocks and the
// accumulator) is serialised and its accounting — ceil(body bytes/4) plus
// image raster reservations (Account) — must be within Usable, which
// already reserves the summary's output tokens. One Refine belongs to one
// compaction; its calls (refine steps and at most one correction of a reply
// without text) share MaxCalls.
type Refine struct {
	// MaxCalls bounds the logical summary calls (default MaxSummaryCalls).
	MaxCalls int
	// Usable is the summarizer candidate's usable input in tokens,
	// floor(window × utilisation) − the summary's output tokens
	// (DefaultSummaryUsable when 0: the window is unknown).
	Usable int
	// Request builds the summary request that folds source into acc (empty
	// on the first call); correction is set on the retry of a reply
	// without usable text. The request admitted is the request sent.
	Request func(acc string, source []SourcePart, correction bool) *llm.ChatRequest
	// Fits, when set, admits a request in place of the Usable check: a
	// caller that sends request plans per candidate admits each probe
	// with the same rule as the send. It must be monotone: a request with
	// more source never fits when one with less does not. Usable then
	// bounds it from above (0: no bound): a prefix whose raw bytes exceed
	// 4 × Usable is not probed.
	Fits func(req *llm.ChatRequest) bool
	// Send makes one summary call and returns the reply's text; "" when it
	// had no usable text (Refine corrects that once).
	Send func(ctx context.Context, req *llm.ChatRequest) (string, error)

	calls     int
	corrected bool
}

// Calls is how many summary calls were made so far.
func (r *Refine) Calls() int { return r.calls }

// Advance folds parts into acc and returns the new accumulator. Each call
// transports the largest prefix of the unsent source whose request is
// admitted (see admit); a text cut there continues in the next call.
// Nothing is committed on error: the caller keeps its previous
// accumulator.
func (r *Refine) Advance(ctx context.Context, acc string, parts []SourcePart) (string, error) {
	maxCalls := cmp.Or(r.MaxCalls, MaxSummaryCalls)
	for len(parts) > 0 {
		for correction := false; ; correction = true {
			if r.calls >= maxCalls {
				return "", ErrSummaryBudget
			}
			// Cancellation is checked between steps, never inside the
			// synchronous admission of one.
			if ctx.Err() != nil {
				return "", context.Cause(ctx)
			}
			req, rest, err := r.admit(acc, parts, correction)
			if err != nil {
				return "", err
			}
			r.calls++
			out, err := r.Send(ctx, req)
			if err != nil {
				return "", err
			}
			if next := strings.TrimSpace(out); next != "" {
				acc, parts = next, rest
				break
			}
			if r.corrected {
				return "", errors.New("the summarizer returned no text after its correction")
			}
			r.corrected = true
		}
	}
	return acc, nil
}

// admit chooses the next range: the whole source when its request fits;
// otherwise geometric probes over whole components (1, 2, 4, … of them)
// and bisection between the last fit and the first miss, then, when the
// next component is text, bisection over its code-point boundaries. An
// image is never cut. A prefix whose raw bytes alone exceed the usable
// bytes cannot fit (serialisation only adds to them), so it is never
// serialised. It returns the admitted request and the source left for
// later calls.
func (r *Refine) admit(acc string, parts []SourcePart, correction bool) (*llm.ChatRequest, []SourcePart, error) {
	usable := cmp.Or(r.Usable, DefaultSummaryUsable)
	// prefix is the first k components and cut bytes of component k.
	prefix := func(k, cut int) []SourcePart {
		src := parts[:k:k]
		if cut > 0 {
			src = append(src, SourcePart{Text: parts[k].Text[:cut]})
		}
		return src
	}
	fits := func(k, cut int) bool {
		req := r.Request(acc, prefix(k, cut), correction)
		if r.Fits != nil {
			return r.Fits(req)
		}
		return Account(req).Tokens() <= usable
	}
	n := len(parts)
	// raw[i] is the raw size of prefix(i, 0), a lower bound of its body.
	raw, room := make([]int, n+1), 4*usable
	if r.Fits != nil && r.Usable <= 0 {
		room = math.MaxInt / 2
	}
	for i, p := range parts {
		raw[i+1] = raw[i] + len(p.Text)
		if p.Image != nil {
			raw[i+1] += len(p.Image.Data)
		}
	}
	if raw[n] <= room && fits(n, 0) {
		return r.Request(acc, parts, correction), nil, nil
	}
	lo, hi := 0, n // prefix(lo) fits (or is empty), prefix(hi) does not
	for hi > 1 && raw[hi-1] > room {
		hi--
	}
	for p := 1; p < hi; p *= 2 {
		if !fits(p, 0) {
			hi = p
			break
		}
		lo = p
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; fits(mid, 0) {
			lo = mid
		} else {
			hi = mid
		}
	}
	k, cut := lo, 0
	if next := parts[k]; next.Image == nil {
		text := next.Text
		// The whole text is prefix(k+1): it does not fit, nor does any cut
		// beyond the room left.
		clo, chi := 0, min(len(text), max(room-raw[k]+1, 1))
		for {
			mid := clo + (chi-clo)/2
			for mid > clo && !utf8.RuneStart(text[mid]) {
				mid--
			}
			if mid == clo {
				_, size := utf8.DecodeRuneInString(text[clo:])
				if mid = clo + size; mid >= chi {
					break
				}
			}
			if fits(k, mid) {
				clo = mid
			} else {
				chi = mid
			}
		}
		cut = clo
	}
	if k == 0 && cut == 0 {
		what := "the next image"
		if parts[0].Image == nil {
			what = "the first code point of the next text"
		}
		return nil, nil, fmt.Errorf("%w: not even %s fits %d tokens", ErrSummaryInadmissible, what, usable)
	}
	rest := parts[k:]
	if cut > 0 {
		rest = append([]SourcePart{{Text: parts[k].Text[cut:]}}, parts[k+1:]...)
	}
	return r.Request(acc, prefix(k, cut), correction), rest, nil
}
