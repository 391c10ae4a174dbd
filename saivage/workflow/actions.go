package workflow

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
)

// Action outcomes: done when the operation completed (whatever its exit
// code or findings, which route through typed cases), failed when it could
// not run or its output could not be accepted.
var actionOutcomes = []string{"done", "failed"}

// ShellDefaultTimeout and ShellMaxTimeout bound a shell.run (seconds).
const (
	ShellDefaultTimeout = 600
	ShellMaxTimeout     = 3600
)

// actionContract is one built-in finite operation: its qualified identity,
// contract version, the typed fields of its routable result and its
// configuration check. Operations are compiled explicitly here; there is no
// dynamic plugin service.
type actionContract struct {
	version int
	fields  map[string]DataField
	config  func(p string, cfg map[string]any) error
}

var actionContracts = map[string]actionContract{
	"shell.run": {version: 1, config: shellConfig, fields: map[string]DataField{
		"exit_code": {Type: "integer"}, "timed_out": {Type: "boolean"},
	}},
	"code_quality.javascript_eslint": qualityContract,
	"code_quality.typescript_eslint": qualityContract,
	"code_quality.python_ruff":       qualityContract,
}

var qualityContract = actionContract{version: 1, config: qualityConfig, fields: map[string]DataField{
	"errors": {Type: "integer"}, "findings": {Type: "integer"}, "files": {Type: "integer"},
}}

// reservedNamespaces are action namespaces owned by this build: an unknown
// name inside one is a typo, not a plugin.
var reservedNamespaces = []string{"shell", "code_quality", "saivage"}

// ActionFields returns the routable result fields of a built-in action.
func ActionFields(action string) map[string]DataField {
	return actionContracts[action].fields
}

func (c *compiler) action(p string, e config.Execution) error {
	if e.Agent != "" || e.Prompt != nil || e.CorrectionPrompt != nil || e.DataInputs != nil {
		return fail(p, "action executions take action, config, contract_version and inputs only")
	}
	ns, _, qualified := strings.Cut(e.Action, ".")
	ac, ok := actionContracts[e.Action]
	switch {
	case !qualified:
		return fail(p+".action", "action %q is not qualified (namespace.name, such as shell.run)", e.Action)
	case !ok && slices.Contains(reservedNamespaces, ns):
		return fail(p+".action", "unknown action %q in the reserved namespace %q", e.Action, ns)
	case !ok:
		return fail(p+".action", "unknown action %q: this build compiles shell.run and the code_quality actions, and no plugin declares it", e.Action)
	case e.ContractVersion != ac.version:
		return fail(p+".contract_version", "action %q uses contract version %d", e.Action, ac.version)
	}
	return ac.config(p+".config", e.Config)
}

func shellConfig(p string, cfg map[string]any) error {
	for k := range cfg {
		if !slices.Contains([]string{"script", "argv", "env", "timeout_seconds", "cwd"}, k) {
			return fail(p+"."+k, "shell.run takes script or argv, env, timeout_seconds and cwd")
		}
	}
	script, hasScript := cfg["script"]
	argv, hasArgv := cfg["argv"]
	if hasScript == hasArgv {
		return fail(p, "give exactly one of script or argv")
	}
	if hasScript {
		if s, ok := script.(string); !ok || strings.TrimSpace(s) == "" {
			return fail(p+".script", "must be a non-empty string")
		}
	}
	if hasArgv {
		list, ok := argv.([]any)
		if !ok || len(list) == 0 {
			return fail(p+".argv", "must be a non-empty list of strings")
		}
		for i, a := range list {
			if _, ok := a.(string); !ok {
				return fail(fmt.Sprintf("%s.argv[%d]", p, i), "must be a string")
			}
		}
	}
	if env, ok := cfg["env"]; ok {
		m, ok := env.(map[string]any)
		if !ok {
			return fail(p+".env", "must be a map of NAME: value strings")
		}
		for k, v := range m {
			if _, ok := v.(string); !ok || !validEnvName(k) || strings.HasPrefix(k, "SAIVAGE_") {
				return fail(p+".env."+k, "names use A-Z, 0-9 and '_' (not SAIVAGE_*), values are strings")
			}
		}
	}
	if t, ok := cfg["timeout_seconds"]; ok {
		n, isInt := t.(int)
		if !isInt || n < 1 || n > ShellMaxTimeout {
			return fail(p+".timeout_seconds", "must be an integer from 1 to %d", ShellMaxTimeout)
		}
	}
	if d, ok := cfg["cwd"]; ok {
		s, isStr := d.(string)
		if !isStr || s == "" || !filepath.IsLocal(s) {
			return fail(p+".cwd", "must be a relative directory inside the project")
		}
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func qualityConfig(p string, cfg map[string]any) error {
	for k, v := range cfg {
		if k != "paths" {
			return fail(p+"."+k, "code_quality actions take paths only")
		}
		list, ok := v.([]any)
		if !ok {
			return fail(p+".paths", "must be a list of project-relative paths")
		}
		for i, e := range list {
			if s, ok := e.(string); !ok || !filepath.IsLocal(s) {
				return fail(fmt.Sprintf("%s.paths[%d]", p, i), "must be a relative path inside the project")
			}
		}
	}
	return nil
}

// Hook is a card type's compiled after_activation_commit operation.
type Hook struct {
	Action          string         `json:"action"`
	ContractVersion int            `json:"contract_version"`
	Config          map[string]any `json:"config,omitempty"`
	// Inputs are literal values only (a hook has no predecessor node).
	Inputs   map[string]any `json:"inputs,omitempty"`
	Statuses []string       `json:"statuses"`
}

// Hook returns the card type's advisory hook, if any.
func (t *Table) Hook() (Hook, bool) {
	if t.hook == nil {
		return Hook{}, false
	}
	return *t.hook, true
}
