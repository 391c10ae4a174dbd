package mcpbridge

import (
	"regexp"
	"strings"
	"testing"
)

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		server, tool string
		want         string // exact, or "" to check only the shape and prefix
		prefix       string
	}{
		{"files", "read_file", "mcp__files__read_file", ""},
		{"files", "get-sum", "mcp__files__get-sum", ""},
		{"files", "dotted.name", "", "mcp__files__dotted_name_"},
		{"files", "with space/slash", "", "mcp__files__with_space_slash_"},
		{"files", "ünïcode", "", "mcp__files___n_code_"},
		{"files", "", "", "mcp__files___"},
		{"files", long, "", "mcp__files__xxxx"},
		{strings.Repeat("s", 32), long, "", "mcp__" + strings.Repeat("s", 32) + "__xxx"},
	}
	for _, c := range cases {
		got := ToolName(c.server, c.tool)
		if !functionName.MatchString(got) {
			t.Errorf("ToolName(%q, %q) = %q: not a valid function name", c.server, c.tool, got)
		}
		if c.want != "" && got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
		if c.prefix != "" && !strings.HasPrefix(got, c.prefix) {
			t.Errorf("ToolName(%q, %q) = %q, want prefix %q", c.server, c.tool, got, c.prefix)
		}
		if again := ToolName(c.server, c.tool); again != got {
			t.Errorf("not deterministic: %q then %q", got, again)
		}
		server, _, ok := SplitToolName(got)
		if !ok || server != c.server {
			t.Errorf("SplitToolName(%q) = %q, %v", got, server, ok)
		}
	}

	// Names that clean up to the same text stay distinct, whatever the order.
	distinct := []string{"a.b", "a_b", "a b", "a/b", long, long + "y"}
	seen := map[string]string{}
	for _, tool := range distinct {
		n := ToolName("s", tool)
		if other, dup := seen[n]; dup {
			t.Errorf("%q and %q both map to %q", tool, other, n)
		}
		seen[n] = tool
	}
}

func TestSplitToolName(t *testing.T) {
	cases := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__files__read", "files", "read", true},
		{"mcp__files__a__b", "files", "a__b", true},
		{"mcp__files__", "", "", false},
		{"mcp____x", "", "", false},
		{"files__read", "", "", false},
		{"shell_run", "", "", false},
	}
	for _, c := range cases {
		server, tool, ok := SplitToolName(c.name)
		if server != c.server || tool != c.tool || ok != c.ok {
			t.Errorf("SplitToolName(%q) = %q, %q, %v", c.name, server, tool, ok)
		}
	}
}
