package operator

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/state"
)

// resolveSession maps {id} to a known session.
func (s *Server) resolveSession(ctx context.Context, id string) (runtime.SessionInfo, error) {
	info, err := s.rt.ResolveSession(ctx, id)
	switch {
	case errors.Is(err, runtime.ErrUnknownSession):
		return info, notFound(err.Error())
	case err != nil && info.Dir == "":
		return info, badRequest("InvalidSessionId", err.Error())
	}
	return info, err
}

func (s *Server) getAgents(w http.ResponseWriter, r *http.Request) error {
	infos, err := s.rt.Sessions(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": infos})
	return nil
}

func (s *Server) getCardSessions(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.cardParam(r)
	if err != nil {
		return err
	}
	sums, err := s.rt.CardSessions(r.Context(), c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"card": c.ID, "agents": sums})
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sum)
	return nil
}

// rowView is a conversation row with its content decoded.
type rowView struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	CallID  string          `json:"call_id,omitempty"`
	Name    string          `json:"name,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
}

func rowsView(rows []conversations.Row) []rowView {
	out := make([]rowView, 0, len(rows))
	for _, r := range rows {
		out = append(out, rowView{ID: r.ID, Kind: r.Kind, CallID: r.CallID, Name: r.Name, Content: r.Content})
	}
	return out
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	cur, err := s.rt.Project().Sessions.LoadCurrent(sum.Dir, sum.ID, state.TailIgnore)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"session": sum.ID, "segment": cur.N, "segment_kind": cur.Kind,
		"index_head_uuid": cur.Index.HeadUUID, "segments": len(cur.Index.Segments), "rows": rowsView(cur.Rows)})
}

func (s *Server) getConversationVersions(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	idx, err := s.rt.Project().Sessions.ReadIndex(sum.Dir, sum.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": sum.ID, "segments": idx.Segments})
	return nil
}

func (s *Server) getConversationVersion(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	n, err := versionParam(r, 1)
	if err != nil {
		return err
	}
	if n > sum.Segments {
		return notFound("the session has " + strconv.Itoa(sum.Segments) + " segment(s)")
	}
	rows, err := s.rt.Project().Sessions.Segment(sum.Dir, sum.ID, n)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"session": sum.ID, "segment": n, "rows": rowsView(rows)})
}

func (s *Server) getExchange(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.resolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	data, err := state.ReadFile(filepath.Join(sum.Dir, runtime.LatestExchangeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return notFound("session " + sum.ID + " has no model exchange yet")
	}
	if err != nil {
		return err
	}
	var ex json.RawMessage
	if err := json.Unmarshal(data, &ex); err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"session": sum.ID, "exchange": ex})
}

func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 200, 1, 1000)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	typ, card := r.URL.Query().Get("type"), r.URL.Query().Get("card")
	all, err := s.rt.Project().Events(func(e project.Event) bool {
		return (typ == "" || e.Type == typ) && (card == "" || e.Data["card"] == card)
	})
	if err != nil {
		return err
	}
	total := len(all)
	page := all[min(offset, total):min(offset+limit, total)]
	return s.writeRedacted(w, http.StatusOK, map[string]any{"total": total, "offset": offset, "events": page})
}

type chatBody struct {
	Message string `json:"message"`
	// Wait makes the response carry the turn's result.
	Wait bool `json:"wait,omitempty"`
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.rt.Analyst().Info())
	return nil
}

func (s *Server) postChat(w http.ResponseWriter, r *http.Request) error {
	var b chatBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	a := s.rt.Analyst()
	id, done, err := a.Submit(r.Context(), b.Message)
	switch {
	case errors.Is(err, runtime.ErrBusy):
		return conflict("Busy", err.Error())
	case errors.Is(err, runtime.ErrMaintenanceHold):
		return conflict("MaintenanceHold", err.Error())
	case errors.Is(err, runtime.ErrInternalDisabled):
		return conflict("InternalAnalystDisabled", err.Error())
	case err != nil:
		return badRequest("InvalidMessage", err.Error())
	}
	if !b.Wait {
		writeJSON(w, http.StatusAccepted, map[string]any{"accepted": true, "turn_id": id})
		return nil
	}
	select {
	case <-done:
	case <-r.Context().Done():
		return r.Context().Err()
	}
	res, _ := a.Wait(r.Context())
	return s.writeRedacted(w, http.StatusOK, map[string]any{"accepted": true, "turn_id": id, "result": res})
}
