package tools

import (
	"context"
	"errors"
	"slices"
)

// SourceGate is the Supervisor's final source-file admission: under the
// native Git workflow a global caller's (the Analyst's, internal or
// external) write, edit and apply_patch hand it every destination, each
// resolved through its longest existing ancestor, synchronously before any
// mkdir, read-for-edit or write. A non-nil error refuses the whole call and
// is shown to the caller as is; nothing was changed.
type SourceGate func(ctx context.Context, paths []string) error

// fileWriters are the tools whose effects the source gate admits.
var fileWriters = []string{"write", "edit", "apply_patch"}

// ErrNoSourceGate refuses binding a global caller's file writers under the
// native Git workflow without the Supervisor's admission gate.
var ErrNoSourceGate = errors.New("the native Git workflow is on (git_workflow.enabled: true), so a global agent's write, edit and apply_patch need the Supervisor's source-file admission gate, and none was composed")

// requireSourceGate is the ON construction rule: a global caller holding a
// file writer must carry the gate.
func requireSourceGate(names []string, env *Env) error {
	if !env.Config.GitOn() || !env.Caller.Global() || env.SourceGate != nil {
		return nil
	}
	for _, n := range names {
		if slices.Contains(fileWriters, n) {
			return ErrNoSourceGate
		}
	}
	return nil
}

// admitFiles passes the resolved destinations of one tool call to the
// source gate, if any; absolute paths as writePath admitted them.
func (e *Env) admitFiles(ctx context.Context, paths ...string) error {
	if e.SourceGate == nil {
		return nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = resolved(p)
	}
	return e.SourceGate(ctx, out)
}
