package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/records"
)

func init() {
	register("create_card", createCardTool)
	register("edit_card", editCardTool)
	register("cancel_card", cancelCardTool)
	register("delete_card", deleteCardTool)
	register("activate_card", activateCardTool)
	register("reopen_card", reopenCardTool)
	register("reorder_child", reorderChildTool)
	register("get_card", getCardTool)
	register("list_cards", listCardsTool)
	register("get_tree", getTreeTool)
}

// directChild checks that id is a child of the caller's card (Planner
// scope). Global callers may address any card.
func (env *Env) directChild(id string) error {
	if env.Caller.Global() {
		return nil
	}
	if !cards.ValidID(id) || cards.ParentOf(id) != env.Caller.Card {
		return fmt.Errorf("%s is not a child of %s; the Planner of %s manages only its direct children", id, env.Caller.Card, env.Caller.Card)
	}
	return nil
}

// intervene asserts runtime readiness for a global caller's maintenance.
func (env *Env) intervene() error {
	if env.Caller.Global() && env.Runtime != nil {
		return env.Runtime.InterventionAllowed()
	}
	return nil
}

// cardView is the model-facing projection of a card.
type cardView struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Title        string        `json:"title"`
	Description  string        `json:"description,omitempty"`
	Status       cards.Status  `json:"status"`
	Deleted      bool          `json:"deleted,omitempty"`
	Dependencies []string      `json:"dependencies,omitempty"`
	Children     []childView   `json:"children,omitempty"`
	Records      []recordEntry `json:"records,omitempty"`
	Version      int           `json:"version"`
	Revision     int           `json:"revision"`
}

type childView struct {
	ID     string       `json:"id"`
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status cards.Status `json:"status"`
	Deps   []string     `json:"dependencies,omitempty"`
}

type recordEntry struct {
	Name      string `json:"name"`
	Selection string `json:"selection"`
	Latest    int    `json:"latest_version"`
	Bootstrap bool   `json:"bootstrap,omitempty"`
}

func (env *Env) children(ctx context.Context, c cards.Card) []childView {
	var out []childView
	for _, k := range c.Children {
		kc, err := env.Cards.Get(ctx, k)
		if err != nil || kc.Tombstoned() {
			continue
		}
		out = append(out, childView{ID: kc.ID, Type: kc.Type, Title: kc.Title, Status: kc.Status, Deps: kc.Dependencies})
	}
	return out
}

func (env *Env) viewCard(ctx context.Context, id string) (cardView, error) {
	h, c, err := env.Cards.GetHead(ctx, id)
	if err != nil {
		return cardView{}, err
	}
	v := cardView{ID: c.ID, Type: c.Type, Title: c.Title, Description: c.Description, Status: c.Status, Deleted: c.Tombstoned(),
		Dependencies: c.Dependencies, Version: c.Version, Revision: h.Revision}
	if c.Tombstoned() {
		return v, nil
	}
	v.Children = env.children(ctx, c)
	tbl, _ := env.Workflows.Table(c.Type)
	for _, r := range tbl.Records() {
		rh, err := env.Cards.Records().ReadHead(records.Ref{CardDir: env.Cards.CardDir(id), Card: id, Name: r.Name})
		if err != nil {
			return cardView{}, err
		}
		v.Records = append(v.Records, recordEntry{Name: r.Name, Selection: rh.Selection, Latest: rh.Latest, Bootstrap: r.Bootstrap})
	}
	return v, nil
}

type createArgs struct {
	ParentID     string            `json:"parent_id,omitempty"`
	Type         string            `json:"type,omitempty"`
	Title        string            `json:"title"`
	Description  string            `json:"description,omitempty"`
	Dependencies []string          `json:"dependencies,omitempty"`
	Records      map[string]string `json:"records,omitempty"`
}

func createCardTool(env *Env) agent.Tool {
	desc := "Create a child card. records sets the child type's bootstrap records (for example brief) as their first version. " +
		"dependencies lists sibling card ids that must be done before this card can be activated."
	schema := `{"type":"object","properties":{"type":{"type":"string","description":"child card type (default: the only permitted type)"},"title":{"type":"string","minLength":1,"maxLength":200},"description":{"type":"string"},"dependencies":{"type":"array","items":{"type":"string"}},"records":{"type":"object","additionalProperties":{"type":"string"}}},"required":["title"],"additionalProperties":false}`
	if env.Caller.Global() {
		desc = "Create a card under parent_id (not a running parent). " + desc
		schema = `{"type":"object","properties":{"parent_id":{"type":"string"},"type":{"type":"string"},"title":{"type":"string","minLength":1,"maxLength":200},"description":{"type":"string"},"dependencies":{"type":"array","items":{"type":"string"}},"records":{"type":"object","additionalProperties":{"type":"string"}}},"required":["parent_id","title"],"additionalProperties":false}`
	} else {
		desc += " The new card is created under your card " + env.Caller.Card + "."
	}
	return tool(spec("create_card", desc, schema), func(ctx context.Context, a createArgs) (agent.ToolResult, error) {
		parent := env.Caller.Card
		if env.Caller.Global() {
			if a.ParentID == "" {
				return failf("parent_id is required"), nil
			}
			parent = a.ParentID
		} else if a.ParentID != "" && a.ParentID != parent {
			return failf("a card agent creates children of its own card %s only", parent), nil
		}
		if err := env.intervene(); err != nil {
			return failf("%v", err), nil
		}
		pc, err := env.Cards.Get(ctx, parent)
		if err != nil {
			return failf("%v", err), nil
		}
		if env.Caller.Global() && pc.Status == cards.Running {
			return failf("%s is running; its Planner owns its children while it runs (pause or stop first, or queue_notification)", parent), nil
		}
		typ := a.Type
		if typ == "" {
			tbl, _ := env.Workflows.Table(pc.Type)
			permitted := tbl.PermittedChildTypes()
			if len(permitted) != 1 {
				return failf("give type: %s cards permit %v", pc.Type, permitted), nil
			}
			typ = permitted[0]
		}
		env.RecordMu.Lock()
		c, err := env.Cards.Create(ctx, cards.CreateInput{Parent: parent, Type: typ, Title: a.Title, Description: a.Description,
			Dependencies: a.Dependencies, Bootstrap: a.Records, Author: env.Caller.Author()})
		env.RecordMu.Unlock()
		if err != nil {
			return failf("%v", err), nil
		}
		env.hint("card", parent)
		env.hint("card", c.ID)
		env.logEvent("card_created", map[string]any{"card": c.ID, "parent": parent, "type": typ, "author": env.Caller.Author()})
		v, err := env.viewCard(ctx, c.ID)
		if err != nil {
			return failf("%v", err), nil
		}
		return jsonResult(map[string]any{"created": v}), nil
	})
}

type editCardArgs struct {
	CardID       string    `json:"card_id"`
	Title        *string   `json:"title,omitempty"`
	Description  *string   `json:"description,omitempty"`
	Dependencies *[]string `json:"dependencies,omitempty"`
}

func editCardTool(env *Env) agent.Tool {
	return tool(spec("edit_card", "Change a child card's title, description or dependencies (sibling ids). Omitted fields stay.",
		`{"type":"object","properties":{"card_id":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},"dependencies":{"type":"array","items":{"type":"string"}}},"required":["card_id"],"additionalProperties":false}`),
		func(ctx context.Context, a editCardArgs) (agent.ToolResult, error) {
			if err := env.directChild(a.CardID); err != nil {
				return failf("%v", err), nil
			}
			if err := env.intervene(); err != nil {
				return failf("%v", err), nil
			}
			c, changed, err := env.Cards.Edit(ctx, a.CardID, cards.EditInput{Title: a.Title, Description: a.Description, Dependencies: a.Dependencies})
			if err != nil {
				return failf("%v", err), nil
			}
			if !changed {
				return ok("no change: " + a.CardID + " already has these values"), nil
			}
			env.hint("card", a.CardID)
			return ok(fmt.Sprintf("edited %s (version %d)", c.ID, c.Version)), nil
		})
}

type cardIDArgs struct {
	CardID string `json:"card_id"`
}

const cardIDSchema = `{"type":"object","properties":{"card_id":{"type":"string"}},"required":["card_id"],"additionalProperties":false}`

func cancelCardTool(env *Env) agent.Tool {
	return tool(spec("cancel_card", "Cancel a card and its unfinished descendants (done descendants are kept).", cardIDSchema),
		func(ctx context.Context, a cardIDArgs) (agent.ToolResult, error) {
			if err := env.directChild(a.CardID); err != nil {
				return failf("%v", err), nil
			}
			if err := env.intervene(); err != nil {
				return failf("%v", err), nil
			}
			if c, err := env.Cards.Get(ctx, a.CardID); err == nil && c.Status == cards.Running {
				return failf("%s is running; stop the runtime before cancelling it", a.CardID), nil
			}
			ids, err := env.Cards.Cancel(ctx, a.CardID)
			for _, id := range ids {
				env.hint("card", id)
			}
			if err != nil {
				return failf("%v (cancelled so far: %v)", err, ids), nil
			}
			env.logEvent("card_cancelled", map[string]any{"card": a.CardID, "cancelled": ids, "author": env.Caller.Author()})
			return ok("cancelled " + strings.Join(ids, ", ")), nil
		})
}

func deleteCardTool(env *Env) agent.Tool {
	return tool(spec("delete_card", "Delete a card (a tombstone keeps its place). Refused for the root, running cards and cards a sibling depends on.", cardIDSchema),
		func(ctx context.Context, a cardIDArgs) (agent.ToolResult, error) {
			if err := env.directChild(a.CardID); err != nil {
				return failf("%v", err), nil
			}
			if err := env.intervene(); err != nil {
				return failf("%v", err), nil
			}
			if _, err := env.Cards.Delete(ctx, a.CardID); err != nil {
				return failf("%v", err), nil
			}
			env.hint("card", a.CardID)
			env.hint("card", cards.ParentOf(a.CardID))
			env.logEvent("card_deleted", map[string]any{"card": a.CardID, "author": env.Caller.Author()})
			return ok("deleted " + a.CardID), nil
		})
}

func activateCardTool(env *Env) agent.Tool {
	return tool(spec("activate_card", "Activate a child card whose dependencies are done and wait until it finishes; the result is the child's outcome (done, failed or blocked) with its summary and exported records.", cardIDSchema),
		func(ctx context.Context, a cardIDArgs) (agent.ToolResult, error) {
			if env.Caller.Global() || env.Children == nil {
				return failf("activate_card runs only inside a card's Planner node"), nil
			}
			if err := env.directChild(a.CardID); err != nil {
				return failf("%v", err), nil
			}
			c, err := env.Cards.Get(ctx, a.CardID)
			if err != nil {
				return failf("%v", err), nil
			}
			if c.Tombstoned() || !c.Status.AdmitsActivation() {
				return failf("%s is %s; only backlog, changed, blocked or stopped cards can be activated (reopen_card reopens done or failed ones)", a.CardID, c.Status), nil
			}
			for _, d := range c.Dependencies {
				dc, err := env.Cards.Get(ctx, d)
				if err != nil {
					return failf("%v", err), nil
				}
				if !dc.Status.CompletesDependency() {
					return failf("%s depends on %s, which is %s; activate %s first", a.CardID, d, dc.Status, d), nil
				}
			}
			out, err := env.Children.ActivateChild(ctx, env.Caller.Card, a.CardID)
			if env.AfterActivation != nil {
				env.AfterActivation()
			}
			if err != nil {
				if ctx.Err() != nil {
					return agent.ToolResult{}, err
				}
				return failf("%v", err), nil
			}
			return jsonResult(out), nil
		})
}

func reopenCardTool(env *Env) agent.Tool {
	desc := "Reopen a done, failed or blocked child card as changed so it can be activated again."
	if env.Caller.Global() {
		desc = "Reopen a done, failed or blocked card as changed; finished ancestors reopen too, up to the first running one."
	}
	return tool(spec("reopen_card", desc, cardIDSchema), func(ctx context.Context, a cardIDArgs) (agent.ToolResult, error) {
		if err := env.directChild(a.CardID); err != nil {
			return failf("%v", err), nil
		}
		if err := env.intervene(); err != nil {
			return failf("%v", err), nil
		}
		if _, err := env.Cards.Reopen(ctx, a.CardID); err != nil {
			return failf("%v", err), nil
		}
		reopened := []string{a.CardID}
		env.hint("card", a.CardID)
		if env.Caller.Global() {
			for id := cards.ParentOf(a.CardID); id != ""; id = cards.ParentOf(id) {
				c, err := env.Cards.Get(ctx, id)
				if err != nil || !c.Status.AdmitsReopen() {
					break
				}
				if _, err := env.Cards.Reopen(ctx, id); err != nil {
					return failf("reopened %v, then %v", reopened, err), nil
				}
				reopened = append(reopened, id)
				env.hint("card", id)
			}
		}
		env.logEvent("card_reopened", map[string]any{"cards": reopened, "author": env.Caller.Author()})
		return ok("reopened as changed: " + strings.Join(reopened, ", ")), nil
	})
}

type reorderArgs struct {
	CardID   string `json:"card_id"`
	Position int    `json:"position"`
}

func reorderChildTool(env *Env) agent.Tool {
	return tool(spec("reorder_child", "Move a card to a position (0-based) among its parent's children.",
		`{"type":"object","properties":{"card_id":{"type":"string"},"position":{"type":"integer","minimum":0}},"required":["card_id","position"],"additionalProperties":false}`),
		func(ctx context.Context, a reorderArgs) (agent.ToolResult, error) {
			if err := env.directChild(a.CardID); err != nil {
				return failf("%v", err), nil
			}
			if err := env.intervene(); err != nil {
				return failf("%v", err), nil
			}
			changed, err := env.Cards.Reorder(ctx, a.CardID, a.Position)
			if err != nil {
				return failf("%v", err), nil
			}
			if !changed {
				return ok(a.CardID + " is already at position " + fmt.Sprint(a.Position)), nil
			}
			env.hint("card", cards.ParentOf(a.CardID))
			return ok(fmt.Sprintf("moved %s to position %d", a.CardID, a.Position)), nil
		})
}

func getCardTool(env *Env) agent.Tool {
	return tool(spec("get_card", "Show a card: type, status, description, dependencies, children and its records' state.", cardIDSchema),
		func(ctx context.Context, a cardIDArgs) (agent.ToolResult, error) {
			v, err := env.viewCard(ctx, a.CardID)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(v), nil
		})
}

type listArgs struct {
	ParentID string `json:"parent_id,omitempty"`
}

func listCardsTool(env *Env) agent.Tool {
	return tool(spec("list_cards", "List the children of a card (default: your card, or the root for global agents) with their status and dependencies.",
		`{"type":"object","properties":{"parent_id":{"type":"string"}},"additionalProperties":false}`),
		func(ctx context.Context, a listArgs) (agent.ToolResult, error) {
			id := a.ParentID
			if id == "" {
				id = cmpOr(env.Caller.Card, cards.RootID)
			}
			c, err := env.Cards.Get(ctx, id)
			if err != nil {
				return failf("%v", err), nil
			}
			kids := env.children(ctx, c)
			if kids == nil {
				kids = []childView{}
			}
			return jsonResult(map[string]any{"parent": id, "children": kids}), nil
		})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type treeArgs struct {
	CardID string `json:"card_id,omitempty"`
}

func getTreeTool(env *Env) agent.Tool {
	return tool(spec("get_tree", "Show the card tree below a card (default: the root) with types and statuses.",
		`{"type":"object","properties":{"card_id":{"type":"string"}},"additionalProperties":false}`),
		func(ctx context.Context, a treeArgs) (agent.ToolResult, error) {
			id := cmpOr(a.CardID, cards.RootID)
			var b strings.Builder
			var walk func(id string, depth int) error
			walk = func(id string, depth int) error {
				c, err := env.Cards.Get(ctx, id)
				if err != nil {
					return err
				}
				mark := ""
				if c.Tombstoned() {
					mark = " (deleted)"
				}
				fmt.Fprintf(&b, "%s%s [%s] %s — %s%s\n", strings.Repeat("  ", depth), c.ID, c.Type, c.Status, c.Title, mark)
				if c.Tombstoned() {
					return nil
				}
				for _, k := range c.Children {
					if err := walk(k, depth+1); err != nil {
						return err
					}
				}
				return nil
			}
			if err := walk(id, 0); err != nil {
				return failf("%v", err), nil
			}
			return ok(b.String()), nil
		})
}

// jsonText renders v indented (used for card version projections).
func jsonText(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
