package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/saivage/quality"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// MaxActionOutput is the largest command-stdout capture accepted into an
// output record; one more byte is read to detect overflow.
const MaxActionOutput = 1 << 20

// operation is one finite action invocation: a node's or a hook's.
type operation struct {
	card, node string // node is "" for a hook
	action     string
	version    int
	config     map[string]any
	inputs     map[string]any
	invocation string
	dir        string // the invocation's artifact directory
}

// opResult is what an operation completed with: the routable values, the
// text offered to an output record, and the artifacts it published.
type opResult struct {
	data    map[string]any
	summary string
	output  []byte // command stdout or the returned report text
	// outputKind is records.OutputCommandStdout or OutputReturnedText.
	outputKind string
	outputErr  error // why output cannot be accepted (too large, unreadable)
	artifacts  []string
}

// runAction executes an action node: gates, inputs, the operation, output
// record acceptance, evidence rows and routing.
func (rt *Runtime) runAction(ctx context.Context, act *activation, name string, nd workflow.Node) (nodeResult, error) {
	ne := &nodeExec{rt: rt, act: act, nd: nd}
	if reason, err := ne.readGates(ctx); err != nil || reason != "" {
		return nodeResult{terminal: "BLOCKED", reason: reason}, err
	}
	fail := func(reason string) (nodeResult, error) {
		rt.logEvent("node_failed", map[string]any{"card": act.card.ID, "node": name, "reason": reason})
		return nodeResult{terminal: "FAILED", reason: reason}, nil
	}
	var outRef records.Ref
	var baseline string
	if nd.OutputRecord != "" {
		outRef = ne.recordRef(nd.OutputRecord)
		h, err := rt.p.Cards.Records().ReadHead(outRef)
		if err != nil {
			return nodeResult{}, err
		}
		if h.Draft != nil {
			return fail(fmt.Sprintf("output record %s has an open draft; an action accepts output only into a record without drafts", nd.OutputRecord))
		}
		baseline = h.HeadUUID
	}
	inputs, err := nd.ResolveInputs(act.facts())
	if err != nil {
		return fail(err.Error())
	}
	op := operation{card: act.card.ID, node: name, action: nd.Action, version: nd.ContractVersion, config: nd.ActionConfig,
		inputs: inputs, invocation: state.NewUUID()}
	rt.logEvent("node_entered", map[string]any{"card": act.card.ID, "node": name, "action": nd.Action, "ordinal": act.ordinal})
	res, err := rt.invokeOperation(ctx, op)
	if ctx.Err() != nil {
		return nodeResult{}, context.Cause(ctx)
	}
	outcome := "done"
	if err != nil {
		outcome, res.summary = "failed", err.Error()
	}
	if outcome == "done" && nd.OutputRecord != "" {
		text, err := acceptableOutput(res.output, res.outputErr)
		if err == nil {
			h, herr := rt.p.Cards.Records().ReadHead(outRef)
			switch {
			case herr != nil:
				return nodeResult{}, herr
			case h.HeadUUID != baseline || h.Draft != nil:
				err = fmt.Errorf("output record %s changed while the action ran", nd.OutputRecord)
			default:
				rt.recordMu.Lock()
				_, err = rt.p.Cards.Records().AcceptActionOutput(outRef, text, records.ActionOutput{Node: name,
					Operation: nd.Action, ContractVersion: nd.ContractVersion, Invocation: op.invocation, Output: res.outputKind})
				rt.recordMu.Unlock()
				if err != nil {
					return nodeResult{}, err
				}
				rt.hint("record", act.card.ID+"/"+nd.OutputRecord)
			}
		}
		if err != nil {
			outcome, res.summary = "failed", "output not accepted: "+err.Error()
		}
	}
	ar := acceptedResult{Node: name, Outcome: outcome, Summary: res.summary, Data: res.data}
	r, err := act.tbl.Route(name, workflow.Result{Outcome: outcome, Data: res.data})
	if err != nil {
		return fail(fmt.Sprintf("action node %s has no route for outcome %s (%s)", name, outcome, res.summary))
	}
	tr := r.Transition
	act.accepted[name] = ar
	out := nodeResult{tr: tr, result: &ar}
	if d := tr.Destination(); d.Terminal != "" {
		out.terminal = d.Terminal
		if d.Terminal != "DONE" {
			out.reason = res.summary
		}
	} else {
		out.next = d.Node
		out.prompts = []*workflow.Prompt{tr.Prompt}
	}
	rt.logEvent("result_accepted", map[string]any{"card": act.card.ID, "node": name, "outcome": outcome, "data": res.data,
		"invocation": op.invocation, "next": out.next, "terminal": out.terminal})
	return out, nil
}

// acceptableOutput admits captured bytes as record text: at most
// MaxActionOutput bytes of strict UTF-8 (BOM, CRLF and trailing bytes kept),
// no NUL, not empty or only whitespace.
func acceptableOutput(b []byte, captureErr error) (string, error) {
	switch {
	case captureErr != nil:
		return "", captureErr
	case len(b) > MaxActionOutput:
		return "", fmt.Errorf("the output is over %d bytes", MaxActionOutput)
	case !utf8.Valid(b):
		return "", errors.New("the output is not valid UTF-8")
	case bytes.IndexByte(b, 0) >= 0:
		return "", errors.New("the output contains a NUL byte")
	case len(bytes.TrimSpace(b)) == 0:
		return "", errors.New("the output is empty")
	}
	return string(b), nil
}

// invokeOperation runs one operation through its finite owner, writing the
// entry/spawn/finish evidence rows and the invocation artifacts under
// .saivage/work/cards/CARD/actions/INVOCATION. A returned error is an
// operation that could not complete (its result is "failed").
func (rt *Runtime) invokeOperation(ctx context.Context, op operation) (opResult, error) {
	op.dir = filepath.Join(rt.p.StateDir, "work", "cards", op.card, "actions", op.invocation)
	if err := os.MkdirAll(op.dir, 0o755); err != nil {
		return opResult{}, fmt.Errorf("action artifacts: %w", err)
	}
	ev := map[string]any{"card": op.card, "action": op.action, "contract_version": op.version, "invocation": op.invocation}
	if op.node != "" {
		ev["node"] = op.node
	} else {
		ev["hook"] = "after_activation_commit"
	}
	rt.logEvent("action_entry", ev)
	started := time.Now()
	var res opResult
	var err error
	switch {
	case op.action == "shell.run":
		res, err = rt.shellRun(ctx, op, ev)
	case strings.HasPrefix(op.action, "code_quality."):
		res, err = rt.qualityRun(ctx, op, ev)
	default:
		err = fmt.Errorf("action %s is not compiled into this build", op.action)
	}
	fin := map[string]any{}
	for k, v := range ev {
		fin[k] = v
	}
	fin["duration_ms"] = time.Since(started).Milliseconds()
	fin["data"] = res.data
	fin["artifacts"] = res.artifacts
	if err != nil {
		fin["error"] = rt.redact(err.Error())
	}
	if ctx.Err() != nil {
		// Cancel-and-settle evidence: the operation was stopped, its
		// process settled, and nothing it produced is accepted.
		fin["cancelled"] = true
		row := map[string]any{"settled": true, "cause": rt.redact(context.Cause(ctx).Error())}
		maps.Copy(row, ev)
		maps.Copy(row, res.data)
		rt.logEvent("action_cancelled", row)
	}
	rt.logEvent("action_finish", fin)
	return res, err
}

// shellRun is shell.run contract 1: /bin/sh -c script or argv, in the
// project (or cwd below it), with the configured env plus SAIVAGE_CARD_ID,
// SAIVAGE_CARD_WORK_ROOT, SAIVAGE_INVOCATION_ID and SAIVAGE_INPUT_<NAME>,
// under timeout_seconds; the process group is killed at the deadline.
func (rt *Runtime) shellRun(ctx context.Context, op operation, ev map[string]any) (opResult, error) {
	var argv []string
	if s, ok := op.config["script"].(string); ok {
		argv = []string{"/bin/sh", "-c", s}
	} else {
		for _, a := range op.config["argv"].([]any) {
			argv = append(argv, a.(string))
		}
	}
	timeout := workflow.ShellDefaultTimeout
	if n, ok := op.config["timeout_seconds"].(int); ok {
		timeout = n
	}
	dir := rt.root()
	if d, ok := op.config["cwd"].(string); ok {
		dir = filepath.Join(dir, d)
	}
	base := os.Environ
	if rt.opts.Environ != nil {
		base = rt.opts.Environ
	}
	env := tools.SanitizedEnv(base())
	workRoot := filepath.Join(rt.p.StateDir, "work", "cards", op.card)
	env = append(env, "SAIVAGE_CARD_ID="+op.card, "SAIVAGE_CARD_WORK_ROOT="+workRoot, "SAIVAGE_INVOCATION_ID="+op.invocation)
	if m, ok := op.config["env"].(map[string]any); ok {
		for _, k := range sortedKeys(m) {
			env = append(env, k+"="+m[k].(string))
		}
	}
	for _, k := range sortedKeys(op.inputs) {
		v, isString := op.inputs[k].(string)
		if !isString {
			b, _ := json.Marshal(op.inputs[k])
			v = string(b)
		}
		env = append(env, "SAIVAGE_INPUT_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+v)
	}
	stdoutPath, stderrPath := filepath.Join(op.dir, "stdout"), filepath.Join(op.dir, "stderr")
	stdout, err := os.Create(stdoutPath)
	if err != nil {
		return opResult{}, err
	}
	defer stdout.Close()
	stderr, err := os.Create(stderrPath)
	if err != nil {
		return opResult{}, err
	}
	defer stderr.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	inv := map[string]any{"action": op.action, "contract_version": op.version, "argv": argv, "cwd": dir,
		"timeout_seconds": timeout, "inputs": op.inputs, "started_at": time.Now().UTC()}
	if err := cmd.Start(); err != nil {
		inv["error"] = err.Error()
		_ = writeJSONFile(filepath.Join(op.dir, "invocation.json"), inv)
		return opResult{artifacts: []string{"invocation.json"}}, fmt.Errorf("start %s: %w", argv[0], err)
	}
	spawn := map[string]any{"pid": cmd.Process.Pid}
	for k, v := range ev {
		spawn[k] = v
	}
	rt.logEvent("action_spawn", spawn)
	waitErr := cmd.Wait()
	timedOut := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	code := cmd.ProcessState.ExitCode()
	inv["finished_at"], inv["exit_code"], inv["timed_out"] = time.Now().UTC(), code, timedOut
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		inv["signal"] = ws.Signal().String()
	}
	if ctx.Err() != nil {
		return settleCancelled(ctx, op, cmd.Process.Pid, inv)
	}
	if waitErr != nil && code < 0 && !timedOut {
		if _, signalled := inv["signal"]; !signalled {
			return opResult{}, fmt.Errorf("run %s: %w", argv[0], waitErr)
		}
	}
	res := opResult{data: map[string]any{"exit_code": float64(code), "timed_out": timedOut},
		artifacts: []string{"invocation.json", "stdout", "stderr"}, outputKind: records.OutputCommandStdout}
	res.output, res.outputErr = readCapture(stdoutPath)
	inv["stdout_bytes"] = len(res.output)
	if err := writeJSONFile(filepath.Join(op.dir, "invocation.json"), inv); err != nil {
		return res, err
	}
	res.summary = fmt.Sprintf("%s exited %d", filepath.Base(argv[0]), code)
	if timedOut {
		res.summary = fmt.Sprintf("%s timed out after %ds", filepath.Base(argv[0]), timeout)
	}
	return res, nil
}

// settleCancelled is cancel-and-settle for a shell.run stopped by Stop or
// cancellation: the process group is killed again (descendants that outlived
// the leader, or a group whose leader had already exited), and the
// invocation artifact records the cancellation. No output is accepted and
// no successor runs: the returned error is the cancellation cause.
func settleCancelled(ctx context.Context, op operation, pid int, inv map[string]any) (opResult, error) {
	groupErr := syscall.Kill(-pid, syscall.SIGKILL)
	cause := context.Cause(ctx)
	inv["cancelled"], inv["cause"] = true, cause.Error()
	data := map[string]any{"pid": pid, "exit_code": inv["exit_code"], "group_signalled": groupErr == nil}
	if sig, ok := inv["signal"]; ok {
		data["signal"] = sig
	}
	res := opResult{data: data, artifacts: []string{"invocation.json", "stdout", "stderr"}}
	if err := writeJSONFile(filepath.Join(op.dir, "invocation.json"), inv); err != nil {
		return res, fmt.Errorf("record the cancelled invocation: %w (cancelled: %w)", err, cause)
	}
	return res, cause
}

// readCapture reads at most MaxActionOutput+1 bytes of a capture file.
func readCapture(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("capture %s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, MaxActionOutput+1))
}

// qualityRun runs a code_quality action: the analyzer's report and exact
// invocation are published as artifacts and the report text is the output.
func (rt *Runtime) qualityRun(ctx context.Context, op operation, ev map[string]any) (opResult, error) {
	analyzer := strings.TrimPrefix(op.action, "code_quality.")
	if rt.opts.Quality == nil {
		return opResult{}, fmt.Errorf("%s is unavailable: no code-quality analyzers are configured (set %s, or %s for Ruff alone)", op.action, EnvQualityModules, quality.EnvRuff)
	}
	var paths []string
	if list, ok := op.config["paths"].([]any); ok {
		for _, p := range list {
			paths = append(paths, p.(string))
		}
	}
	rt.logEvent("action_spawn", ev)
	rep, inv, err := rt.opts.Quality.Run(ctx, analyzer, rt.root(), paths)
	_ = writeJSONFile(filepath.Join(op.dir, "invocation.json"), inv)
	if err != nil {
		return opResult{artifacts: []string{"invocation.json"}}, err
	}
	if err := writeJSONFile(filepath.Join(op.dir, "report.json"), rep); err != nil {
		return opResult{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%s config): %d files, %d findings, %d errors\n", rep.Tool, rep.Version, rep.Config, rep.Files, len(rep.Findings), rep.Errors())
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "%s:%d:%d %s %s %s\n", f.Path, f.Line, f.Column, f.Severity, f.Rule, f.Message)
	}
	return opResult{
		data:    map[string]any{"errors": float64(rep.Errors()), "findings": float64(len(rep.Findings)), "files": float64(rep.Files)},
		summary: fmt.Sprintf("%s: %d findings (%d errors) in %d files", op.action, len(rep.Findings), rep.Errors(), rep.Files),
		output:  []byte(b.String()), outputKind: records.OutputReturnedText, artifacts: []string{"invocation.json", "report.json"},
	}, nil
}

// runHook runs the card type's after_activation_commit hook after a natural
// outcome publication. Its failure is logged and never changes the outcome.
func (rt *Runtime) runHook(ctx context.Context, act *activation, status string) {
	h, ok := act.tbl.Hook()
	if !ok || !slices.Contains(h.Statuses, status) || ctx.Err() != nil {
		return // no hook, another status, or a halt (Stop dispatches no hook)
	}
	op := operation{card: act.card.ID, action: h.Action, version: h.ContractVersion, config: h.Config, inputs: h.Inputs, invocation: state.NewUUID()}
	res, err := rt.invokeOperation(ctx, op)
	ev := map[string]any{"card": act.card.ID, "status": status, "invocation": op.invocation, "data": res.data, "ok": err == nil}
	if err != nil {
		ev["error"] = rt.redact(err.Error())
	} else if code, _ := res.data["exit_code"].(float64); code != 0 {
		ev["ok"] = false
	}
	rt.logEvent("hook_finished", ev)
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
