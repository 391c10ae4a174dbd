package operator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/agentstack/agentstack/saivage/runtime"
)

// Operator actions: the configured Analyst's tools invoked directly by the
// operator (saivage card reopen, saivage record write, …) through the same
// policy surface the Analyst model and external MCP callers use, so no
// state is edited behind the runtime's back. Each settled action is
// audited as a control_action with author "operator".

var toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// operationTimeout bounds how long the route waits for an action; the
// action itself keeps running under the runtime when the wait ends.
const operationTimeout = 10 * time.Minute

func (s *Server) getOperations(w http.ResponseWriter, r *http.Request) error {
	type opView struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	out := []opView{}
	for _, sp := range s.rt.AnalystTools() {
		out = append(out, opView{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters})
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"analyst": s.rt.Project().Workflows.Analyst(), "operations": out})
}

func (s *Server) postOperation(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !toolNameRE.MatchString(name) {
		return badRequest("InvalidOperation", name+" is not a tool name")
	}
	var args map[string]json.RawMessage
	if err := decodeBody(w, r, &args); err != nil {
		return err
	}
	if args == nil {
		return badRequest("InvalidBody", "send the tool's arguments as a JSON object")
	}
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(r.Context(), operationTimeout)
	defer cancel()
	res, err := s.rt.Operate(ctx, runtime.PrincipalOperator, name, raw)
	switch {
	case errors.Is(err, runtime.ErrUnknownOperation):
		return notFound(err.Error())
	case err != nil:
		return err
	case res.IsError:
		return conflict("OperationRefused", res.Content)
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "operation": name, "content": res.Content, "data": res.Data})
}
