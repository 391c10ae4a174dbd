package mcpbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxConfigSize bounds the size of an mcp.json file; anything larger is
// refused rather than parsed.
const MaxConfigSize = 1 << 20

// maxServerNameLen keeps mcp__<server>__ short enough that every tool still
// has room for a readable name inside the 64-character function-name limit.
const maxServerNameLen = 32

// ServerConfig describes one MCP server: a program spoken to over stdio
// (Command) or a streamable HTTP endpoint (URL). Exactly one of the two is
// set. Env and Headers usually hold credentials, so they are left out of any
// JSON rendering of the struct.
type ServerConfig struct {
	// Name identifies the server; its tools are named mcp__<Name>__<tool>.
	Name string `json:"name"`

	// Command is the program to run (looked up in PATH when it has no
	// slash); Args are its arguments.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is added to the bridge's allow-listed base environment for this
	// server only.
	Env map[string]string `json:"-"`
	// Dir is the working directory of the process; empty means the host's.
	Dir string `json:"cwd,omitempty"`
	// Roots are absolute directories offered to a stdio server as its MCP
	// roots: the client then declares the roots capability and answers
	// roots/list with their file:// URIs. HTTP servers are never offered
	// roots; empty offers none.
	Roots []string `json:"roots,omitempty"`

	// URL is a streamable HTTP endpoint; Headers are sent with every request
	// (typically Authorization).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"-"`

	// Server is an MCP server running inside the host process, spoken to
	// in memory (set in code only, never from mcp.json): a connector that
	// shares its state with the rest of the host, such as the trains
	// service the watch adapter also reads, so there is one instance.
	Server *mcp.Server `json:"-"`
}

// Transport names how the bridge talks to the server: "stdio", "http" or
// "in-process".
func (c ServerConfig) Transport() string {
	if c.URL != "" {
		return "http"
	}
	if c.Server != nil {
		return "in-process"
	}
	return "stdio"
}

// ConfigError is a problem with one server's configuration, naming the server
// and, when it is about one field, the field as spelled in mcp.json.
type ConfigError struct {
	Server string // empty when the problem is with the file as a whole
	Field  string // empty when the problem is with the server as a whole
	Msg    string
	Line   int // of the server's or field's key; 0 when not known
}

// Error renders the problem as `line 3: server "x": field "y": message`.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Server != "" {
		fmt.Fprintf(&b, "server %q: ", e.Server)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads an mcp.json file in the common mcpServers format:
//
//	{"mcpServers": {
//	  "files":  {"command": "npx", "args": ["-y", "some-server"], "env": {"KEY": "value"}},
//	  "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}}
//	}}
//
// Servers come back in file order; ones marked "disabled": true are left out.
// A missing file means no servers. Any unknown field, wrong type or invalid
// value is an error naming the server and field.
func LoadConfig(path string) ([]ServerConfig, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MCP config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read MCP config %s: %w", path, err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("MCP config %s: larger than %d bytes", path, MaxConfigSize)
	}
	servers, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("MCP config %s: %w", path, err)
	}
	return servers, nil
}

// ParseConfig parses the contents of an mcp.json file; see LoadConfig.
func ParseConfig(data []byte) ([]ServerConfig, error) {
	servers, err := parseConfig(data)
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Line == 0 {
		ce.Line = ce.locate(data)
	}
	return servers, err
}

// locate finds the line of the key the error is about: the field inside
// its server's entry under "mcpServers", or the server. A key is its quoted
// name followed by a colon; 0 when there is none.
func (e *ConfigError) locate(data []byte) int {
	keyAt := func(from int, key string) int {
		if from < 0 || key == "" {
			return from
		}
		name, _ := json.Marshal(key)
		loc := regexp.MustCompile(regexp.QuoteMeta(string(name)) + `\s*:`).FindIndex(data[from:])
		if loc == nil {
			return -1
		}
		return from + loc[0]
	}
	if e.Server == "" && e.Field == "" {
		return 0
	}
	at := keyAt(keyAt(0, "mcpServers"), e.Server)
	if e.Server != "" {
		at = keyAt(at, e.Field)
	}
	if at < 0 {
		return 0
	}
	return 1 + bytes.Count(data[:at], []byte("\n"))
}

func parseConfig(data []byte) ([]ServerConfig, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Msg: `file is empty; expected {"mcpServers": {...}}`}
	}
	top, err := decodeObject(data)
	if err != nil {
		return nil, &ConfigError{Msg: "not a JSON object: " + err.Error()}
	}
	var rawServers json.RawMessage
	for _, m := range top {
		if m.key != "mcpServers" {
			return nil, &ConfigError{Msg: fmt.Sprintf("unknown top-level field %q (only \"mcpServers\" is allowed)", m.key)}
		}
		rawServers = m.value
	}
	if rawServers == nil {
		return nil, &ConfigError{Msg: `missing "mcpServers" object`}
	}
	members, err := decodeObject(rawServers)
	if err != nil {
		return nil, &ConfigError{Field: "mcpServers", Msg: "must be an object mapping server names to settings: " + err.Error()}
	}
	var servers []ServerConfig
	for _, m := range members {
		cfg, disabled, err := parseServer(m.key, m.value)
		if err != nil {
			return nil, err
		}
		if !disabled {
			servers = append(servers, cfg)
		}
	}
	return servers, nil
}

// parseServer decodes one entry of mcpServers, field by field, so every
// error can say which field is wrong.
func parseServer(name string, raw json.RawMessage) (cfg ServerConfig, disabled bool, err error) {
	cfg.Name = name
	if err := validateName(name); err != nil {
		return cfg, false, err
	}
	fields, err := decodeObject(raw)
	if err != nil {
		return cfg, false, &ConfigError{Server: name, Msg: "settings must be an object: " + err.Error()}
	}
	fail := func(field, msg string) (ServerConfig, bool, error) {
		return cfg, false, &ConfigError{Server: name, Field: field, Msg: msg}
	}
	var typ string
	for _, f := range fields {
		var ok bool
		switch f.key {
		case "command":
			ok = decodeTyped(f.value, '"', &cfg.Command)
		case "args":
			ok = decodeTyped(f.value, '[', &cfg.Args)
		case "env":
			ok = decodeTyped(f.value, '{', &cfg.Env)
		case "cwd":
			ok = decodeTyped(f.value, '"', &cfg.Dir)
		case "url":
			ok = decodeTyped(f.value, '"', &cfg.URL)
		case "headers":
			ok = decodeTyped(f.value, '{', &cfg.Headers)
		case "type":
			ok = decodeTyped(f.value, '"', &typ)
		case "disabled":
			ok = decodeTyped(f.value, 't', &disabled) || decodeTyped(f.value, 'f', &disabled)
		default:
			return fail(f.key, `unknown field (allowed: command, args, env, cwd, url, headers, type, disabled)`)
		}
		if !ok {
			return fail(f.key, "must be "+fieldShape[f.key])
		}
	}
	switch typ {
	case "":
	case "stdio":
		if cfg.Command == "" {
			return fail("command", `is required when "type" is "stdio"`)
		}
	case "http", "streamable-http", "streamableHttp":
		if cfg.URL == "" {
			return fail("url", fmt.Sprintf("is required when \"type\" is %q", typ))
		}
	case "sse":
		return fail("type", `the legacy SSE transport is not supported; use the server's streamable HTTP endpoint ("type": "http")`)
	default:
		return fail("type", fmt.Sprintf("unknown transport %q (use \"stdio\" or \"http\")", typ))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, false, err
	}
	return cfg, disabled, nil
}

var fieldShape = map[string]string{
	"command":  "a string",
	"args":     "an array of strings",
	"env":      "an object of string values",
	"cwd":      "a string",
	"url":      "a string",
	"headers":  "an object of string values",
	"type":     "a string",
	"disabled": "true or false",
}

// decodeTyped decodes raw into v only when raw starts with the expected JSON
// delimiter, so null and values of another type are refused instead of being
// silently zeroed.
func decodeTyped(raw json.RawMessage, first byte, v any) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != first {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}

// Validate checks a server configuration, whether it came from mcp.json or
// was built in code. Its errors are *ConfigError values.
func (c ServerConfig) Validate() error {
	if err := validateName(c.Name); err != nil {
		return err
	}
	fail := func(field, msg string) error { return &ConfigError{Server: c.Name, Field: field, Msg: msg} }
	switch {
	case c.Server != nil && (c.Command != "" || c.URL != ""):
		return &ConfigError{Server: c.Name, Msg: "an in-process server has no command or url"}
	case c.Server != nil:
		return nil
	case c.Command == "" && c.URL == "":
		return &ConfigError{Server: c.Name, Msg: `needs either "command" (a program spoken to over stdio) or "url" (a streamable HTTP endpoint)`}
	case c.Command != "" && c.URL != "":
		return &ConfigError{Server: c.Name, Msg: `has both "command" and "url"; a server uses one transport`}
	}
	if c.URL != "" && len(c.Roots) > 0 {
		return fail("roots", "are offered to stdio servers only; an HTTP server gets no roots")
	}
	for _, r := range c.Roots {
		if !filepath.IsAbs(r) {
			return fail("roots", fmt.Sprintf("%q is not an absolute directory", r))
		}
	}
	if c.Command != "" {
		if strings.TrimSpace(c.Command) != c.Command {
			return fail("command", "has leading or trailing spaces")
		}
		if strings.ContainsRune(c.Command, 0) {
			return fail("command", "contains a NUL byte")
		}
		for i, a := range c.Args {
			if strings.ContainsRune(a, 0) {
				return fail("args", fmt.Sprintf("argument %d contains a NUL byte", i))
			}
		}
		for _, k := range sortedKeys(c.Env) {
			if !validEnvName(k) {
				return fail("env", fmt.Sprintf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", k))
			}
			if strings.ContainsRune(c.Env[k], 0) {
				return fail("env", fmt.Sprintf("value of %s contains a NUL byte", k))
			}
		}
		if c.Dir != "" && !filepath.IsAbs(c.Dir) {
			return fail("cwd", "must be an absolute path")
		}
		if len(c.Headers) > 0 {
			return fail("headers", `only applies to "url" servers`)
		}
		return nil
	}
	switch {
	case len(c.Args) > 0:
		return fail("args", `only applies to "command" servers`)
	case len(c.Env) > 0:
		return fail("env", `only applies to "command" servers`)
	case c.Dir != "":
		return fail("cwd", `only applies to "command" servers`)
	}
	if err := validateURL(c.URL); err != nil {
		return fail("url", err.Error())
	}
	for _, k := range sortedKeys(c.Headers) {
		if !validHeaderName(k) {
			return fail("headers", fmt.Sprintf("%q is not a valid HTTP header name", k))
		}
		if reservedHeaders[strings.ToLower(k)] {
			return fail("headers", fmt.Sprintf("%s is set by the MCP transport itself", k))
		}
		if strings.ContainsAny(c.Headers[k], "\r\n\x00") {
			return fail("headers", fmt.Sprintf("value of %s contains a line break or NUL byte", k))
		}
	}
	return nil
}

// reservedHeaders are managed by the HTTP client or the streamable transport;
// letting mcp.json override them would break the protocol.
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "accept": true,
	"connection": true, "transfer-encoding": true, "mcp-session-id": true,
	"mcp-protocol-version": true, "last-event-id": true,
}

func validateName(name string) error {
	fail := func(msg string) error { return &ConfigError{Server: name, Msg: "invalid server name: " + msg} }
	switch {
	case name == "":
		return &ConfigError{Msg: "a server has an empty name"}
	case len(name) > maxServerNameLen:
		return fail(fmt.Sprintf("longer than %d characters", maxServerNameLen))
	case strings.Contains(name, "__") || name[0] == '_' || name[len(name)-1] == '_':
		// "__" separates server and tool in mcp__<server>__<tool>; allowing it
		// (or an edge underscore) in the name would make the split, and so
		// policy prefixes, ambiguous.
		return fail(`must not contain "__" or start or end with "_"`)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fail("use only letters, digits, '-' and '_'")
		}
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// validHeaderName accepts an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// validateURL accepts https anywhere and plain http only on loopback, so
// headers carrying credentials never cross a network unencrypted.
func validateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must start with https:// (or http:// for a loopback address)")
	}
	if u.Hostname() == "" {
		return errors.New("has no host")
	}
	if u.User != nil {
		return errors.New(`must not contain credentials; put them in "headers"`)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return errors.New("plain http is allowed only for loopback addresses; use https")
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// member is one key/value pair of a JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

// decodeObject splits a JSON object into its members, keeping their order and
// refusing duplicate keys (which encoding/json would silently collapse) and
// trailing data.
func decodeObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxMsg(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("expected an object")
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxMsg(err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("invalid JSON: object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxMsg(err)
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		out = append(out, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxMsg(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the object")
	}
	return out, nil
}

// syntaxMsg turns a decoder error into a message with the byte offset where
// there is one.
func syntaxMsg(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
