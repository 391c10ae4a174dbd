package records_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/records"
)

// TestAcceptActionOutput: an action output is accepted with its embedded
// provenance (length and SHA-256 of the exact bytes), equal text advances
// the version, every reader returns the accepted content, and a tampered
// document no longer reads.
func TestAcceptActionOutput(t *testing.T) {
	s, r := newRef(t)
	if _, err := s.Initialize(r, ""); err != nil {
		t.Fatal(err)
	}
	text := "\ufeffreport line\r\nsecond\r\n  "
	prov := records.ActionOutput{Node: "check", Operation: "shell.run", ContractVersion: 1,
		Invocation: "0b8e6a4e-7c1f-4b0e-9a55-2f3d8c1e9d10", Output: records.OutputCommandStdout}
	a1, err := s.AcceptActionOutput(r, text, prov)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(text))
	want := prov
	want.Bytes, want.SHA256 = len(text), hex.EncodeToString(sum[:])
	if a1.Version != 1 || a1.Format != records.AcceptedFormat || a1.Author != "action-output:check/"+prov.Invocation ||
		a1.ActionOutput == nil || *a1.ActionOutput != want {
		t.Fatalf("accepted = %+v (provenance %+v)", a1, a1.ActionOutput)
	}
	file1 := latestFile(t, s, r, 1)
	// The same text again (a second invocation) is a new version.
	prov2 := prov
	prov2.Invocation, prov2.Output = "5d2f6c1a-0000-4000-8000-000000000002", records.OutputReturnedText
	a2, err := s.AcceptActionOutput(r, text, prov2)
	if err != nil || a2.Version != 2 || a2.ActionOutput.Invocation != prov2.Invocation {
		t.Fatalf("second acceptance = %+v, %v", a2, err)
	}
	// Current, history and exact versions read the embedded content and
	// provenance.
	cur, err := s.Current(r)
	if err != nil || cur.Content != text || cur.Version != 2 || cur.ActionOutput == nil || cur.ActionOutput.Invocation != prov2.Invocation {
		t.Fatalf("current = %+v, %v", cur, err)
	}
	hist, err := s.History(r)
	if err != nil || len(hist) != 2 || hist[0].Content != text || hist[0].ActionOutput.Invocation != prov.Invocation ||
		hist[1].ActionOutput.Output != records.OutputReturnedText {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	v1, err := s.Version(r, 1)
	if err != nil || *v1.ActionOutput != want {
		t.Fatalf("version 1 = %+v, %v", v1, err)
	}
	// On disk: one format 5 document with the action_output object.
	raw, err := os.ReadFile(r.DocPath(file1))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ao, _ := doc["action_output"].(map[string]any)
	if doc["format"] != float64(5) || ao["operation"] != "shell.run" || ao["output"] != "command-stdout" ||
		ao["bytes"] != float64(len(text)) || ao["sha256"] != want.SHA256 || ao["contract_version"] != float64(1) || ao["node"] != "check" {
		t.Fatalf("document = %s", raw)
	}
	// A document whose content no longer matches its digest is refused.
	doc["content"] = strings.Replace(text, "second", "SECOND", 1)
	tampered, _ := json.Marshal(doc)
	if err := os.WriteFile(r.DocPath(file1), tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Version(r, 1); err == nil || !strings.Contains(err.Error(), "SHA-256 does not match") {
		t.Fatalf("tampered version read: %v", err)
	}
}

func TestAcceptActionOutputRefuses(t *testing.T) {
	ok := records.ActionOutput{Node: "check", Operation: "shell.run", ContractVersion: 1, Invocation: "inv-1", Output: records.OutputCommandStdout}
	for _, tc := range []struct {
		name string
		edit func(*records.ActionOutput)
		want string
	}{
		{"no node", func(p *records.ActionOutput) { p.Node = "" }, "not a node id"},
		{"unqualified operation", func(p *records.ActionOutput) { p.Operation = "run" }, "not a qualified identity"},
		{"contract 0", func(p *records.ActionOutput) { p.ContractVersion = 0 }, "contract version 0"},
		{"invocation path", func(p *records.ActionOutput) { p.Invocation = "../x" }, "not an invocation id"},
		{"unknown output", func(p *records.ActionOutput) { p.Output = "stderr" }, `kind "stderr"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := newRef(t)
			if _, err := s.Initialize(r, ""); err != nil {
				t.Fatal(err)
			}
			p := ok
			tc.edit(&p)
			if _, err := s.AcceptActionOutput(r, "text", p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("accept = %v, want %q", err, tc.want)
			}
			if h, _ := s.ReadHead(r); h.Latest != 0 {
				t.Fatalf("version %d published", h.Latest)
			}
		})
	}
	// The action-output author comes only with provenance.
	s, r := newRef(t)
	if _, err := s.Initialize(r, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptContent(r, "text", "action-output:check/inv-1"); err == nil || !strings.Contains(err.Error(), "only with its provenance") {
		t.Fatalf("bare action-output author: %v", err)
	}
}

// TestOldActionOutputDocumentsRead: documents accepted before provenance
// was embedded (author string only, no action_output) still read.
func TestOldActionOutputDocumentsRead(t *testing.T) {
	s, r := newRef(t)
	if _, err := s.Initialize(r, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(r.DocPath("x")), 0o755); err != nil {
		t.Fatal(err)
	}
	old := `{"format":5,"card":"project.a","record":"plan","version":1,"previous":"","content":"2 problems\n","author":"action-output:check/inv-old","accepted_at":"2026-11-01T00:00:00Z"}`
	if err := os.WriteFile(r.DocPath("1-0ld0ld00.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := s.ReadHead(r)
	if err != nil {
		t.Fatal(err)
	}
	h.Revision, h.Latest, h.LatestFile, h.Selection = 1, 1, "1-0ld0ld00.json", records.SelAccepted
	b, _ := json.Marshal(h)
	if err := os.WriteFile(r.HeadPath(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	hist, err := s.History(r)
	if err != nil || len(hist) != 1 || hist[0].Content != "2 problems\n" || hist[0].ActionOutput != nil || hist[0].Author != "action-output:check/inv-old" {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	// The next acceptance follows it with provenance.
	a, err := s.AcceptActionOutput(r, "1 problem\n", records.ActionOutput{Node: "check", Operation: "shell.run", ContractVersion: 1, Invocation: "inv-new", Output: records.OutputCommandStdout})
	if err != nil || a.Version != 2 || a.Previous != "1-0ld0ld00.json" {
		t.Fatalf("next = %+v, %v", a, err)
	}
}
