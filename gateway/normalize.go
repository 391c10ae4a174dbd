package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// toolCallNormalizer rewrites streamed tool-call deltas so that a call's id,
// type and name are sent once, in its first delta. Some providers repeat the
// name in every chunk, which standard OpenAI clients (that concatenate the
// fragments) turn into "find_trainfind_train".
type toolCallNormalizer struct {
	seen map[string]bool // "choice/index" of calls whose header was sent
}

// normalize returns data unchanged unless it carries a repeated tool-call
// header, in which case it returns the rewritten event payload.
func (n *toolCallNormalizer) normalize(data []byte) ([]byte, bool) {
	if !bytes.Contains(data, []byte(`"tool_calls"`)) {
		return data, false
	}
	var chunk map[string]any
	if json.Unmarshal(data, &chunk) != nil {
		return data, false
	}
	choices, _ := chunk["choices"].([]any)
	changed := false
	for _, c := range choices {
		choice, _ := c.(map[string]any)
		delta, _ := choice["delta"].(map[string]any)
		calls, _ := delta["tool_calls"].([]any)
		for _, tc := range calls {
			call, _ := tc.(map[string]any)
			if call == nil {
				continue
			}
			key := fmt.Sprintf("%v/%v", choice["index"], call["index"])
			fn, _ := call["function"].(map[string]any)
			if n.seen == nil {
				n.seen = map[string]bool{}
			}
			if !n.seen[key] {
				n.seen[key] = true
				continue
			}
			for _, k := range []string{"id", "type"} {
				if _, ok := call[k]; ok {
					delete(call, k)
					changed = true
				}
			}
			if fn != nil {
				if _, ok := fn["name"]; ok {
					delete(fn, "name")
					changed = true
				}
			}
		}
	}
	if !changed {
		return data, false
	}
	out, err := json.Marshal(chunk)
	if err != nil {
		return data, false
	}
	return out, true
}
