package config

import "fmt"

// EnvAnalystMode selects the Analyst mode when saivage start gets no
// --analyst-mode flag.
const EnvAnalystMode = "SAIVAGE_ANALYST_MODE"

// AnalystMode says who may drive the configured Analyst's operations: the
// internal model session (POST /api/chat), an external MCP client, or both.
// It is chosen once at start and frozen for the server's lifetime.
type AnalystMode string

// Analyst modes.
const (
	AnalystInternal AnalystMode = "internal"
	AnalystExternal AnalystMode = "external"
	AnalystBoth     AnalystMode = "both"
)

// Internal reports whether internal submissions (the Analyst model) are
// admitted.
func (m AnalystMode) Internal() bool { return m == AnalystInternal || m == AnalystBoth }

// External reports whether the external MCP endpoint is served.
func (m AnalystMode) External() bool { return m == AnalystExternal || m == AnalystBoth }

// ResolveAnalystMode selects the mode: flag, else SAIVAGE_ANALYST_MODE, else
// internal. Any other value is refused with the accepted ones.
func ResolveAnalystMode(flag string, lookupEnv func(string) (string, bool)) (AnalystMode, Source, error) {
	v, src := flag, FromFlag
	if v == "" && lookupEnv != nil {
		if e, ok := lookupEnv(EnvAnalystMode); ok {
			v, src = e, FromEnv
		}
	}
	if v == "" {
		return AnalystInternal, FromDefault, nil
	}
	switch m := AnalystMode(v); m {
	case AnalystInternal, AnalystExternal, AnalystBoth:
		return m, src, nil
	}
	what := "--analyst-mode"
	if src == FromEnv {
		what = EnvAnalystMode
	}
	return "", src, fmt.Errorf("%s %q: must be internal, external or both", what, v)
}
