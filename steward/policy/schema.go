package policy

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// argSchema checks a gated tool's arguments against the tool's input schema
// (an MCP tool's inputSchema), so that a proposal the tool would refuse is
// sent back to the model before any card bothers the user, and the user's
// edits are held to the same rules.
type argSchema struct {
	raw      json.RawMessage
	once     sync.Once
	resolved *jsonschema.Resolved // nil: no schema, or one this validator cannot resolve
}

// check returns a description of how args break the schema, or nil. A schema
// that cannot be resolved (for example a remote $ref) checks nothing rather
// than blocking every call; the tool still validates its own input.
func (s *argSchema) check(args json.RawMessage) error {
	s.once.Do(func() {
		if len(s.raw) == 0 || string(s.raw) == "null" {
			return
		}
		var sc jsonschema.Schema
		if err := json.Unmarshal(s.raw, &sc); err != nil {
			return
		}
		if r, err := sc.Resolve(nil); err == nil {
			s.resolved = r
		}
	})
	if s.resolved == nil {
		return nil
	}
	var inst any
	if err := json.Unmarshal(args, &inst); err != nil {
		return fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	if inst == nil {
		inst = map[string]any{}
	}
	if err := s.resolved.Validate(inst); err != nil {
		return err
	}
	return nil
}
