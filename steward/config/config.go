// Package config resolves Steward's data directory and reads its settings
// from the environment and the optional STEWARD_HOME/config.env file, with
// validation that names the offending variable instead of silently falling
// back to a default.
package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvFileName is the optional KEY=VALUE file inside STEWARD_HOME.
const EnvFileName = "config.env"

// LoadOptions says where to read settings from. The zero value reads the
// process environment on the running platform.
type LoadOptions struct {
	// Getenv replaces os.LookupEnv (tests pass a map).
	Getenv func(string) (string, bool)
	// GOOS replaces runtime.GOOS when resolving the default data directory.
	GOOS string
	// UserHome replaces os.UserHomeDir.
	UserHome string
}

// Config is Steward's effective configuration: the data directory and every
// setting, the environment taking precedence over config.env. Its getters
// collect validation errors; call Err once all settings are read.
type Config struct {
	// Home is the data directory, created with mode 0700.
	Home string
	// Warnings are problems that do not stop start-up, such as an unknown key in config.env.
	Warnings []string

	getenv func(string) (string, bool)
	osEnv  bool // getenv is the process environment
	file   map[string]string
	mu     sync.Mutex // guards errs: the getters run on many goroutines (scheduler checks, status handlers)
	errs   []error
}

// fail records a validation error.
func (c *Config) fail(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

// Load resolves STEWARD_HOME, creates it with mode 0700 and reads its
// config.env. A malformed config.env line is an error naming the file and line.
func Load(opts LoadOptions) (*Config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	home, err := resolveHome(getenv, opts)
	if err != nil {
		return nil, err
	}
	if err := ensurePrivateDir(home); err != nil {
		return nil, err
	}
	c := &Config{Home: home, getenv: getenv, osEnv: opts.Getenv == nil, file: map[string]string{}}
	path := filepath.Join(home, EnvFileName)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if err := c.parseEnvFile(path, f); err != nil {
		return nil, err
	}
	return c, nil
}

func resolveHome(getenv func(string) (string, bool), opts LoadOptions) (string, error) {
	if h, ok := getenv("STEWARD_HOME"); ok && h != "" {
		if !filepath.IsAbs(h) {
			return "", fmt.Errorf("STEWARD_HOME=%q: must be an absolute path", h)
		}
		return filepath.Clean(h), nil
	}
	goos := opts.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	userHome := opts.UserHome
	if userHome == "" {
		var err error
		if userHome, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find the default STEWARD_HOME: %w (set STEWARD_HOME)", err)
		}
	}
	if goos == "darwin" {
		return filepath.Join(userHome, "Library", "Application Support", "Steward"), nil
	}
	if x, ok := getenv("XDG_DATA_HOME"); ok && filepath.IsAbs(x) {
		return filepath.Join(x, "steward"), nil
	}
	return filepath.Join(userHome, ".local", "share", "steward"), nil
}

// ensurePrivateDir creates dir with mode 0700. An existing directory keeps its
// mode: it may be one the user chose and shares on purpose.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", dir, err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("check data directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", dir)
	}
	return nil
}

func (c *Config) parseEnvFile(path string, f *os.File) error {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !validKey(key) {
			// The line is not echoed: it may be a pasted secret.
			return fmt.Errorf("%s:%d: expected KEY=VALUE (a name of letters, digits and _, then =)", path, n)
		}
		v, err := unquote(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, n, key, err)
		}
		if _, known := Lookup(key); !known {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: %s is not a Steward setting%s; it is passed on only where a config file names it",
				path, n, key, suggestion(key)))
		}
		c.file[key] = v
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

func validKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func unquote(v string) (string, error) {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		if v[len(v)-1] != v[0] {
			return "", errors.New("unterminated quote")
		}
		if v[0] == '\'' {
			return v[1 : len(v)-1], nil
		}
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", fmt.Errorf("bad double-quoted value: %w", err)
		}
		return s, nil
	}
	if i := strings.Index(v, " #"); i >= 0 { // trailing comment
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

func suggestion(key string) string {
	best, bestD := "", 3
	for _, v := range Vars {
		if d := editDistance(key, v.Name); d < bestD {
			best, bestD = v.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Lookup returns the raw value of name: the environment first, then config.env.
func (c *Config) Lookup(name string) (string, bool) {
	if v, ok := c.getenv(name); ok {
		return v, true
	}
	v, ok := c.file[name]
	return v, ok
}

// String returns the value of name, or def when it is unset or empty.
func (c *Config) String(name, def string) string {
	if v, ok := c.Lookup(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// Int returns name as an integer in [lo, hi], or def when unset. A value that
// is not a number or is out of range is recorded as an error naming name.
func (c *Config) Int(name string, def, lo, hi int64) int64 {
	v, ok := c.Lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		c.fail(fmt.Errorf("%s=%q: not a whole number", name, v))
		return def
	}
	if n < lo || n > hi {
		c.fail(fmt.Errorf("%s=%d: must be between %d and %d", name, n, lo, hi))
		return def
	}
	return n
}

// Clamp returns name as an integer clamped into [lo, hi]: for settings the
// spec defines as clamped rather than rejected. A non-number is still an error.
func (c *Config) Clamp(name string, def, lo, hi int64) int64 {
	v, ok := c.Lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		c.fail(fmt.Errorf("%s=%q: not a whole number", name, v))
		return def
	}
	if n < lo || n > hi {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s=%d is outside %d–%d; using %d", name, n, lo, hi, max(lo, min(n, hi))))
	}
	return max(lo, min(n, hi))
}

// Millis returns the millisecond setting name as a duration in [lo, hi].
func (c *Config) Millis(name string, def, lo, hi time.Duration) time.Duration {
	return time.Duration(c.Int(name, def.Milliseconds(), lo.Milliseconds(), hi.Milliseconds())) * time.Millisecond
}

// Port returns name as a TCP port number.
func (c *Config) Port(name string, def int) int {
	return int(c.Int(name, int64(def), 1, 65535))
}

// Bool returns name as a boolean (1/0, true/false, yes/no, on/off).
func (c *Config) Bool(name string, def bool) bool {
	v, ok := c.Lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	c.fail(fmt.Errorf("%s=%q: expected 1/0, true/false, yes/no or on/off", name, v))
	return def
}

// URL returns name as an absolute http(s) URL, or def when unset.
func (c *Config) URL(name, def string) string {
	v := c.String(name, "")
	if v == "" {
		return def
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.fail(fmt.Errorf("%s=%q: expected an absolute http:// or https:// URL", name, v))
		return def
	}
	return strings.TrimRight(v, "/")
}

// Path returns name as an absolute path, or def when unset.
func (c *Config) Path(name, def string) string {
	v := c.String(name, "")
	if v == "" {
		return def
	}
	if !filepath.IsAbs(v) {
		c.fail(fmt.Errorf("%s=%q: must be an absolute path", name, v))
		return def
	}
	return filepath.Clean(v)
}

// Err returns every validation error recorded by the getters so far, joined.
func (c *Config) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

// LogWarnings writes the collected warnings to log.
func (c *Config) LogWarnings(log *slog.Logger) {
	for _, w := range c.Warnings {
		log.Warn(w)
	}
}

// Environ returns the KEY=VALUE pairs of the named settings that are set, for
// passing an explicit allow-list to a child process.
func (c *Config) Environ(names ...string) []string {
	var out []string
	for _, n := range names {
		if v, ok := c.Lookup(n); ok {
			out = append(out, n+"="+v)
		}
	}
	return out
}

// Names returns the names starting with prefix that are set in config.env
// or the process environment, for families of settings such as SCHED_*,
// whose misspelt members must be reported rather than ignored.
func (c *Config) Names(prefix string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if strings.HasPrefix(k, prefix) && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for k := range c.file {
		add(k)
	}
	if c.osEnv {
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			add(k)
		}
	}
	return out
}
