package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/records"
)

func relTo(root, p string) string {
	if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return p
}

// cardParam validates the {id} path value and reads the card.
func (s *Server) cardParam(r *http.Request) (cards.Head, cards.Card, error) {
	id := r.PathValue("id")
	if !cards.ValidID(id) {
		return cards.Head{}, cards.Card{}, badRequest("InvalidCardId", fmt.Sprintf("%q is not a card id (project, project.a, …)", id))
	}
	h, c, err := s.rt.Project().Cards.GetHead(r.Context(), id)
	if errors.Is(err, cards.ErrNotFound) {
		return h, c, notFound("no card " + id)
	}
	return h, c, err
}

// recordParam validates {id}/{name} and returns the record ref.
func (s *Server) recordParam(r *http.Request) (records.Ref, error) {
	_, c, err := s.cardParam(r)
	if err != nil {
		return records.Ref{}, err
	}
	name := r.PathValue("name")
	tbl, _ := s.rt.Project().Workflows.Table(c.Type)
	if _, ok := tbl.Record(name); !ok {
		return records.Ref{}, notFound(fmt.Sprintf("card type %s declares no record %q", c.Type, name))
	}
	if c.Tombstoned() {
		return records.Ref{}, notFound(c.ID + " is deleted")
	}
	return records.Ref{CardDir: s.rt.Project().Cards.CardDir(c.ID), Card: c.ID, Name: name}, nil
}

func versionParam(r *http.Request, min int) (int, error) {
	v, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || v < min {
		return 0, badRequest("InvalidVersion", fmt.Sprintf("version must be an integer ≥ %d", min))
	}
	return v, nil
}

type recordDescriptor struct {
	Name      string `json:"name"`
	Format    string `json:"format"`
	Bootstrap bool   `json:"bootstrap"`
	Selection string `json:"selection"`
	Latest    int    `json:"latest_version"`
	Revision  int    `json:"revision"`
	HeadUUID  string `json:"head_uuid"`
	Draft     bool   `json:"draft"`
}

func (s *Server) descriptors(c cards.Card) ([]recordDescriptor, error) {
	p := s.rt.Project()
	tbl, _ := p.Workflows.Table(c.Type)
	out := []recordDescriptor{}
	if c.Tombstoned() {
		return out, nil
	}
	for _, spec := range tbl.Records() {
		h, err := p.Cards.Records().ReadHead(records.Ref{CardDir: p.Cards.CardDir(c.ID), Card: c.ID, Name: spec.Name})
		if err != nil {
			return nil, err
		}
		out = append(out, recordDescriptor{Name: spec.Name, Format: spec.Format, Bootstrap: spec.Bootstrap, Selection: h.Selection,
			Latest: h.Latest, Revision: h.Revision, HeadUUID: h.HeadUUID, Draft: h.Draft != nil})
	}
	return out, nil
}

func (s *Server) getCard(w http.ResponseWriter, r *http.Request) error {
	h, c, err := s.cardParam(r)
	if err != nil {
		return err
	}
	recs, err := s.descriptors(c)
	if err != nil {
		return err
	}
	tbl, _ := s.rt.Project().Workflows.Table(c.Type)
	return s.writeRedacted(w, http.StatusOK, map[string]any{
		"card": c.ReadModel(), "head": map[string]any{"uuid": h.HeadUUID, "version": h.Version, "revision": h.Revision},
		"records": recs, "permitted_child_types": tbl.PermittedChildTypes(),
	})
}

type childSummary struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Title        string       `json:"title"`
	Status       cards.Status `json:"status"`
	Deleted      bool         `json:"deleted,omitempty"`
	Dependencies []string     `json:"dependencies"`
	Children     int          `json:"children"`
}

func (s *Server) getChildren(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !cards.ValidID(id) {
		return badRequest("InvalidCardId", fmt.Sprintf("%q is not a card id (project, project.a, …)", id))
	}
	c, kids, err := s.rt.Project().Cards.Children(r.Context(), id)
	if errors.Is(err, cards.ErrNotFound) {
		return notFound("no card " + id)
	}
	if err != nil {
		return err
	}
	out := make([]childSummary, 0, len(kids))
	for _, kc := range kids {
		out = append(out, childSummary{ID: kc.ID, Type: kc.Type, Title: kc.Title, Status: kc.Status, Deleted: kc.Tombstoned(),
			Dependencies: kc.Dependencies, Children: len(kc.Children)})
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": c.ID, "children": out})
}

func (s *Server) getRecords(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.cardParam(r)
	if err != nil {
		return err
	}
	recs, err := s.descriptors(c)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": c.ID, "records": recs})
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) error {
	ref, err := s.recordParam(r)
	if err != nil {
		return err
	}
	cur, err := s.rt.Project().Cards.Records().Current(ref)
	if err != nil {
		return err
	}
	out := map[string]any{"card": ref.Card, "record": ref.Name, "selection": cur.Head.Selection,
		"version": cur.Version, "revision": cur.Head.Revision, "head_uuid": cur.Head.HeadUUID, "draft": cur.Head.Draft != nil, "content": cur.Content}
	if cur.ActionOutput != nil {
		out["action_output"] = cur.ActionOutput
	}
	return s.writeRedacted(w, http.StatusOK, out)
}

func (s *Server) getRecordHistory(w http.ResponseWriter, r *http.Request) error {
	ref, err := s.recordParam(r)
	if err != nil {
		return err
	}
	hist, err := s.rt.Project().Cards.Records().History(ref)
	if err != nil {
		return err
	}
	type entry struct {
		Version    int    `json:"version"`
		Author     string `json:"author"`
		AcceptedAt string `json:"accepted_at"`
		Bytes      int    `json:"bytes"`
		// ActionOutput is an action output's provenance.
		ActionOutput *records.ActionOutput `json:"action_output,omitempty"`
	}
	out := []entry{}
	for _, a := range hist {
		out = append(out, entry{Version: a.Version, Author: a.Author, AcceptedAt: a.AcceptedAt.Format("2006-01-02T15:04:05.000Z07:00"), Bytes: len(a.Content),
			ActionOutput: a.ActionOutput})
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": ref.Card, "record": ref.Name, "versions": out})
}

func (s *Server) getRecordVersion(w http.ResponseWriter, r *http.Request) error {
	ref, err := s.recordParam(r)
	if err != nil {
		return err
	}
	v, err := versionParam(r, 0)
	if err != nil {
		return err
	}
	rs := s.rt.Project().Cards.Records()
	if v == 0 {
		content, err := rs.Content(ref, 0)
		if err != nil {
			return err
		}
		return s.writeRedacted(w, http.StatusOK, map[string]any{"card": ref.Card, "record": ref.Name, "version": 0, "baseline": true, "content": content})
	}
	a, err := rs.Version(ref, v)
	if errors.Is(err, records.ErrNoVersion) {
		return notFound(err.Error())
	}
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, a)
}

// fromTo reads ?from=&to= with defaults.
func fromTo(r *http.Request, defFrom, defTo, min, max int) (int, int, error) {
	from, err := queryInt(r, "from", defFrom, min, max)
	if err != nil {
		return 0, 0, err
	}
	to, err := queryInt(r, "to", defTo, min, max)
	return from, to, err
}

func (s *Server) getRecordDiff(w http.ResponseWriter, r *http.Request) error {
	ref, err := s.recordParam(r)
	if err != nil {
		return err
	}
	rs := s.rt.Project().Cards.Records()
	h, err := rs.ReadHead(ref)
	if err != nil {
		return err
	}
	from, to, err := fromTo(r, max(h.Latest-1, 0), h.Latest, 0, h.Latest)
	if err != nil {
		return err
	}
	a, err := rs.Content(ref, from)
	if err != nil {
		return err
	}
	b, err := rs.Content(ref, to)
	if err != nil {
		return err
	}
	d := records.Diff(fmt.Sprintf("%s/%s v%d", ref.Card, ref.Name, from), fmt.Sprintf("%s/%s v%d", ref.Card, ref.Name, to), a, b)
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": ref.Card, "record": ref.Name, "from": from, "to": to, "diff": d})
}

func (s *Server) getCardHistory(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.cardParam(r)
	if err != nil {
		return err
	}
	hist, err := s.rt.Project().Cards.History(r.Context(), c.ID)
	if err != nil {
		return err
	}
	type entry struct {
		Version  int          `json:"version"`
		Revision int          `json:"revision"`
		Kind     string       `json:"kind"`
		Status   cards.Status `json:"status"`
		Title    string       `json:"title"`
		Updated  string       `json:"updated_at"`
	}
	out := []entry{}
	for _, v := range hist {
		out = append(out, entry{Version: v.Version, Revision: v.Revision, Kind: v.Kind, Status: v.Status, Title: v.Title, Updated: v.UpdatedAt.Format("2006-01-02T15:04:05.000Z07:00")})
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": c.ID, "versions": out})
}

func (s *Server) cardVersions(r *http.Request) ([]cards.Card, error) {
	_, c, err := s.cardParam(r)
	if err != nil {
		return nil, err
	}
	return s.rt.Project().Cards.History(r.Context(), c.ID)
}

func (s *Server) getCardVersion(w http.ResponseWriter, r *http.Request) error {
	hist, err := s.cardVersions(r)
	if err != nil {
		return err
	}
	v, err := versionParam(r, 1)
	if err != nil {
		return err
	}
	if v > len(hist) {
		return notFound(fmt.Sprintf("the card has versions 1..%d", len(hist)))
	}
	return s.writeRedacted(w, http.StatusOK, hist[v-1].ReadModel())
}

func (s *Server) getCardDiff(w http.ResponseWriter, r *http.Request) error {
	hist, err := s.cardVersions(r)
	if err != nil {
		return err
	}
	n := len(hist)
	from, to, err := fromTo(r, max(n-1, 1), n, 1, n)
	if err != nil {
		return err
	}
	a, _ := json.MarshalIndent(hist[from-1].ReadModel(), "", "  ")
	b, _ := json.MarshalIndent(hist[to-1].ReadModel(), "", "  ")
	id := hist[0].ID
	d := records.Diff(fmt.Sprintf("%s v%d", id, from), fmt.Sprintf("%s v%d", id, to), string(a), string(b))
	return s.writeRedacted(w, http.StatusOK, map[string]any{"card": id, "from": from, "to": to, "diff": d})
}
