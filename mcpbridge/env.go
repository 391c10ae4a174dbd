package mcpbridge

import (
	"net/url"
	"sort"
	"strings"
)

// DefaultEnvAllowList names the host variables a server process inherits
// when Options.Environ is nil: what programs (and npx/node) need to find
// themselves, their home, locale, temp dir and CA certificates. Nothing that
// usually holds a credential is on it.
func DefaultEnvAllowList() []string {
	return []string{
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR",
		"LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
		"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	}
}

// AllowedEnv keeps the entries of environ (KEY=VALUE, as os.Environ returns)
// whose names are in allow.
func AllowedEnv(environ, allow []string) []string {
	keep := make(map[string]bool, len(allow))
	for _, k := range allow {
		keep[k] = true
	}
	var out []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && keep[k] {
			out = append(out, kv)
		}
	}
	return out
}

// childEnv is base with the server's own variables layered on top (they win
// over a base entry of the same name), in a deterministic order.
func childEnv(base []string, own map[string]string) []string {
	out := make([]string, 0, len(base)+len(own))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, overridden := own[k]; !overridden {
			out = append(out, kv)
		}
	}
	for _, k := range sortedKeys(own) {
		out = append(out, k+"="+own[k])
	}
	return out
}

// minSecretLen: shorter values ("1", "true", "en") are not worth masking and
// would mangle ordinary text.
const minSecretLen = 8

// secretMasker hides a server's configured env and header values in text the
// bridge logs or reports (stderr lines, error messages): a server that prints
// its own token must not put it in the host's log.
func secretMasker(cfg ServerConfig) func(string) string {
	var secrets []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v)
		}
	}
	for _, v := range cfg.Env {
		// Absolute paths are configuration, not credentials, and hiding them
		// would make "cannot open /x/y" errors useless.
		if !strings.HasPrefix(v, "/") {
			add(v)
		}
	}
	for _, v := range cfg.Headers {
		add(v)
		// "Bearer <token>": also catch the token printed on its own.
		if _, cred, ok := strings.Cut(v, " "); ok {
			add(strings.TrimSpace(cred))
		}
	}
	if u, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" {
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v) // api_key=... style endpoints
			}
		}
	}
	if len(secrets) == 0 {
		return func(s string) string { return s }
	}
	// Longest first, so a value containing another is masked whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
