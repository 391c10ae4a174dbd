package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Constraint kinds of a grant's argument fields.
const (
	ConstraintExact        = "exact"         // the argument is exactly Value
	ConstraintTemplate     = "template"      // the argument is Template rendered from state.*/event.*
	ConstraintOneOf        = "one_of"        // the argument is one of Values
	ConstraintRange        = "range"         // the argument is a number in [Min, Max]
	ConstraintRelativeTime = "relative_time" // the argument is the instant Base + OffsetMinutes
)

// Grant is a rule-scoped authority to use one registered tool unattended.
type Grant struct {
	Tool           string       `json:"tool"`
	MaxInvocations int          `json:"maxInvocations,omitempty"`
	Constraints    *Constraints `json:"constraints,omitempty"`
}

// Constraints restrict a grant's arguments field by field. Fields without a
// constraint are refused unless the capability allows them unconstrained
// and DenyExtraFields is false.
type Constraints struct {
	DenyExtraFields bool                       `json:"denyExtraFields,omitempty"`
	Fields          map[string]FieldConstraint `json:"fields,omitempty"`
}

// FieldConstraint constrains one argument.
type FieldConstraint struct {
	Kind          string   `json:"kind"`
	Value         any      `json:"value,omitempty"`
	Template      string   `json:"template,omitempty"`
	Values        []any    `json:"values,omitempty"`
	Min           *float64 `json:"min,omitempty"`
	Max           *float64 `json:"max,omitempty"`
	Base          string   `json:"base,omitempty"`
	OffsetMinutes float64  `json:"offsetMinutes,omitempty"`
}

// Capability declares a write tool that agent watches may be granted: its
// argument surface, whether every argument must be constrained, how it runs
// and how many times one grant may use it.
// CapabilityVoice is the Mode of a capability that places a phone call.
const CapabilityVoice = "voice"

type Capability struct {
	Tool        string
	Description string
	// Allowed are the argument fields a grant may pass; Required must be
	// present (after constraint filling) on every call.
	Allowed  []string
	Required []string
	// ConstraintsRequired: every passed field needs a constraint.
	ConstraintsRequired bool
	// Mode names how the action runs (e.g. "direct", "journaled",
	// CapabilityVoice); a voice capability's successful call replaces the
	// event's push (Rule.VoiceFallback).
	Mode string
	// MaxInvocations caps a grant's maxInvocations (default 1).
	MaxInvocations int
}

// Registry is the capability registry: only registered tools can be granted.
// Connecting an MCP server never makes its write tools eligible.
type Registry struct {
	mu   sync.RWMutex
	caps map[string]Capability
}

// NewRegistry returns a registry holding caps.
func NewRegistry(caps ...Capability) (*Registry, error) {
	r := &Registry{caps: map[string]Capability{}}
	for _, c := range caps {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a capability.
func (r *Registry) Register(c Capability) error {
	if c.Tool == "" || len(c.Allowed) == 0 && len(c.Required) > 0 {
		return errors.New("a capability needs a tool name and its allowed fields")
	}
	for _, f := range c.Required {
		if !slices.Contains(c.Allowed, f) {
			return fmt.Errorf("capability %s: required field %s is not allowed", c.Tool, f)
		}
	}
	if c.MaxInvocations <= 0 {
		c.MaxInvocations = 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.caps[c.Tool]; dup {
		return fmt.Errorf("capability %s is registered twice", c.Tool)
	}
	r.caps[c.Tool] = c
	return nil
}

// Lookup returns the capability of tool.
func (r *Registry) Lookup(tool string) (Capability, bool) {
	if r == nil {
		return Capability{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.caps[tool]
	return c, ok
}

// Tools lists the registered tool names.
func (r *Registry) Tools() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.caps))
}

var placeholder = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.]+)\s*\}\}`) })

// contextPath accepts only state.* and event.* references.
func contextPath(p string) bool {
	return (strings.HasPrefix(p, "state.") || strings.HasPrefix(p, "event.")) && validPath(p)
}

// validateGrants checks every grant against the registry at creation.
func (r *Registry) validateGrants(rules []Rule) error {
	for _, rule := range rules {
		seen := map[string]bool{}
		for _, g := range rule.Grants {
			where := fmt.Sprintf("rule %q, grant %s", rule.ID, g.Tool)
			c, ok := r.Lookup(g.Tool)
			if !ok {
				have := strings.Join(r.Tools(), ", ")
				if have == "" {
					have = "none yet"
				}
				return fmt.Errorf("%s: this tool is not a registered watch capability (registered: %s)", where, have)
			}
			if seen[g.Tool] {
				return fmt.Errorf("%s: one grant per tool and rule", where)
			}
			seen[g.Tool] = true
			if g.MaxInvocations < 0 || g.MaxInvocations > c.MaxInvocations {
				return fmt.Errorf("%s: maxInvocations must be between 1 and %d", where, c.MaxInvocations)
			}
			var fields map[string]FieldConstraint
			if g.Constraints != nil {
				fields = g.Constraints.Fields
			}
			for _, req := range c.Required {
				if _, ok := fields[req]; !ok && c.ConstraintsRequired {
					return fmt.Errorf("%s: field %s is required and must be constrained", where, req)
				}
			}
			for name, fc := range fields {
				if !slices.Contains(c.Allowed, name) {
					return fmt.Errorf("%s: field %s is not an argument of this capability (allowed: %s)", where, name, strings.Join(c.Allowed, ", "))
				}
				if err := fc.validate(); err != nil {
					return fmt.Errorf("%s, field %s: %w", where, name, err)
				}
			}
		}
	}
	return nil
}

func (fc FieldConstraint) validate() error {
	switch fc.Kind {
	case ConstraintExact:
		if fc.Value == nil {
			return errors.New("exact needs a value")
		}
	case ConstraintTemplate:
		if strings.TrimSpace(fc.Template) == "" || len(fc.Template) > 2000 {
			return errors.New("template needs a text of at most 2000 characters")
		}
		rest := placeholder().ReplaceAllString(fc.Template, "")
		if strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return errors.New("template placeholders must look like {{state.field}} or {{event.field}}")
		}
		for _, m := range placeholder().FindAllStringSubmatch(fc.Template, -1) {
			if !contextPath(m[1]) {
				return fmt.Errorf("template placeholder %q must start with state. or event.", m[1])
			}
		}
	case ConstraintOneOf:
		if len(fc.Values) == 0 || len(fc.Values) > 50 {
			return errors.New("one_of needs 1–50 values")
		}
	case ConstraintRange:
		if fc.Min == nil && fc.Max == nil || fc.Min != nil && fc.Max != nil && *fc.Min > *fc.Max {
			return errors.New("range needs min and/or max with min ≤ max")
		}
	case ConstraintRelativeTime:
		if !contextPath(fc.Base) {
			return errors.New("relative_time base must be a state.* or event.* timestamp")
		}
		if fc.OffsetMinutes < -7*24*60 || fc.OffsetMinutes > 7*24*60 {
			return errors.New("relative_time offsetMinutes must be within a week")
		}
	default:
		return fmt.Errorf("unknown constraint kind %q (exact, template, one_of, range, relative_time)", fc.Kind)
	}
	return nil
}

// actionContext is what templates and relative times resolve against: the
// watched state and the event data.
type actionContext struct {
	State any `json:"state"`
	Event any `json:"event"`
}

func (c actionContext) doc() map[string]any {
	return map[string]any{"state": c.State, "event": c.Event}
}

// checkArgs applies a grant to proposed arguments: extra fields are denied,
// exact/template/relative_time fields are filled or must match, one_of and
// range fields must fit, required fields must be present. It returns the
// frozen arguments the tool runs with.
func checkArgs(c Capability, g Grant, args json.RawMessage, ctx actionContext) (json.RawMessage, error) {
	var in map[string]any
	if len(args) == 0 || string(args) == "null" {
		in = map[string]any{}
	} else if err := json.Unmarshal(args, &in); err != nil || in == nil {
		return nil, errors.New("the arguments are not a JSON object")
	}
	var fields map[string]FieldConstraint
	denyExtra := c.ConstraintsRequired
	if g.Constraints != nil {
		fields = g.Constraints.Fields
		denyExtra = denyExtra || g.Constraints.DenyExtraFields
	}
	for name := range in {
		if _, constrained := fields[name]; constrained {
			continue
		}
		if denyExtra || !slices.Contains(c.Allowed, name) {
			return nil, fmt.Errorf("field %s is not allowed by this grant", name)
		}
	}
	doc := ctx.doc()
	names := slices.Sorted(maps.Keys(fields))
	for _, name := range names {
		fc := fields[name]
		got, present := in[name]
		switch fc.Kind {
		case ConstraintExact, ConstraintTemplate, ConstraintRelativeTime:
			want, err := fc.resolve(doc)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			if present && !sameValue(fc.Kind, got, want) {
				return nil, fmt.Errorf("field %s must be %s", name, mustJSON(want))
			}
			in[name] = want
		case ConstraintOneOf:
			if !present {
				continue
			}
			ok := false
			for _, v := range fc.Values {
				ok = ok || jsonEqual(got, v)
			}
			if !ok {
				return nil, fmt.Errorf("field %s must be one of %s", name, mustJSON(fc.Values))
			}
		case ConstraintRange:
			if !present {
				continue
			}
			n, isNum := got.(float64)
			if !isNum || fc.Min != nil && n < *fc.Min || fc.Max != nil && n > *fc.Max {
				return nil, fmt.Errorf("field %s must be a number in the approved range", name)
			}
		}
	}
	for _, req := range c.Required {
		if _, ok := in[req]; !ok {
			return nil, fmt.Errorf("field %s is required", req)
		}
	}
	return json.Marshal(in)
}

// resolve computes the value an exact, template or relative_time field must have.
func (fc FieldConstraint) resolve(doc map[string]any) (any, error) {
	switch fc.Kind {
	case ConstraintExact:
		return fc.Value, nil
	case ConstraintTemplate:
		var missing []string
		out := placeholder().ReplaceAllStringFunc(fc.Template, func(m string) string {
			p := placeholder().FindStringSubmatch(m)[1]
			v, ok := lookup(doc, p)
			if !ok || v == nil {
				missing = append(missing, p)
				return ""
			}
			switch x := v.(type) {
			case string:
				return x
			case float64, bool:
				return fmt.Sprint(x)
			default:
				missing = append(missing, p+" (not a text value)")
				return ""
			}
		})
		if len(missing) > 0 {
			sort.Strings(missing)
			return nil, fmt.Errorf("the template needs %s, which the current state does not have", strings.Join(missing, ", "))
		}
		return out, nil
	case ConstraintRelativeTime:
		base, ok := timestampAt(doc, fc.Base)
		if !ok {
			return nil, fmt.Errorf("%s is not a known timestamp right now", fc.Base)
		}
		return base.Add(time.Duration(fc.OffsetMinutes * float64(time.Minute))).UTC().Format(time.RFC3339), nil
	}
	return nil, fmt.Errorf("constraint %s has no fixed value", fc.Kind)
}

func sameValue(kind string, got, want any) bool {
	if kind == ConstraintRelativeTime {
		gs, ok1 := got.(string)
		ws, ok2 := want.(string)
		g, err1 := time.Parse(time.RFC3339, gs)
		w, err2 := time.Parse(time.RFC3339, ws)
		return ok1 && ok2 && err1 == nil && err2 == nil && g.Equal(w)
	}
	if gs, ok := got.(string); ok {
		if ws, ok := want.(string); ok {
			return strings.TrimSpace(gs) == strings.TrimSpace(ws)
		}
	}
	return jsonEqual(got, want)
}

// jsonEqual compares two values as JSON (so 1 and 1.0 are equal).
func jsonEqual(a, b any) bool {
	var x, y any
	ab, err1 := json.Marshal(a)
	bb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	json.Unmarshal(ab, &x)
	json.Unmarshal(bb, &y)
	return reflect.DeepEqual(x, y)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
