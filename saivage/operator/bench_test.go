package operator_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/operator"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// BenchmarkRootLevel measures what the cockpit's tree asks first: the
// root's immediate children over loopback HTTP with the bearer token, for
// a project of 500 and of 5,000 cards (one card in ten is a goal under the
// root, the rest are tasks under the goals), in the same run.
func BenchmarkRootLevel(b *testing.B) {
	for _, size := range []int{500, 5000} {
		b.Run(fmt.Sprintf("cards=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			ctx := context.Background()
			pub := state.New(state.Options{SkipSync: true}) // fixture creation only
			p, _, err := project.Init(ctx, project.InitOptions{Options: project.Options{Root: dir, Publisher: pub}, Objective: "Bench."})
			if err != nil {
				b.Fatal(err)
			}
			goals := size / 10
			var ids []string
			for i := range goals {
				g, err := p.Cards.Create(ctx, cards.CreateInput{Parent: cards.RootID, Type: "goal", Title: fmt.Sprintf("goal %d", i), Author: "agent:analyst"})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, g.ID)
			}
			for i := range size - 1 - goals {
				if _, err := p.Cards.Create(ctx, cards.CreateInput{Parent: ids[i%goals], Type: "task", Title: fmt.Sprintf("task %d", i), Author: "agent:planner"}); err != nil {
					b.Fatal(err)
				}
			}
			env := map[string]string{operator.EnvAuthToken: token}
			app, err := operator.Start(ctx, operator.StartOptions{Flags: config.Flags{Root: dir, Port: freePort(b)},
				LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { app.Close(context.Background()) })
			req, _ := http.NewRequest("GET", app.URL+"/api/cards/project/children", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			b.ResetTimer()
			for b.Loop() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.ReportMetric(float64(goals), "children")
		})
	}
}
