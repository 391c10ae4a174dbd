package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentstack/agentstack/saivage/records"
)

// TestListRecordVersionsShowsActionOutput: the model's record version list
// carries an accepted action output's provenance, and only on that version.
func TestListRecordVersionsShowsActionOutput(t *testing.T) {
	f := newFixture(t, analyst())
	ref, err := f.p.Cards.RecordRef(context.Background(), "project", "objective")
	if err != nil {
		t.Fatal(err)
	}
	prov := records.ActionOutput{Node: "check", Operation: "shell.run", ContractVersion: 1, Invocation: "inv-7", Output: records.OutputCommandStdout}
	a, err := f.p.Cards.Records().AcceptActionOutput(ref, "exit 0\n", prov)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Versions []struct {
			Version      int
			Author       string
			ActionOutput *records.ActionOutput `json:"action_output"`
		}
	}
	if err := json.Unmarshal([]byte(f.ok("list_card_versions", map[string]any{"card_id": "project", "record": "objective"})), &out); err != nil {
		t.Fatal(err)
	}
	n := len(out.Versions)
	if n < 2 || out.Versions[n-2].ActionOutput != nil {
		t.Fatalf("versions = %+v", out.Versions)
	}
	if last := out.Versions[n-1]; last.Version != a.Version || last.Author != "action-output:check/inv-7" || last.ActionOutput == nil || *last.ActionOutput != *a.ActionOutput {
		t.Errorf("last version = %+v (%+v), want %+v", last, last.ActionOutput, a.ActionOutput)
	}
}
