package operator_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/operator"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// BenchmarkExternalAnalystCall measures one Analyst operation (get_status)
// through the external MCP endpoint (go-sdk client, stateless streamable
// HTTP) and through the operator route POST /api/analyst/operations, in
// the same run, over loopback. Each call also appends its audit event.
func BenchmarkExternalAnalystCall(b *testing.B) {
	dir := b.TempDir()
	ctx := context.Background()
	if _, _, err := project.Init(ctx, project.InitOptions{Options: project.Options{Root: dir}, Objective: "Bench."}); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{operator.EnvAuthToken: token, operator.EnvAnalystMCPToken: mcpToken, config.EnvAnalystMode: "both"}
	app, err := operator.Start(ctx, operator.StartOptions{Flags: config.Flags{Root: dir, Port: freePort(b)},
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Publisher: state.New(state.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = app.Close(context.Background()) })
	b.Run("mcp", func(b *testing.B) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: app.AnalystMCPURL,
			HTTPClient: &http.Client{Transport: bearer{mcpToken}}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_status", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				b.Fatal(err)
			}
		}
	})
	b.Run("rest", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest("POST", app.URL+"/api/analyst/operations/get_status", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(err, resp.StatusCode)
			}
			resp.Body.Close()
		}
	})
}
