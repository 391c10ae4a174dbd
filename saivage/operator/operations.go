package operator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
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

type notifyBody struct {
	Message string `json:"message"`
	Urgent  bool   `json:"urgent,omitempty"`
}

// postNotification queues an operator message for a card's designated
// recipient; urgent also interrupts the work between the card and its
// nearest live owner (see runtime.UrgentNotify).
func (s *Server) postNotification(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var b notifyBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if _, err := s.rt.Project().Cards.Get(r.Context(), id); err != nil {
		return notFound(err.Error())
	}
	if !b.Urgent {
		raw, _ := json.Marshal(map[string]string{"card_id": id, "message": b.Message})
		res, err := s.rt.Operate(r.Context(), runtime.PrincipalOperator, "queue_notification", raw)
		switch {
		case errors.Is(err, runtime.ErrUnknownOperation):
			return conflict("OperationRefused", "the Analyst does not hold queue_notification")
		case err != nil:
			return err
		case res.IsError:
			return conflict("OperationRefused", res.Content)
		}
		return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "queued": []string{id}, "content": res.Content})
	}
	if strings.TrimSpace(b.Message) == "" {
		return badRequest("InvalidBody", "message is empty")
	}
	res, err := s.rt.UrgentNotify(r.Context(), id, runtime.PrincipalOperator, b.Message)
	_ = s.rt.LogEvent("control_action", map[string]any{"action": "urgent_notification", "card": id, "author": runtime.PrincipalOperator, "ok": err == nil})
	if err != nil {
		return conflict("OperationRefused", err.Error())
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"ok": true, "urgent": res})
}
