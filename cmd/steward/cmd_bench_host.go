package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
)

func init() {
	registerBench(&benchmark{
		Name:    "host",
		Summary: "time to first and last token through the host against the gateway alone, 20 concurrent chats",
		Run:     runHostBench,
	})
}

type hostBenchReport struct {
	Date        time.Time `json:"date"`
	Machine     string    `json:"machine"`
	LoadAverage string    `json:"loadAverage,omitempty"` // /proc/loadavg when the run began
	Command     string    `json:"command"`
	// Chats counts the chats that opened; Turns the turns measured on each
	// path (failed turns are in the path's Errors, not here).
	Chats      int                `json:"concurrentChats"`
	Turns      map[string]int     `json:"turnsPerPath"`
	Chunks     int                `json:"chunksPerStream"`
	ChunkGapMS float64            `json:"chunkGapMs"`
	Paths      map[string]latency `json:"paths"` // gateway, host
	// RequestBytes is the mean size of the requests each path's turns made
	// upstream: the gateway path replays each chat's conversation, so both
	// paths ask the model the same thing.
	RequestBytes map[string]float64 `json:"upstreamRequestBytesMean"`
	// AuditWritten and AuditDropped count the host's audit events, written
	// as steward serve writes them.
	AuditWritten int64   `json:"auditWritten"`
	AuditDropped int64   `json:"auditDropped"`
	AddedTTFTMS  float64 `json:"addedTtftP99Ms"`
	TTLTRatio    float64 `json:"ttltP50Ratio"` // host / gateway
	// Checks are the targets evaluated on this run.
	Checks []benchCheck `json:"checks"`
}

type latency struct {
	TTFTP50MS float64 `json:"ttftP50Ms"`
	TTFTP99MS float64 `json:"ttftP99Ms"`
	TTLTP50MS float64 `json:"ttltP50Ms"`
	TTLTP99MS float64 `json:"ttltP99Ms"`
	Errors    int     `json:"errors"`
}

func runHostBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench host", "[--smoke] [--json] [--rounds N]", `
Streams the same completion to 20 concurrent chats two ways, interleaved in one run: straight from the
gateway (an OpenAI client reading the SSE stream) and through the host (a WebSocket client sending
user.message and reading assistant.delta … turn.done, with the transcript and session written to a real
chats.db). Both paths make the same model request: the gateway path replays each chat's conversation and
tools, so the difference is what the host adds. Reports time to first token (TTFT) and to last token
(TTLT) at the client. Each of the 20 chats takes a turn on each path per round, after a warm-up round;
the default 100 rounds give 2,000 turns per path, so the p99 is the 20th-worst turn.`)
	smoke := fs.Bool("smoke", false, "tiny run for CI")
	asJSON := fs.Bool("json", false, "print the JSON report")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to FILE")
	rounds := fs.Int("rounds", 100, "rounds of one turn per chat and path, after a warm-up round (100: 2,000 turns per path, the p99 is the 20th-worst)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	const nChats, chunks, gap = 20, 40, 2 * time.Millisecond
	if *smoke {
		*rounds = 1
	}
	if *rounds < 1 {
		return fmt.Errorf("--rounds must be at least 1")
	}
	load, _ := os.ReadFile("/proc/loadavg") // Linux only; the machine is shared, so say how busy it was
	bh, sizes, err := startBenchHost(ctx, "host", chunks, gap, nil)
	if err != nil {
		return err
	}
	defer bh.close()
	gwURL, hostURL, token, auditLedger := bh.gwURL, bh.hostURL, bh.token, bh.audit

	client := llm.NewClient(llm.ClientOptions{BaseURL: gwURL + "/v1", HTTPClient: &http.Client{Transport: gateway.NewTransport()}})
	var mu sync.Mutex
	samples := map[string][][2]time.Duration{}
	errs := map[string]int{}
	add := func(path string, ttft, ttlt time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs[path]++
			return
		}
		samples[path] = append(samples[path], [2]time.Duration{ttft, ttlt})
	}
	tools := chatTools()
	var opened atomic.Int64
	var wg sync.WaitGroup
	for i := range nChats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, chatID, err := openBenchChat(ctx, hostURL, token, fmt.Sprintf("bench %d", i))
			if err != nil {
				add("host", 0, 0, err)
				return
			}
			defer ws.Close(websocket.StatusNormalClosure, "")
			opened.Add(1)
			var buf bytes.Buffer
			var conversation []llm.Message // what the host's chat holds, replayed on the gateway path
			for r := range *rounds + 1 {   // round 0 warms up
				ttft, ttlt, err := directTurn(ctx, client, &conversation, tools)
				if r > 0 {
					add("gateway", ttft, ttlt, err)
				}
				ttft, ttlt, err = hostTurn(ctx, ws, chatID, &buf, "stream please", nil)
				if r > 0 {
					add("host", ttft, ttlt, err)
				}
			}
		}()
	}
	wg.Wait()
	if err := auditLedger.Flush(ctx); err != nil {
		return fmt.Errorf("flush the audit ledger: %w", err)
	}
	auditStats := auditLedger.Stats()

	rep := hostBenchReport{Date: time.Now().UTC(), Machine: machineDescription(), LoadAverage: strings.TrimSpace(string(load)), Command: "steward bench host",
		Chats: int(opened.Load()), Turns: map[string]int{}, Chunks: chunks, ChunkGapMS: float64(gap) / float64(time.Millisecond), Paths: map[string]latency{},
		RequestBytes: map[string]float64{"gateway": sizes.mean("path-d"), "host": sizes.mean("path-h")},
		AuditWritten: auditStats.Written, AuditDropped: auditStats.Dropped}
	if *smoke {
		rep.Command += " --smoke"
	}
	for _, p := range []string{"gateway", "host"} {
		var ttft, ttlt []time.Duration
		for _, s := range samples[p] {
			ttft, ttlt = append(ttft, s[0]), append(ttlt, s[1])
		}
		rep.Paths[p] = latency{TTFTP50MS: pct(ttft, 50), TTFTP99MS: pct(ttft, 99), TTLTP50MS: pct(ttlt, 50), TTLTP99MS: pct(ttlt, 99), Errors: errs[p]}
		rep.Turns[p] = len(samples[p])
	}
	rep.AddedTTFTMS = rep.Paths["host"].TTFTP99MS - rep.Paths["gateway"].TTFTP99MS
	if g := rep.Paths["gateway"].TTLTP50MS; g > 0 {
		rep.TTLTRatio = rep.Paths["host"].TTLTP50MS / g
	}
	rep.Checks = hostChecks(&rep, nChats*(*rounds))
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	for _, p := range []string{"gateway", "host"} {
		l := rep.Paths[p]
		fmt.Fprintf(env.Stdout, "%-8s TTFT p50 %6.2f ms p99 %6.2f ms   TTLT p50 %7.2f ms p99 %7.2f ms   errors %d\n",
			p, l.TTFTP50MS, l.TTFTP99MS, l.TTLTP50MS, l.TTLTP99MS, l.Errors)
	}
	fmt.Fprintf(env.Stdout, "host adds %.2f ms to TTFT p99 and %.1f%% to TTLT p50 (%d chats; %d gateway and %d host turns measured; load average %s)\n",
		rep.AddedTTFTMS, 100*(rep.TTLTRatio-1), rep.Chats, rep.Turns["gateway"], rep.Turns["host"], rep.LoadAverage)
	printChecks(env.Stdout, rep.Checks)
	return nil
}

// hostChecks evaluates the host's targets: at most 10 % added to TTLT p50,
// under 2 ms added to TTFT p99, and every planned turn measured on both
// paths (want of them) with both paths making the same model request.
func hostChecks(rep *hostBenchReport, want int) []benchCheck {
	g, h := rep.Paths["gateway"], rep.Paths["host"]
	complete := rep.Turns["gateway"] == want && rep.Turns["host"] == want
	return []benchCheck{
		{Target: "host adds at most 10 % to TTLT p50", Met: complete && rep.TTLTRatio > 0 && rep.TTLTRatio <= 1.10,
			Measured: fmt.Sprintf("%.2f → %.2f ms (%+.1f %%)", g.TTLTP50MS, h.TTLTP50MS, 100*(rep.TTLTRatio-1))},
		{Target: "host adds under 2 ms to TTFT p99", Met: complete && rep.AddedTTFTMS < 2,
			Measured: fmt.Sprintf("%.2f → %.2f ms (%+.2f ms)", g.TTFTP99MS, h.TTFTP99MS, rep.AddedTTFTMS)},
		{Target: "every turn measured on both paths", Met: complete && g.Errors == 0 && h.Errors == 0,
			Measured: fmt.Sprintf("%d chats; gateway %d of %d turns (%d failed), host %d of %d (%d failed)",
				rep.Chats, rep.Turns["gateway"], want, g.Errors, rep.Turns["host"], want, h.Errors)},
		{Target: "both paths make the same model request", Met: rep.RequestBytes["gateway"] > 0 && rep.RequestBytes["gateway"] == rep.RequestBytes["host"],
			Measured: fmt.Sprintf("mean %.1f and %.1f bytes", rep.RequestBytes["gateway"], rep.RequestBytes["host"])},
	}
}

// benchHost is steward serve's chat path on loopback for a benchmark: the
// gateway in process (tier-5 and tier-4 route to the upstream as path-h and
// path-d), a real chats.db, usage and audit ledgers, and the host.
type benchHost struct {
	gwURL, hostURL, token string
	audit                 *audit.Ledger
	closers               []func()
}

func (b *benchHost) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// startBenchHost starts a benchHost in a temporary directory against a
// streaming upstream (startStreamingUpstream: chunks tokens spaced by gap),
// whose request sizes it returns. window, when set, is the chats' context
// window in tokens (as context_window declares).
func startBenchHost(ctx context.Context, suite string, chunks int, gap time.Duration, window func() int) (_ *benchHost, _ *requestSizes, err error) {
	b := &benchHost{token: "bench-token-0123456789abcdef"}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	dir, err := os.MkdirTemp("", "steward-bench-"+suite+"-")
	if err != nil {
		return nil, nil, err
	}
	b.closers = append(b.closers, func() { os.RemoveAll(dir) })
	up, upURL, sizes, err := startStreamingUpstream(chunks, gap)
	if err != nil {
		return nil, nil, err
	}
	b.closers = append(b.closers, func() { up.Close() })
	gcfg, err := gateway.ParseConfig([]byte(fmt.Sprintf("providers:\n  up: { base_url: %s }\nmodels:\n  tier-5: [ { provider: up, model: path-h } ]\n  tier-4: [ { provider: up, model: path-d } ]\n", upURL)))
	if err != nil {
		return nil, nil, err
	}
	ledger, err := usage.Open(ctx, filepath.Join(dir, "usage.db"), usage.Options{})
	if err != nil {
		return nil, nil, err
	}
	b.closers = append(b.closers, func() { ledger.Close() })
	gw, err := gateway.New(gateway.Options{Config: gcfg, Ledger: ledger})
	if err != nil {
		return nil, nil, err
	}
	gwURL, stopGW, err := serveOnLoopback(gw.Handler())
	if err != nil {
		return nil, nil, err
	}
	b.gwURL = gwURL
	b.closers = append(b.closers, stopGW)
	store, err := chats.Open(ctx, filepath.Join(dir, "chats.db"))
	if err != nil {
		return nil, nil, err
	}
	b.closers = append(b.closers, func() { store.Close() })
	// The audit ledger as steward serve attaches it: every turn audits the
	// user's and the assistant's messages.
	if b.audit, err = audit.Open(ctx, filepath.Join(dir, "audit.db"), audit.Options{}); err != nil {
		return nil, nil, err
	}
	b.closers = append(b.closers, func() { b.audit.Close() })
	pol, _ := policy.New(policy.Options{})
	h := host.New(host.Options{Token: b.token, Home: dir, Usage: ledger, Chats: host.ManagerOptions{
		Audit: host.LedgerAuditor(b.audit), Store: store, Model: llm.NewClient(llm.ClientOptions{BaseURL: gwURL + "/v1",
			HTTPClient: &http.Client{Transport: gateway.InProcess(gw.Handler())}}), // as steward serve does
		ModelName: "tier-5", Policy: pol, ContextWindow: window,
	}})
	b.closers = append(b.closers, h.Close)
	hostURL, stopHost, err := serveOnLoopback(h.Handler())
	if err != nil {
		return nil, nil, err
	}
	b.hostURL = hostURL
	b.closers = append(b.closers, stopHost)
	return b, sizes, nil
}

func serveOnLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// requestSizes records the size of the requests an upstream received, per
// upstream model (one per benchmark path), and counts summary requests
// (agent.SummaryCompactor's).
type requestSizes struct {
	mu        sync.Mutex
	total     map[string]int
	count     map[string]int
	largest   map[string]int
	summaries int
}

func (s *requestSizes) mean(model string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count[model] == 0 {
		return 0
	}
	return float64(s.total[model]) / float64(s.count[model])
}

// snapshot returns the summary requests so far and the largest request of
// model in bytes.
func (s *requestSizes) snapshot(model string) (summaries, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summaries, s.largest[model]
}

// summaryMarker opens agent.DefaultSummaryPrompt, the system message of
// every summary request.
var summaryMarker = []byte(agent.DefaultSummaryPrompt[:48])

// startStreamingUpstream streams n content chunks spaced by gap, then usage
// and [DONE], recording the size of each request. A summary request is
// answered alike, with a summary, and counted apart.
func startStreamingUpstream(n int, gap time.Duration) (*http.Server, string, *requestSizes, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	sizes := &requestSizes{total: map[string]int{}, count: map[string]int{}, largest: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		json.Unmarshal(body, &req)
		word := "tok"
		sizes.mu.Lock()
		if bytes.Contains(body, summaryMarker) {
			sizes.summaries++
			word = "summary"
		} else {
			sizes.total[req.Model] += len(body)
			sizes.count[req.Model]++
			sizes.largest[req.Model] = max(sizes.largest[req.Model], len(body))
		}
		sizes.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range n {
			fmt.Fprintf(w, "data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s%d \"}}]}\n\n", word, i)
			f.Flush()
			time.Sleep(gap)
		}
		fmt.Fprint(w, "data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":40,\"total_tokens\":70}}\n\ndata: [DONE]\n\n")
		f.Flush()
	})}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/v1", sizes, nil
}

// chatTools are the tools the host offers the model in every chat (the
// benchmark's host has no others).
func chatTools() []llm.Tool {
	spec := host.AskUserSpec()
	return []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters}}}
}

// directTurn asks the gateway what the host's chat would ask: the
// conversation so far, the new message and the chat's tools (its public
// model routes to the same upstream under another name, so the two paths'
// requests are told apart); the answer joins the conversation as it joins
// the chat's session.
func directTurn(ctx context.Context, c *llm.Client, conversation *[]llm.Message, tools []llm.Tool) (ttft, ttlt time.Duration, err error) {
	msgs := append(*conversation, llm.Message{Role: "user", Content: "stream please"})
	var answer strings.Builder
	start := time.Now()
	_, err = c.ChatStream(ctx, &llm.ChatRequest{Model: "tier-4", Messages: msgs, Tools: tools},
		func(ch llm.StreamChunk) error {
			if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				if ttft == 0 {
					ttft = time.Since(start)
				}
				answer.WriteString(ch.Choices[0].Delta.Content)
			}
			return nil
		})
	ttlt = time.Since(start)
	if err == nil {
		*conversation = append(msgs, llm.Message{Role: "assistant", Content: answer.String()})
	}
	return ttft, ttlt, err
}

func openBenchChat(ctx context.Context, base, token, title string) (*websocket.Conn, string, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + token}})
	if err != nil {
		return nil, "", err
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	b, _ := json.Marshal(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, title), Title: title})
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, "", err
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return nil, "", err
		}
		var f protocol.ChatUpdated
		if json.Unmarshal(data, &f) == nil && f.Type == protocol.TypeChatUpdated && f.ID == title {
			return ws, f.Chat.ID, nil
		}
	}
}

// hostTurn sends text and reads this chat's frames until turn.done,
// counting conversation.summarised frames in summarised when it is set.
// Frames of other chats (broadcast to every client) are skipped. Like the
// OpenAI client of the gateway path, it reads every frame into one reused
// buffer and without a cancellation hook per frame (ws.Read would add both),
// so that the two clients cost the machine alike.
func hostTurn(ctx context.Context, ws *websocket.Conn, chatID string, buf *bytes.Buffer, text string, summarised *int) (ttft, ttlt time.Duration, err error) {
	b, _ := json.Marshal(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: text})
	start := time.Now()
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		return 0, 0, err
	}
	rctx := context.WithoutCancel(ctx) // the connection's close ends a read
	for {
		_, r, err := ws.Reader(rctx)
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			return 0, 0, err
		}
		data := buf.Bytes()
		var f struct {
			Type   string `json:"type"`
			ChatID string `json:"chatId"`
			OK     bool   `json:"ok"`
			Error  string `json:"error"`
		}
		json.Unmarshal(data, &f)
		if f.ChatID != chatID {
			continue
		}
		switch f.Type {
		case protocol.TypeAssistantDelta:
			if ttft == 0 {
				ttft = time.Since(start)
			}
		case protocol.TypeAssistantMessage:
			ttlt = time.Since(start) // the last token is in the complete message
		case protocol.TypeSummarised:
			if summarised != nil {
				*summarised++
			}
		case protocol.TypeTurnDone:
			if !f.OK {
				return 0, 0, fmt.Errorf("turn failed: %s", f.Error)
			}
			return ttft, ttlt, nil
		}
	}
}
