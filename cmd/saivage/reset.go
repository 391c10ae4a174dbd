package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
)

func resetCommand() *command {
	var pf projectFlags
	var yes, discardSource bool
	var title, objective string
	return &command{
		name: "reset", summary: "discard the generated state and start the project afresh (offline)",
		usage: "[--yes [--discard-source]] [--title TEXT] [--objective TEXT] [--root DIR] [--json]",
		help: `Reports what a reset removes, then, with --yes, removes exactly the generated
state (.saivage/cards, agents, logs and work: every card, record, conversation
and event) and publishes a fresh project with a new root card, as init does.
Everything else stays: the source tree, config.yaml, prompts, skills, the
tokens and any other file under .saivage.

Offline only: any project lock refuses it (stop the server first; a stale
lock needs a manual check). The configuration must compile. An interrupted
reset leaves a partial state that saivage start refuses; run saivage reset
--yes again to finish it.

With the native Git workflow on (git_workflow.enabled), the reset first
checks, without writing anything, that the delivery branch is checked out
(HEAD attached to it, no rebase stopped) with nothing uncommitted or
untracked, and that no private ref under the workflow's namespace holds
source the delivery branch does not have; a refusal names the paths or the
refs. The delivery branch and its delivered commits stay; every private ref
is removed and the fresh project is commissioned again at the branch's tip.
--discard-source consents to losing the undelivered source of the named
refs.`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&yes, "yes", false, "perform the reset (without it, only the report is printed)")
			fs.BoolVar(&discardSource, "discard-source", false, "with --yes and the Git workflow on, also delete private refs whose source is not on the delivery branch (that work is lost)")
			fs.StringVar(&title, "title", "", "title of the new root card (default \"Project\")")
			fs.StringVar(&objective, "objective", "", "accept this text as the new root card's objective record")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"reset takes no arguments"}
			}
			opts, _, err := pf.options(e)
			if err != nil {
				return err
			}
			plan, err := project.PlanReset(opts)
			if err != nil {
				return err
			}
			if !pf.json {
				fmt.Fprintf(e.stdout, "reset of %s removes:\n", plan.StateDir)
				for _, r := range plan.Remove {
					if r.Present {
						fmt.Fprintf(e.stdout, "  %-7s %d files, %d bytes\n", r.Name+"/", r.Files, r.Bytes)
					} else {
						fmt.Fprintf(e.stdout, "  %-7s (absent)\n", r.Name+"/")
					}
				}
				fmt.Fprintf(e.stdout, "and keeps: %v and the source tree\n", plan.Keep)
			}
			src, err := project.PlanSourceReset(ctx, opts, discardSource)
			if src != nil && !pf.json {
				fmt.Fprintf(e.stdout, "and removes the %d private refs under %s; the delivery branch %s stays at %s\n",
					len(src.Refs), src.Namespace, src.DeliveryBranch, src.Commit)
				for _, ref := range src.Discarded {
					fmt.Fprintf(e.stdout, "  %s holds source that is not on %s\n", ref, src.DeliveryBranch)
				}
			}
			if err != nil {
				return err
			}
			if !yes {
				if pf.json {
					return writeJSON(e.stdout, map[string]any{"plan": plan, "source": src, "done": false})
				}
				fmt.Fprintln(e.stdout, "nothing changed: run saivage reset --yes to reset")
				return exitCode(1)
			}
			p, err := project.Reset(ctx, project.ResetOptions{InitOptions: project.InitOptions{Options: opts, Title: title, Objective: objective},
				DiscardSource: discardSource})
			if err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, map[string]any{"plan": plan, "source": src, "done": true, "cards": p.Graph.Active})
			}
			fmt.Fprintf(e.stdout, "reset: fresh project with root card %q\n", cards.RootID)
			if src != nil {
				fmt.Fprintf(e.stdout, "recommissioned the delivery branch %s at %s\n", src.DeliveryBranch, src.Commit)
			}
			return nil
		},
	}
}

func repairCommand() *command {
	var pf projectFlags
	var yes, discard bool
	return &command{
		name: "repair", summary: "report damaged selectors and restore their previous version (offline)",
		usage: "[--yes [--discard]] [--root DIR] [--json]",
		help: `Admits the project read-only and, for each file admission refuses, looks for
the selector of that file (a card or record head.json, a session index.json)
whose previous selector (head.prev.json, index.prev.json) exists. Each
restoration is proven first on a copy of the state: it must cure exactly
that damage. The report comes first; with --yes the restorations are
applied under the project lock (refused while any lock exists), after
checking that neither selector changed since the inspection.

Only the immediate predecessor is ever used, so a restored card or record
loses its latest change (a card may lose its newest children, which stay
on disk unreferenced). Damage no previous selector cures is reported and
nothing is changed: inspect it by hand or saivage reset. Torn tails of
growing logs are not damage: saivage start truncates them.

A card other than the root whose selection is unusable with no previous
selector to restore can be discarded instead, when its parent proves its
place (it lists the card, at the right depth, and permits exactly one
child type). Its own files (head, history, mailbox, records,
conversations) move to a fresh .saivage/repair-attic/<time>-<id>/
directory and a FAILED placeholder authored runtime:repair, with empty
records and sessions, takes its place; a Planner may reopen it later.
This loses the card's work, so it needs --discard besides --yes.`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&yes, "yes", false, "apply the restorations (without it, only the report is printed)")
			fs.BoolVar(&discard, "discard", false, "with --yes, also apply the reported discards (moves the cards' files to the repair attic)")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"repair takes no arguments"}
			}
			opts, _, err := pf.options(e)
			if err != nil {
				return err
			}
			rep, err := project.InspectRepair(ctx, opts)
			if err != nil {
				return err
			}
			if pf.json {
				if err := writeJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				if rep.Healthy {
					fmt.Fprintln(e.stdout, "the project admits cleanly: nothing to repair")
				}
				for _, c := range rep.Candidates {
					fmt.Fprintf(e.stdout, "restore .saivage/%s from its previous selector\n  because: %s\n", c.Selector, c.Problem)
					if c.TornTail != nil {
						fmt.Fprintf(e.stdout, "  then truncate the torn tail of .saivage/%s (%d bytes), the segment it makes current again\n", c.TornTail.Segment, c.TornTail.Bytes)
					}
				}
				for _, d := range rep.Discards {
					fmt.Fprintf(e.stdout, "discard card %s (%s under %s): move %s to .saivage/%s/ and publish a FAILED placeholder\n  because: %s\n",
						d.Card, d.Type, d.Parent, strings.Join(d.Roots, ", "), project.RepairAttic, d.Problem)
				}
				if rep.Unrepaired != "" {
					fmt.Fprintf(e.stdout, "no restoration cures: %s\n", rep.Unrepaired)
				}
			}
			switch {
			case rep.Unrepaired != "":
				return fmt.Errorf("damage remains that repair cannot cure; nothing was changed")
			case rep.Healthy:
				return nil
			case !yes:
				if !pf.json {
					if len(rep.Discards) > 0 {
						fmt.Fprintln(e.stdout, "nothing changed: run saivage repair --yes --discard to apply (the discards lose those cards' work)")
					} else {
						fmt.Fprintln(e.stdout, "nothing changed: run saivage repair --yes to apply")
					}
				}
				return exitCode(1)
			}
			if err := project.Repair(ctx, opts, rep, discard); err != nil {
				return err
			}
			if !pf.json {
				fmt.Fprintf(e.stdout, "repaired: %d selector(s) restored, %d card(s) discarded; the project admits\n", len(rep.Candidates), len(rep.Discards))
			}
			return nil
		},
	}
}
