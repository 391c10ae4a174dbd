package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/agent"
)

func init() {
	registerBench(&benchmark{
		Name:    "compact",
		Summary: "long chats near a declared context window: summary calls per compaction and what a compaction adds to a turn",
		Run:     runCompactBench,
	})
}

type compactBenchReport struct {
	Date        time.Time `json:"date"`
	Machine     string    `json:"machine"`
	LoadAverage string    `json:"loadAverage,omitempty"`
	Command     string    `json:"command"`
	Window      int       `json:"contextWindowTokens"`
	UsableInput int       `json:"usableInputTokens"`
	TriggerAt   int       `json:"compactionTriggerTokens"`
	Chats       int       `json:"chats"`
	Turns       int       `json:"turns"`
	Compactions int       `json:"compactions"`
	// SummaryCalls counts the upstream's summary requests; MaxSummaryCalls
	// is the most any one turn made, and StraySummaryCalls those made by
	// turns that did not compact.
	SummaryCalls      int `json:"summaryCalls"`
	MaxSummaryCalls   int `json:"maxSummaryCallsPerCompactingTurn"`
	StraySummaryCalls int `json:"summaryCallsWithoutCompaction"`
	// PeakFill is the largest chat request as a share of the window (its
	// bytes / 4, the estimate the scripted provider uses).
	PeakFill float64 `json:"peakRequestWindowShare"`
	// PeakUsable is the same request as a share of the usable input.
	PeakUsable float64 `json:"peakRequestUsableShare"`
	Errors     int     `json:"errors"`
	// Plain and Compacting are TTFT and TTLT of the turns without and with
	// a compaction (the summary step runs before the answer, so it delays
	// both); AddedP50MS is their TTLT p50 difference.
	Plain      latency      `json:"plainTurns"`
	Compacting latency      `json:"compactingTurns"`
	AddedP50MS float64      `json:"compactionAddsTtltP50Ms"`
	ReplyMS    float64      `json:"upstreamReplyMs"` // chunks × gap: one streamed answer's own time
	Checks     []benchCheck `json:"checks"`
}

func runCompactBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench compact", "[--smoke] [--json] [--window TOKENS] [--chats N] [--compactions N]", `
Drives long chats through the host (the gateway in process, a real chats.db) with a declared
context window, as context_window in gateway.yaml declares one, until each chat has been compacted
--compactions times. Each user message is about 4 % of the window, so a chat climbs to its trigger
(0.8 of the usable input) and its requests stay near the top of what the window allows. For every
turn it records time to last token and the upstream's summary requests made during it. Chats run
one after another, so every summary request belongs to the turn it happened in. Reports the
summary calls per compaction (the target is at most one) and what a compaction adds to a turn.`)
	smoke := fs.Bool("smoke", false, "tiny run for CI")
	asJSON := fs.Bool("json", false, "print the JSON report")
	window := fs.Int("window", 8192, "the chats' context window in tokens")
	nChats := fs.Int("chats", 3, "chats to drive, one after another")
	wantCompactions := fs.Int("compactions", 10, "compactions to reach in each chat")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *smoke {
		*nChats, *wantCompactions = 1, 2
	}
	budget := agent.Budget{ContextWindow: *window}
	if u := agent.DefaultUtilization; budget.UsableInput() < 1000 {
		return fmt.Errorf("--window %d leaves %d tokens for the conversation after the %d-token reply reserve; use at least %d",
			*window, budget.UsableInput(), agent.DefaultOutputTokens, int(float64(1000+agent.DefaultOutputTokens)/u)+1)
	}
	if *nChats < 1 || *wantCompactions < 1 {
		return fmt.Errorf("--chats and --compactions must be at least 1")
	}
	const chunks, gap = 40, 2 * time.Millisecond
	load, _ := os.ReadFile("/proc/loadavg")
	bh, sizes, err := startBenchHost(ctx, "compact", chunks, gap, func() int { return *window })
	if err != nil {
		return err
	}
	defer bh.close()

	rep := compactBenchReport{Date: time.Now().UTC(), Machine: machineDescription(), LoadAverage: strings.TrimSpace(string(load)),
		Command: "steward bench compact " + strings.Join(args, " "), Window: *window, UsableInput: budget.UsableInput(),
		TriggerAt: int(agent.DefaultTrigger * float64(budget.UsableInput())), ReplyMS: float64(chunks*gap) / float64(time.Millisecond)}
	rep.Command = strings.TrimSpace(rep.Command)
	// About 4 % of the window per message: tens of turns between compactions.
	message := strings.Repeat("please keep streaming; ", max(1, *window*4/100*4/23))
	maxTurns := 200 * *wantCompactions
	var plain, compacting [2][]time.Duration // TTFT, TTLT
	var buf bytes.Buffer
	for c := range *nChats {
		ws, chatID, err := openBenchChat(ctx, bh.hostURL, bh.token, fmt.Sprintf("compact %d", c))
		if err != nil {
			return err
		}
		rep.Chats++
		compactions := 0
		for turn := 0; compactions < *wantCompactions; turn++ {
			if turn == maxTurns {
				ws.Close(websocket.StatusNormalClosure, "")
				return fmt.Errorf("chat %d: %d turns without reaching %d compactions (%d so far)", c, turn, *wantCompactions, compactions)
			}
			before, _ := sizes.snapshot("path-h")
			summarised := 0
			ttft, ttlt, err := hostTurn(ctx, ws, chatID, &buf, message, &summarised)
			after, _ := sizes.snapshot("path-h")
			rep.Turns++
			if err != nil {
				rep.Errors++
				continue
			}
			calls := after - before
			if summarised > 0 {
				compactions += summarised
				rep.Compactions += summarised
				rep.MaxSummaryCalls = max(rep.MaxSummaryCalls, calls)
				compacting[0], compacting[1] = append(compacting[0], ttft), append(compacting[1], ttlt)
			} else {
				rep.StraySummaryCalls += calls
				plain[0], plain[1] = append(plain[0], ttft), append(plain[1], ttlt)
			}
			if !*asJSON && summarised > 0 {
				fmt.Fprintf(env.Stderr, "chat %d turn %d: compacted (%d summary call), %.1f ms\n", c, turn, calls, float64(ttlt)/float64(time.Millisecond))
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}
	rep.SummaryCalls, _ = sizes.snapshot("path-h")
	_, largest := sizes.snapshot("path-h")
	rep.PeakFill = float64(largest) / 4 / float64(*window)
	rep.PeakUsable = float64(largest) / 4 / float64(rep.UsableInput)
	for _, p := range []struct {
		l *latency
		d [2][]time.Duration
	}{{&rep.Plain, plain}, {&rep.Compacting, compacting}} {
		*p.l = latency{TTFTP50MS: pct(p.d[0], 50), TTFTP99MS: pct(p.d[0], 99), TTLTP50MS: pct(p.d[1], 50), TTLTP99MS: pct(p.d[1], 99)}
	}
	rep.AddedP50MS = rep.Compacting.TTLTP50MS - rep.Plain.TTLTP50MS
	rep.Checks = compactChecks(&rep, *nChats**wantCompactions)
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	fmt.Fprintf(env.Stdout, "%d chats, %d turns, %d compactions, %d summary calls (at most %d in one turn; %d outside a compaction); peak request %.0f %% of the %d-token window (%.0f %% of its %d usable tokens)\n",
		rep.Chats, rep.Turns, rep.Compactions, rep.SummaryCalls, rep.MaxSummaryCalls, rep.StraySummaryCalls, 100*rep.PeakFill, rep.Window, 100*rep.PeakUsable, rep.UsableInput)
	fmt.Fprintf(env.Stdout, "TTFT p50: plain turns %.1f ms, compacting turns %.1f ms\n", rep.Plain.TTFTP50MS, rep.Compacting.TTFTP50MS)
	fmt.Fprintf(env.Stdout, "TTLT p50/p99: plain turns %.1f/%.1f ms, compacting turns %.1f/%.1f ms (a compaction adds %.1f ms at p50; one streamed answer takes %.0f ms upstream)\n",
		rep.Plain.TTLTP50MS, rep.Plain.TTLTP99MS, rep.Compacting.TTLTP50MS, rep.Compacting.TTLTP99MS, rep.AddedP50MS, rep.ReplyMS)
	printChecks(env.Stdout, rep.Checks)
	return nil
}

// compactChecks evaluates the targets: every chat compacted as planned
// (want compactions in all), each with at most one summary call, no summary
// call outside a compaction, and no failed turn.
func compactChecks(rep *compactBenchReport, want int) []benchCheck {
	return []benchCheck{
		{Target: "each compaction adds at most one summary call", Met: rep.Compactions >= want && rep.MaxSummaryCalls <= 1 && rep.SummaryCalls == rep.Compactions,
			Measured: fmt.Sprintf("%d compactions, %d summary calls, at most %d in one turn", rep.Compactions, rep.SummaryCalls, rep.MaxSummaryCalls)},
		{Target: "no summary call without a compaction", Met: rep.StraySummaryCalls == 0, Measured: fmt.Sprintf("%d", rep.StraySummaryCalls)},
		{Target: "every turn answered", Met: rep.Errors == 0, Measured: fmt.Sprintf("%d of %d failed", rep.Errors, rep.Turns)},
	}
}
