package voice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/agentstack/agentstack/steward/protocol"
)

// Command is a spoken answer to an approval prompt.
type Command int

// Spoken commands: exactly the localized words, nothing else.
const (
	Ambiguous Command = iota
	Approve
	Reject
	Repeat
)

// maxRepeats bounds how often a user may ask for the prompt again.
const maxRepeats = 3

type words struct {
	approve, reject, repeat string
	title, opening          string
	control, recovery       string
	redial                  string
	prompt, retry           string
}

// vocab is the host's own wording per language: the model writes none of it.
var vocab = map[string]words{
	"en": {
		approve: "approve", reject: "reject", repeat: "repeat",
		title:   "Voice call",
		opening: "Hi, it's Steward.",
		control: "[Host control turn: voice call] Call the user now with %s, opening with %s. Then talk with the user " +
			"through %s, one short spoken reply at a time, using your tools as in chat. End the call with %s when the user is done.",
		recovery: "[Host control turn: voice call recovery] The previous call was interrupted. Call the user again with %s " +
			"and ask what they last heard; do not assume your last reply arrived, and never repeat an action or an approval " +
			"without asking again. Continue through %s and end with %s.",
		redial: "[Host control turn: voice call retry] The call did not reach the phone network; nothing was said yet. " +
			"Call the user again with %s, continue through %s and end with %s.",
		prompt: "Approval needed. Steward wants to run %s with %s. Say approve, reject or repeat.",
		retry:  "Please say only approve, reject or repeat.",
	},
	"it": {
		approve: "approva", reject: "rifiuta", repeat: "ripeti",
		title:   "Chiamata vocale",
		opening: "Ciao, sono Steward.",
		control: "[Turno di controllo dell'host: chiamata vocale] Chiama ora l'utente con %s, aprendo con %s. Poi parla con " +
			"l'utente tramite %s, una breve risposta parlata alla volta, usando i tuoi strumenti come in chat. Chiudi con %s.",
		recovery: "[Turno di controllo dell'host: ripresa della chiamata] La chiamata precedente si è interrotta. Richiama " +
			"l'utente con %s e chiedi che cosa ha sentito per ultimo; non ripetere azioni o approvazioni senza chiedere di " +
			"nuovo. Continua con %s e chiudi con %s.",
		redial: "[Turno di controllo dell'host: nuovo tentativo] La chiamata non ha raggiunto la rete telefonica; non è stato " +
			"detto ancora nulla. Richiama l'utente con %s, continua con %s e chiudi con %s.",
		prompt: "Serve un'approvazione. Steward vuole eseguire %s con %s. Di' approva, rifiuta o ripeti.",
		retry:  "Di' soltanto approva, rifiuta o ripeti.",
	},
}

// ParseCommand reads a transcription as an approval command in lang: only
// the exact localized word (case and surrounding punctuation aside) counts.
func ParseCommand(lang, text string) Command {
	v, ok := vocab[lang]
	if !ok {
		v = vocab["en"]
	}
	w := strings.ToLower(strings.TrimFunc(strings.Join(strings.Fields(text), " "), func(r rune) bool {
		return unicode.IsPunct(r) || unicode.IsSpace(r)
	}))
	switch w {
	case v.approve:
		return Approve
	case v.reject:
		return Reject
	case v.repeat:
		return Repeat
	}
	return Ambiguous
}

// serveApprovals answers the chat's approvals by voice while the call's turn
// runs: each pending request once, in arrival order.
func (c *Coordinator) serveApprovals(ctx context.Context, chatID string) {
	handled := map[string]bool{}
	tick := time.NewTicker(approvalPoll)
	defer tick.Stop()
	lastPhase := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pending := c.opts.Runner.PendingApprovals(chatID)
		sort.Slice(pending, func(i, j int) bool { return pending[i].ApprovalID < pending[j].ApprovalID })
		for _, req := range pending {
			if !handled[req.ApprovalID] {
				handled[req.ApprovalID] = true
				c.askApproval(ctx, req)
			}
		}
		if time.Since(lastPhase) >= time.Second {
			lastPhase = time.Now()
			if text, _, err := c.opts.Transport.Call(ctx, ToolCallStatus, map[string]any{}); err == nil {
				st := parseOutcome(text)
				c.latch(st)
				if st.Phase != "" {
					c.setPhase(st.Phase)
				}
			}
		}
	}
}

// askApproval reads the exact request to the user and resolves it at most
// once: approve, reject, repeat (the same prompt again), or one constrained
// retry after an ambiguous answer, then denial. There is no approve-with-edit
// by voice.
func (c *Coordinator) askApproval(ctx context.Context, req protocol.ApprovalRequest) {
	v := vocab[c.opts.Language]
	prompt := fmt.Sprintf(v.prompt, req.Tool, spokenArgs(req.Tool, req.Args))
	start := time.Now()
	say, repeats, ambiguous := prompt, 0, 0
	decision, why := protocol.DecisionDeny, ""
	for why == "" {
		c.setPhase(PhaseSpeaking)
		heard, isErr, err := c.opts.Transport.Call(ctx, ToolConverse, map[string]any{"text": say})
		c.setPhase(PhaseProcessing)
		if err != nil || isErr {
			why = "the call could not carry the approval: " + firstLine(heard+errText(err))
			break
		}
		switch ParseCommand(c.opts.Language, heard) {
		case Approve:
			decision, why = protocol.DecisionApprove, "approved by voice"
		case Reject:
			why = "rejected by voice"
		case Repeat:
			if repeats++; repeats > maxRepeats {
				why = "repeated too often"
			}
			say = prompt
		default:
			if ambiguous++; ambiguous >= 2 {
				why = "no clear answer after one retry"
			}
			say = v.retry + " " + prompt
		}
	}
	// The agent's turn resumes with the outcome and speaks next itself.
	err := c.opts.Runner.Respond(protocol.ApprovalRespond{ApprovalID: req.ApprovalID, Decision: decision, Note: why})
	c.recordUsage(req.ChatID, "voice.approval", time.Since(start), err == nil, why)
	c.audit("voice.approval", req.ChatID, why, map[string]any{"approvalId": req.ApprovalID, "tool": req.Tool, "prompt": prompt,
		"repeats": repeats, "ambiguous": ambiguous, "decision": decision, "ms": time.Since(start).Milliseconds(),
		"resolveError": errText(err)})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// spokenArgs renders arguments for the ear: canonical JSON (sorted keys) for
// ordinary tools, and for a watch a flat readable list instead of nested JSON.
func spokenArgs(tool string, args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	if tool != "create_agent_watch" {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(v) // maps encode with sorted keys: canonical
		return strings.TrimSpace(b.String())
	}
	var parts []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(strings.TrimPrefix(prefix+" "+k, " "), x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s %d", prefix, i+1), e)
			}
		default:
			parts = append(parts, fmt.Sprintf("%s: %v", prefix, x))
		}
	}
	walk("", v)
	return strings.Join(parts, "; ")
}
