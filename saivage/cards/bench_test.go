package cards_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/state"
)

var benchProjects sync.Map // size → *fixture

// buildBenchProject creates a classic project with `size` cards: one root,
// size/100 goals (at least 5) and tasks under them. Every task has brief,
// work, summary and review accepted once (4 record versions per task).
func buildBenchProject(b *testing.B, size int) *fixture {
	if f, ok := benchProjects.Load(size); ok {
		return f.(*fixture)
	}
	dir, err := os.MkdirTemp("", "saivage-bench-")
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{stateDir: dir, set: compileClassic(b, false)}
	pub := state.New(state.Options{SkipSync: true})
	f.s = cards.New(cards.Options{StateDir: dir, Workflows: f.set, Publisher: pub})
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	_, err = f.s.Create(ctx, cards.CreateInput{Type: config.RootCardType, Title: "Bench", Author: "runtime:bootstrap", Bootstrap: map[string]string{"objective": "o"}})
	must(err)
	goals := max(size/100, 5)
	var goalIDs []string
	for i := 0; i < goals; i++ {
		g, err := f.s.Create(ctx, cards.CreateInput{Parent: cards.RootID, Type: "goal", Title: fmt.Sprintf("goal %d", i), Author: "agent:planner", Bootstrap: map[string]string{"brief": "b"}})
		must(err)
		goalIDs = append(goalIDs, g.ID)
	}
	for i := 0; i < size-1-goals; i++ {
		c, err := f.s.Create(ctx, cards.CreateInput{Parent: goalIDs[i%goals], Type: "task", Title: fmt.Sprintf("task %d", i), Author: "agent:planner", Bootstrap: map[string]string{"brief": "b"}})
		must(err)
		for _, r := range []string{"work", "summary", "review"} {
			_, err := f.s.EditRecord(ctx, c.ID, r, "content of "+r, "agent:executor")
			must(err)
		}
	}
	benchProjects.Store(size, f)
	return f
}

// BenchmarkAdmit measures strict admission (opening) of a project of 500
// and of 5,000 cards in the same run.
func BenchmarkAdmit(b *testing.B) {
	for _, size := range []int{500, 5000} {
		b.Run(fmt.Sprintf("cards=%d", size), func(b *testing.B) {
			f := buildBenchProject(b, size)
			var g *cards.Graph
			b.ResetTimer()
			for b.Loop() {
				var err error
				g, err = f.store(b).Admit(context.Background())
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(g.Active), "cards")
			b.ReportMetric(float64(g.RecordVersions), "record-versions")
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	benchProjects.Range(func(_, v any) bool {
		os.RemoveAll(v.(*fixture).stateDir)
		return true
	})
	os.Exit(code)
}
