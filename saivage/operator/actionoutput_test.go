package operator_test

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
)

// TestRecordRoutesProjectActionOutputProvenance: an accepted action output
// reads through the record, history, version and Files routes as the
// accepted content, and history and version project its provenance.
func TestRecordRoutesProjectActionOutputProvenance(t *testing.T) {
	const text = "lint: 1 finding\r\n"
	s := startEdited(t, nil, func(dir, cfg string) string {
		rs := records.New(records.Options{Publisher: state.New(state.Options{Fatal: func(err error) { t.Errorf("fatal: %v", err) }})})
		ref := records.Ref{CardDir: filepath.Join(dir, ".saivage", "cards", "project"), Card: "project", Name: "objective"}
		if _, err := rs.AcceptActionOutput(ref, text, records.ActionOutput{Node: "lint", Operation: "code_quality.python_ruff",
			ContractVersion: 1, Invocation: "inv-1", Output: records.OutputReturnedText}); err != nil {
			t.Fatal(err)
		}
		return cfg
	})
	var cur struct {
		Version      int
		Content      string
		ActionOutput *records.ActionOutput `json:"action_output"`
	}
	s.get("/api/cards/project/records/objective", &cur)
	var file struct{ Text string }
	s.get("/api/files/content?path="+url.QueryEscape("record:project/objective"), &file)
	if cur.Version != 2 || cur.Content != text || file.Text != text {
		t.Fatalf("current = %+v, Files = %q", cur, file.Text)
	}
	var hist struct {
		Versions []struct {
			Version      int
			Author       string
			ActionOutput *records.ActionOutput `json:"action_output"`
		}
	}
	s.get("/api/cards/project/records/objective/history", &hist)
	if len(hist.Versions) != 2 || hist.Versions[0].ActionOutput != nil {
		t.Fatalf("history = %+v", hist)
	}
	want := records.ActionOutput{Node: "lint", Operation: "code_quality.python_ruff", ContractVersion: 1, Invocation: "inv-1",
		Output: "returned-text", Bytes: len(text), SHA256: "04ded4c67d71a4b2c802a037f6c7c34991039c862d25cfc02ea699bd40d707a5"}
	if v := hist.Versions[1]; v.Author != "action-output:lint/inv-1" || v.ActionOutput == nil || *v.ActionOutput != want {
		t.Fatalf("history v2 = %+v (%+v)", v, v.ActionOutput)
	}
	if cur.ActionOutput == nil || *cur.ActionOutput != want {
		t.Errorf("current provenance = %+v", cur.ActionOutput)
	}
	var doc struct {
		Format       int
		Content      string
		ActionOutput *records.ActionOutput `json:"action_output"`
	}
	s.get("/api/cards/project/records/objective/versions/2", &doc)
	if doc.Format != records.AcceptedFormat || doc.Content != text || doc.ActionOutput == nil || *doc.ActionOutput != want {
		t.Fatalf("version 2 = %+v (%+v)", doc, doc.ActionOutput)
	}
}
