// Package yamlstrict decodes configuration YAML strictly and reports what is
// wrong the way a user reads the file: the line, the field's path
// (providers.deepseek.base_url, accounts[0].smtp.port), and for an unknown
// field the fields that are allowed there. Go type names never reach the
// message.
package yamlstrict

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a YAML document.
type Error struct {
	// Line is 1-based; 0 when the problem is not at one place.
	Line int
	// Field is the path of the field, empty for the document as a whole.
	Field string
	// Msg says what is wrong and what is expected.
	Msg string
}

// Error renders "line 3: providers.x.base_ur: unknown field ...". Callers
// prefix the file name.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Decode decodes data into v, which must be a pointer. Every key must name a
// field of the target (an unknown key is an error listing the allowed ones),
// every value must have the field's shape, and the input must be one
// document. Empty input leaves v untouched. Errors are *Error.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("yamlstrict: Decode needs a non-nil pointer, got %T", v)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return &Error{Line: extra.Line, Msg: "a second YAML document (---) is not allowed; keep one document per file"}
	} else if !errors.Is(err, io.EOF) {
		return syntaxError(err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if err := check(root, rv.Type().Elem(), ""); err != nil {
		return err
	}
	if err := root.Decode(v); err != nil {
		// check mirrors yaml's rules, so this is a case it does not
		// know; keep yaml's text without its Go type names.
		return &Error{Line: root.Line, Msg: "cannot decode: " + goTypeNames.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "")}
	}
	return nil
}

var goTypeNames = regexp.MustCompile(` (in|into) (type )?[\w.*\[\]]+`)

func syntaxError(err error) error {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// check walks the node against the type the value is decoded into.
func check(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value leaves the field at its zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return &Error{Line: n.Line, Field: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Struct:
		fields := structFields(t)
		if n.Kind != yaml.MappingNode {
			return &Error{Line: n.Line, Field: path, Msg: fmt.Sprintf("must be a mapping of fields (allowed: %s), got %s", allowed(fields), describe(n))}
		}
		return eachPair(n, path, func(k, val *yaml.Node, field string) error {
			ft, ok := fields.types[k.Value]
			if !ok {
				return &Error{Line: k.Line, Field: field, Msg: fmt.Sprintf("unknown field (allowed: %s)", allowed(fields))}
			}
			return check(val, ft, field)
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return &Error{Line: n.Line, Field: path, Msg: "must be a mapping of names to values, got " + describe(n)}
		}
		return eachPair(n, path, func(k, val *yaml.Node, field string) error {
			if err := check(k, t.Key(), field); err != nil {
				return err
			}
			return check(val, t.Elem(), field)
		})
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return &Error{Line: n.Line, Field: path, Msg: "must be a list, got " + describe(n)}
		}
		for i, c := range n.Content {
			if err := check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Field: path, Msg: fmt.Sprintf("must be %s, got %s", shape(t), describe(n))}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return &Error{Line: n.Line, Field: path, Msg: fmt.Sprintf("must be %s, got %s", shape(t), describe(n))}
	}
	return nil
}

// eachPair calls fn for each key and value of a mapping, with the field's
// path, and refuses a key that appears twice.
func eachPair(n *yaml.Node, path string, fn func(k, val *yaml.Node, field string) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		field := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			return &Error{Line: k.Line, Field: field, Msg: fmt.Sprintf("appears twice (first on line %d)", first)}
		}
		seen[k.Value] = k.Line
		if err := fn(k, val, field); err != nil {
			return err
		}
	}
	return nil
}

// shape names a scalar type as a user writes it.
func shape(t reflect.Type) string {
	if t.PkgPath() == "time" && t.Name() == "Duration" {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number of zero or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	}
	return "a single value"
}

// describe names what the user wrote.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}

type fieldSet struct {
	names []string // in declaration order
	types map[string]reflect.Type
}

func allowed(f fieldSet) string { return strings.Join(f.names, ", ") }

// structFields lists the YAML keys of a struct as yaml.v3 decodes them:
// the tag's name or the lowercased field name, "-" skipped, ",inline"
// structs flattened.
func structFields(t reflect.Type) fieldSet {
	fs := fieldSet{types: map[string]reflect.Type{}}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("yaml")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if strings.Contains(","+opts+",", ",inline,") {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if _, dup := fs.types[name]; !dup {
				fs.names = append(fs.names, name)
			}
			fs.types[name] = f.Type
		}
	}
	walk(t)
	return fs
}
