package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/steward/usage"
)

func init() {
	register(&command{
		Name:    "usage",
		Summary: "show model spend and tokens by service, action, model and day",
		Run:     runUsage,
	})
}

func runUsage(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "usage", "[--since 24h|7d|30d|all] [--json]", `
Prints totals and breakdowns of the usage ledger (STEWARD_HOME/usage.db) by service, action,
model and day, priced with the gateway's current rates (GATEWAY_CONFIG), and calls out spend that
no caller labelled with X-Usage-Service / X-Usage-Action. Costs are estimates, not an invoice.`)
	since := fs.String("since", "7d", "period: 24h, 7d, 30d or all")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	start, err := usage.ParsePeriod(*since, time.Now())
	if err != nil {
		return err
	}
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		return err
	}
	gcfg, _, err := gateway.LoadConfig(sc.gatewayConfig)
	if err != nil {
		return err
	}
	store, err := usage.Open(ctx, filepath.Join(sc.home, "usage.db"), usage.Options{Logger: env.Log})
	if err != nil {
		return err
	}
	defer store.Close()
	rep, err := store.Report(ctx, usage.ReportOptions{Since: start, Rates: gcfg.Rates, Recent: 10})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	printUsage(env.Stdout, rep, *since)
	return nil
}

func printUsage(w io.Writer, rep *usage.Report, period string) {
	t := rep.Total
	from := "all time"
	if rep.Since != nil {
		from = "since " + rep.Since.Format("2006-01-02 15:04") + " (" + period + ")"
	}
	fmt.Fprintf(w, "Model usage %s: %d requests (%d failed), $%.4f\n", from, t.Requests, t.Errors, t.CostUSD)
	fmt.Fprintf(w, "Tokens: input %s, output %s, cache read %s, cache write %s\n",
		count(t.Tokens.Input), count(t.Tokens.Output), count(t.Tokens.CacheRead), count(t.Tokens.CacheWrite))
	tc := rep.ByTokenType
	fmt.Fprintf(w, "Cost by token type: input $%.4f, output $%.4f, cache read $%.4f, cache write $%.4f\n",
		tc.Input, tc.Output, tc.CacheRead, tc.CacheWrite)
	if u := rep.Unlabelled; u.Requests > 0 {
		fmt.Fprintf(w, "\n! Unlabelled spend: %d requests, $%.4f — their callers sent no X-Usage-Service/X-Usage-Action header.\n", u.Requests, u.CostUSD)
	}
	for _, sec := range []struct {
		title  string
		groups []usage.Group
	}{{"By service", rep.ByService}, {"By action", rep.ByAction}, {"By model", rep.ByModel}, {"By day", rep.ByDay}} {
		if len(sec.groups) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", sec.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\trequests\tcost\tinput\toutput\tcache read\t")
		for _, g := range sec.groups {
			key := g.Key
			if g.Public != "" && g.Public != g.Key {
				key = g.Public + " → " + g.Key // the tier asked for and the upstream that answered
			}
			fmt.Fprintf(tw, "%s\t%d\t$%.4f\t%s\t%s\t%s\t\n", key, g.Requests, g.CostUSD,
				count(g.Tokens.Input), count(g.Tokens.Output), count(g.Tokens.CacheRead))
		}
		tw.Flush()
	}
	if len(rep.Tools) > 0 {
		fmt.Fprintln(w, "\nTools")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tcalls\terrors\tavg ms\tmax ms\t")
		for _, s := range rep.Tools {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t\n", s.Tool, s.Calls, s.Errors, s.AvgMS, s.MaxMS)
		}
		tw.Flush()
	}
	if t.Requests == 0 {
		fmt.Fprintln(w, "\nNo model requests recorded in this period.")
	}
}

// count formats a token count compactly (12.3k, 4.5M).
func count(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
