package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxConfigBytes bounds the configuration file; larger input is refused
// before parsing.
const MaxConfigBytes = 4 << 20

// Error is a configuration error located at a key path such as
// "card_types.task.workflow.nodes.plan.edges.done.target".
type Error struct {
	File string
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// removedKeys names keys of older configuration shapes. They fail like any
// unknown key, with a hint; nothing is converted.
var removedKeys = map[string]string{
	"model":         "old model shape; use model_route naming a models.routes entry",
	"provider":      "old model shape; use model_route naming a models.routes entry",
	"fallback":      "old model shape; list candidates in models.routes",
	"workflow_type": "removed selector; card types select their workflow by type",
	"role":          "removed selector; cards select their workflow by immutable type",
}

// DecodeOptions configures Decode.
type DecodeOptions struct {
	// File names the source in errors.
	File string
	// LookupEnv resolves ${NAME} interpolation; nil means no variable is set.
	LookupEnv func(name string) (string, bool)
}

// Decode parses YAML, interpolates ${NAME} in ordinary string values and
// strictly decodes the result. Unknown, duplicate or mistyped keys fail with
// their key path. It does not fill defaults or validate cross references.
func Decode(data []byte, opts DecodeOptions) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, &Error{File: opts.File, Msg: fmt.Sprintf("file is %d bytes, larger than the %d-byte limit", len(data), MaxConfigBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: opts.File, Msg: "empty configuration"}
		}
		return nil, &Error{File: opts.File, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: opts.File, Line: extra.Line, Msg: "more than one YAML document"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: opts.File, Msg: "empty configuration"}
	}
	root := doc.Content[0]
	d := decoder{file: opts.File, lookup: opts.LookupEnv, interpolated: map[*yaml.Node]bool{}}
	if err := d.interpolate(root, ""); err != nil {
		return nil, err
	}
	var cfg Config
	if err := d.decode(root, reflect.ValueOf(&cfg).Elem(), ""); err != nil {
		return nil, err
	}
	return &cfg, nil
}

type decoder struct {
	file   string
	lookup func(string) (string, bool)
	// interpolated holds the plain scalars ${NAME} was expanded in: a
	// string field takes their text whatever it looks like, so a key made
	// of digits is not refused (and quoted in the error) as an integer.
	interpolated map[*yaml.Node]bool
}

func (d *decoder) errf(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: d.file, Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// interpolate replaces ${NAME} in string scalar values. Keys, block scalars
// (| and >) and values under a "literal" key are literal data and stay as
// written; "$${" writes a literal "${".
func (d *decoder) interpolate(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "literal" {
				continue
			}
			if err := d.interpolate(v, join(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := d.interpolate(c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || !strings.Contains(n.Value, "$") {
			return nil
		}
		if n.ShortTag() != "!!str" {
			return nil
		}
		out, err := expand(n.Value, d.lookup)
		if err != nil {
			return d.errf(n, path, "%v", err)
		}
		n.Value = out
		if n.Style == 0 {
			// A plain scalar is re-resolved so `port: ${PORT}` is an int.
			n.Tag = ""
			d.interpolated[n] = true
		}
	}
	return nil
}

func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in value")
		}
		name := s[i+2 : i+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("invalid environment variable name %q", name)
		}
		var v string
		ok := false
		if lookup != nil {
			v, ok = lookup(name)
		}
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// yamlDecoder is implemented by types with a union shape.
type yamlDecoder interface {
	decodeYAML(d *decoder, n *yaml.Node, path string) error
}

var yamlDecoderType = reflect.TypeFor[yamlDecoder]()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.AliasNode {
		return d.errf(n, path, "YAML aliases are not allowed")
	}
	if v.Kind() == reflect.String && d.interpolated[n] {
		v.SetString(n.Value)
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && v.Kind() != reflect.Interface {
		return d.errf(n, path, "value is null; remove the key or give a value")
	}
	if v.Kind() == reflect.Pointer {
		nv := reflect.New(v.Type().Elem())
		if err := d.decode(n, nv.Elem(), path); err != nil {
			return err
		}
		v.Set(nv)
		return nil
	}
	if v.CanAddr() && v.Addr().Type().Implements(yamlDecoderType) {
		return v.Addr().Interface().(yamlDecoder).decodeYAML(d, n, path)
	}
	switch v.Kind() {
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return d.errf(n, path, "expected a mapping, found %s", describe(n))
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return d.errf(k, path, "keys must be plain strings (no merge keys)")
			}
			if seen[k.Value] {
				return d.errf(k, join(path, k.Value), "duplicate key")
			}
			seen[k.Value] = true
			if k.Value == "" {
				return d.errf(k, path, "empty key")
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, ev, join(path, k.Value)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.Value), ev)
		}
		v.Set(m)
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.errf(n, path, "expected a list, found %s", describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			if err := d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			return d.errf(n, path, "expected a string, found %s", describe(n))
		}
		v.SetString(n.Value)
		return nil
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			return d.errf(n, path, "expected true or false, found %s", describe(n))
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
		return nil
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			return d.errf(n, path, "expected an integer, found %s", describe(n))
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil {
			return d.errf(n, path, "integer %q out of range", n.Value)
		}
		v.SetInt(i)
		return nil
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
			return d.errf(n, path, "expected a number, found %s", describe(n))
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return d.errf(n, path, "number %q is not finite", n.Value)
		}
		v.SetFloat(f)
		return nil
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			return d.errf(n, path, "%v", err)
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	}
	return d.errf(n, path, "internal: unsupported field kind %s", v.Kind())
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.errf(n, path, "expected a mapping, found %s", describe(n))
	}
	fields := map[string]reflect.Value{}
	collectFields(v, fields)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return d.errf(k, path, "keys must be plain strings (no merge keys)")
		}
		kp := join(path, k.Value)
		if seen[k.Value] {
			return d.errf(k, kp, "duplicate key")
		}
		seen[k.Value] = true
		f, ok := fields[k.Value]
		if !ok {
			msg := "unknown key"
			if hint := removedKeys[k.Value]; hint != "" {
				msg += " (" + hint + ")"
			}
			return d.errf(k, kp, "%s", msg)
		}
		if err := d.decode(val, f, kp); err != nil {
			return err
		}
	}
	return nil
}

func collectFields(v reflect.Value, out map[string]reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		if opt == "inline" {
			collectFields(v.Field(i), out)
			continue
		}
		out[name] = v.Field(i)
	}
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("%s %s", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
	}
	return "an unsupported node"
}

// decodeYAML reads promote: "current" or promote: {latest_node: NAME}.
func (p *Promote) decodeYAML(d *decoder, n *yaml.Node, path string) error {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() != "!!str" || n.Value != "current" {
			return d.errf(n, path, `expected "current" or {latest_node: NAME}, found %s`, describe(n))
		}
		*p = Promote{Current: true}
		return nil
	}
	var m struct {
		LatestNode string `yaml:"latest_node"`
	}
	if err := d.decodeStruct(n, reflect.ValueOf(&m).Elem(), path); err != nil {
		return err
	}
	if m.LatestNode == "" {
		return d.errf(n, join(path, "latest_node"), "required")
	}
	*p = Promote{LatestNode: m.LatestNode}
	return nil
}
