package actions

import (
	"context"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/search"
)

// Flow retrieval through local embeddings: the scripted provider's
// deterministic vectors (llmtest.Vector) over real HTTP, attributed
// flow-index and flow-retrieve. The embedding ranking decides, not the
// lexical one; each flow version is embedded once; a failing embedder falls
// back to the lexical ranking.
func TestFlowRetrievalByEmbedding(t *testing.T) {
	ctx := context.Background()
	s, _ := openTestStore(t)
	srv := llmtest.NewServer(t)
	srv.EmbeddingDim = 64
	embedder := func(base, action string) FlowEmbedder {
		return &llm.Embedder{Client: llm.NewClient(llm.ClientOptions{BaseURL: base}), Model: "local-embed",
			Attribution: llm.Attribution{Service: Service, Action: action}}
	}
	emb := FlowEmbedders{Index: embedder(srv.URL, AttrFlowIndex.Action), Query: embedder(srv.URL, AttrFlowRetrieve.Action)}

	travel, err := s.CreateFlow(ctx, Flow{Name: "Travel bookings", Trigger: "an airline or hotel confirms a reservation", Guidance: "add it to the calendar", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	shop, err := s.CreateFlow(ctx, Flow{Name: "Purchase receipts", Trigger: "a shop confirms an order", Guidance: "file the receipt", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	// The text embeds exactly as the travel flow does; it shares the word
	// "confirms" with the shop flow, so the lexical ranking also offers that one.
	text := travel.Name + "\n" + travel.Trigger
	if c := search.Cosine(llmtest.Vector(text, 64), llmtest.Vector(shop.Name+"\n"+shop.Trigger, 64)); c >= 0.35 {
		t.Fatalf("precondition: the shop flow's vector is close to the text's (%.2f)", c)
	}
	names := func(fl []Flow) []string {
		var out []string
		for _, f := range fl {
			out = append(out, f.Name)
		}
		return out
	}
	lexical, err := s.retrieveFlows(ctx, text, FlowEmbedders{})
	if err != nil || len(lexical) != 2 {
		t.Fatalf("lexical ranking %v %v", names(lexical), err)
	}
	got, err := s.retrieveFlows(ctx, text, emb)
	if err != nil || len(got) != 1 || got[0].ID != travel.ID {
		t.Fatalf("embedding ranking %v %v, want only %q", names(got), err, travel.Name)
	}
	// An unreachable embedder leaves the lexical ranking in charge.
	down := FlowEmbedders{Index: embedder("http://127.0.0.1:1/v1", AttrFlowIndex.Action), Query: embedder("http://127.0.0.1:1/v1", AttrFlowRetrieve.Action)}
	if got, err := s.retrieveFlows(ctx, text, down); err != nil || len(got) != 2 {
		t.Fatalf("fallback ranking %v %v, want both flows", names(got), err)
	}
	calls := func() (index, query int) {
		for _, r := range srv.Requests() {
			switch r.Header.Get(llm.HeaderUsageAction) {
			case AttrFlowIndex.Action:
				index++
			case AttrFlowRetrieve.Action:
				query++
			}
			if r.Header.Get(llm.HeaderUsageService) != Service {
				t.Errorf("embedding request attributed to %q", r.Header.Get(llm.HeaderUsageService))
			}
		}
		return
	}
	if i, q := calls(); i != 2 || q != 1 {
		t.Fatalf("first retrieval: %d flow-index and %d flow-retrieve calls, want 2 and 1", i, q)
	}

	// Cached per flow version: a second retrieval embeds only the text; a
	// new version of the shop flow is embedded again, and now matches.
	s.retrieveFlows(ctx, text, emb)
	if i, q := calls(); i != 2 || q != 2 {
		t.Fatalf("second retrieval: %d flow-index and %d flow-retrieve calls, want 2 and 2", i, q)
	}
	name, trigger := travel.Name, travel.Trigger
	if _, err := s.UpdateFlow(ctx, shop.ID, FlowUpdate{Name: &name, Trigger: &trigger}); err != nil {
		t.Fatal(err)
	}
	got, err = s.retrieveFlows(ctx, text, emb)
	if i, q := calls(); i != 3 || q != 3 || err != nil || len(got) != 2 {
		t.Fatalf("after the update: %d flow-index, %d flow-retrieve calls, flows %v %v", i, q, names(got), err)
	}

}
