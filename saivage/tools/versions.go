package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/records"
)

func init() {
	register("list_card_versions", listVersionsTool)
	register("get_card_version", getCardVersionTool)
	register("diff_card_versions", diffVersionsTool)
	register("read_record_version", readRecordVersionTool)
}

type versionsArgs struct {
	CardID string `json:"card_id"`
	Record string `json:"record,omitempty"`
}

type cardVersion struct {
	Version   int          `json:"version"`
	Revision  int          `json:"revision"`
	Kind      string       `json:"kind"`
	Status    cards.Status `json:"status"`
	Title     string       `json:"title"`
	Author    string       `json:"author"`
	UpdatedAt time.Time    `json:"updated_at"`
}

type recordVersion struct {
	Version    int       `json:"version"`
	Author     string    `json:"author"`
	AcceptedAt time.Time `json:"accepted_at"`
	Bytes      int       `json:"bytes"`
	Locator    string    `json:"locator"`
	// ActionOutput is an action output's provenance.
	ActionOutput *records.ActionOutput `json:"action_output,omitempty"`
}

func listVersionsTool(env *Env) agent.Tool {
	return tool(spec("list_card_versions", "List a card's versions, or with record the accepted versions of one of its records (immutable evidence: record:CARD/NAME@N).",
		`{"type":"object","properties":{"card_id":{"type":"string"},"record":{"type":"string"}},"required":["card_id"],"additionalProperties":false}`),
		func(ctx context.Context, a versionsArgs) (agent.ToolResult, error) {
			if a.Record != "" {
				ref, err := env.Cards.RecordRef(ctx, a.CardID, a.Record)
				if err != nil {
					return failf("%v", err), nil
				}
				hist, err := env.Cards.Records().History(ref)
				if err != nil {
					return failf("%v", err), nil
				}
				out := []recordVersion{}
				for _, h := range hist {
					out = append(out, recordVersion{Version: h.Version, Author: h.Author, AcceptedAt: h.AcceptedAt, Bytes: len(h.Content),
						Locator: recordPath{Card: a.CardID, Name: a.Record, Version: h.Version}.String(), ActionOutput: h.ActionOutput})
				}
				return jsonResult(map[string]any{"card": a.CardID, "record": a.Record, "versions": out}), nil
			}
			hist, err := env.Cards.History(ctx, a.CardID)
			if err != nil {
				return failf("%v", err), nil
			}
			out := []cardVersion{}
			for _, c := range hist {
				out = append(out, cardVersion{Version: c.Version, Revision: c.Revision, Kind: c.Kind, Status: c.Status, Title: c.Title, Author: c.Author, UpdatedAt: c.UpdatedAt})
			}
			return jsonResult(map[string]any{"card": a.CardID, "versions": out}), nil
		})
}

type cardVersionArgs struct {
	CardID  string `json:"card_id"`
	Version int    `json:"version"`
}

func (env *Env) cardVersion(ctx context.Context, id string, v int) (cards.Card, error) {
	hist, err := env.Cards.History(ctx, id)
	if err != nil {
		return cards.Card{}, err
	}
	if v < 1 || v > len(hist) {
		return cards.Card{}, fmt.Errorf("card %s has versions 1..%d, not %d", id, len(hist), v)
	}
	return hist[v-1].ReadModel(), nil
}

func getCardVersionTool(env *Env) agent.Tool {
	return tool(spec("get_card_version", "Show one exact version of a card document.",
		`{"type":"object","properties":{"card_id":{"type":"string"},"version":{"type":"integer","minimum":1}},"required":["card_id","version"],"additionalProperties":false}`),
		func(ctx context.Context, a cardVersionArgs) (agent.ToolResult, error) {
			c, err := env.cardVersion(ctx, a.CardID, a.Version)
			if err != nil {
				return failf("%v", err), nil
			}
			return jsonResult(c), nil
		})
}

type diffArgs struct {
	CardID string `json:"card_id"`
	Record string `json:"record,omitempty"`
	From   int    `json:"from"`
	To     int    `json:"to"`
}

func diffVersionsTool(env *Env) agent.Tool {
	return tool(spec("diff_card_versions", "Compare two versions of a card, or with record two versions of one of its records (0 = the record's baseline).",
		`{"type":"object","properties":{"card_id":{"type":"string"},"record":{"type":"string"},"from":{"type":"integer","minimum":0},"to":{"type":"integer","minimum":0}},"required":["card_id","from","to"],"additionalProperties":false}`),
		func(ctx context.Context, a diffArgs) (agent.ToolResult, error) {
			var from, to, label string
			if a.Record != "" {
				ref, err := env.Cards.RecordRef(ctx, a.CardID, a.Record)
				if err != nil {
					return failf("%v", err), nil
				}
				if from, err = env.Cards.Records().Content(ref, a.From); err != nil {
					return failf("%v", err), nil
				}
				if to, err = env.Cards.Records().Content(ref, a.To); err != nil {
					return failf("%v", err), nil
				}
				label = a.CardID + "/" + a.Record
			} else {
				fc, err := env.cardVersion(ctx, a.CardID, a.From)
				if err != nil {
					return failf("%v", err), nil
				}
				tc, err := env.cardVersion(ctx, a.CardID, a.To)
				if err != nil {
					return failf("%v", err), nil
				}
				from, to, label = jsonText(fc), jsonText(tc), a.CardID
			}
			d := records.Diff(fmt.Sprintf("%s v%d", label, a.From), fmt.Sprintf("%s v%d", label, a.To), from, to)
			if d == "" {
				return ok("no differences"), nil
			}
			return ok(env.redact(d)), nil
		})
}

type recordVersionArgs struct {
	CardID  string `json:"card_id"`
	Record  string `json:"record"`
	Version int    `json:"version"`
}

func readRecordVersionTool(env *Env) agent.Tool {
	return tool(spec("read_record_version", "Read one exact accepted version of a record (0 = the baseline).",
		`{"type":"object","properties":{"card_id":{"type":"string"},"record":{"type":"string"},"version":{"type":"integer","minimum":0}},"required":["card_id","record","version"],"additionalProperties":false}`),
		func(ctx context.Context, a recordVersionArgs) (agent.ToolResult, error) {
			v, err := env.readRecord(ctx, recordPath{Card: a.CardID, Name: a.Record, Version: a.Version})
			if err != nil {
				return failf("%v", err), nil
			}
			return v.result(v.describe() + "\n" + env.redact(v.Content)), nil
		})
}
