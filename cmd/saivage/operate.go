package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/agentstack/agentstack/saivage/runtime"
)

// operateResult is the answer of POST /api/analyst/operations/NAME.
type operateResult struct {
	OK        bool   `json:"ok"`
	Operation string `json:"operation"`
	Content   string `json:"content"`
}

// operate delegates one Analyst operation to the live server: the same
// policy surface the Analyst uses, audited as an operator action. Offline
// there is no fallback; the state is never edited behind the runtime.
func (pf *projectFlags) operate(ctx context.Context, e *env, name string, args map[string]any) error {
	srv, _, err := pf.live(e)
	if err != nil {
		if errors.Is(err, errNoServer) {
			return fmt.Errorf("%w; operator actions go through the live server's Analyst operations", err)
		}
		return err
	}
	var out operateResult
	if err := srv.call(ctx, http.MethodPost, "/api/analyst/operations/"+url.PathEscape(name), args, &out); err != nil {
		return err
	}
	if pf.json {
		return writeJSON(e.stdout, out)
	}
	printContent(e, out.Content)
	return nil
}

// cardAction runs card reopen|cancel ID through the live server.
func cardAction(ctx context.Context, e *env, pf *projectFlags, action, id string) error {
	return pf.operate(ctx, e, action+"_card", map[string]any{"card_id": id})
}

// recordWrite runs record write CARD NAME FILE through the live server:
// the Analyst's direct acceptance (blocked, done or failed cards reopen as
// changed).
func recordWrite(ctx context.Context, e *env, pf *projectFlags, args []string) error {
	if len(args) != 4 {
		return usageError{"expected: record write CARD NAME FILE"}
	}
	b, err := os.ReadFile(args[3])
	if err != nil {
		return fmt.Errorf("read %s: %w", args[3], err)
	}
	if len(b) > 0 && !strings.Contains(string(b), "\x00") {
		return pf.operate(ctx, e, "write", map[string]any{"path": "record:" + args[1] + "/" + args[2], "content": string(b)})
	}
	return fmt.Errorf("%s is empty or binary; a record takes text", args[3])
}

func chatCommand() *command {
	var pf projectFlags
	var noWait bool
	return &command{
		name: "chat", summary: "send one message to the internal Analyst and print its answer",
		usage: `"MESSAGE" [--no-wait] [--root DIR] [--json]`,
		help: `Submits MESSAGE to the live server's internal Analyst (POST /api/chat) and
waits for the turn to end, then prints the Analyst's answer. --no-wait
returns once the message is accepted. The Analyst runs one turn at a time:
a busy Analyst refuses the message. In external-only analyst mode the
internal Analyst is disabled; use the external MCP endpoint.`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&noWait, "no-wait", false, "return once the message is accepted")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return usageError{"chat takes one non-empty message (quote it)"}
			}
			srv, _, err := pf.live(e)
			if err != nil {
				return err
			}
			var out struct {
				TurnID string              `json:"turn_id"`
				Result *runtime.TurnResult `json:"result"`
			}
			if err := srv.call(ctx, http.MethodPost, "/api/chat", map[string]any{"message": args[0], "wait": !noWait}, &out); err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, out)
			}
			if out.Result == nil {
				fmt.Fprintf(e.stdout, "accepted (turn %s)\n", out.TurnID)
				return nil
			}
			printContent(e, out.Result.Text)
			if out.Result.Error != "" {
				return fmt.Errorf("the Analyst turn ended with an error: %s", out.Result.Error)
			}
			return nil
		},
	}
}

func gcCommand() *command {
	var pf projectFlags
	var del bool
	var before string
	var target int64
	return &command{
		name: "gc", summary: "preview (default) or delete collectable files under .saivage/work",
		usage: "[--delete] [--before RFC3339] [--target-bytes N] [--root DIR] [--json]",
		help: `Asks the live server to collect .saivage/work (POST /api/runtime/gc-work):
a preview by default, deletion with --delete. A running Run is paused for
the collection and resumed afterwards. Files newer than --before and the
captures of managed processes are kept; deletion goes oldest first until
the accounted remainder is at most --target-bytes. The collection is
refused while a command's process group is still running, an MCP server is
starting, or a card is running with no Run owning it. Each file is checked
again just before its removal (a file changed since the listing is kept)
and each removal is made durable (its directory is fsynced); a removal
whose outcome cannot be known stops the server (exit 1) before any report.
There is no offline fallback. Read "disposition" (completed, interrupted,
refused), not only the exit status.`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&del, "delete", false, "delete (default: preview only)")
			fs.StringVar(&before, "before", "", "only files modified before this RFC 3339 time (with zone)")
			fs.Int64Var(&target, "target-bytes", -1, "stop deleting once the accounted remainder is at most N bytes")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"gc takes no arguments"}
			}
			srv, _, err := pf.live(e)
			if err != nil {
				return err
			}
			body := map[string]any{"mode": "dry_run"}
			if del {
				body["mode"] = "delete"
			}
			if before != "" {
				body["before"] = before
			}
			if target >= 0 {
				body["target_bytes"] = target
			}
			var out struct {
				Mode        string `json:"mode"`
				Disposition string `json:"disposition"`
				Reason      string `json:"reason"`
				Restoration string `json:"restoration"`
				Result      *struct {
					Would struct {
						Files int
						Bytes int64
					} `json:"would_delete"`
					Deleted struct {
						Files int
						Bytes int64
					} `json:"deleted"`
					Retained struct {
						Files int
						Bytes int64
					} `json:"retained_total"`
				} `json:"result"`
			}
			if err := srv.call(ctx, http.MethodPost, "/api/runtime/gc-work", body, &out); err != nil {
				return err
			}
			if pf.json {
				if err := writeJSON(e.stdout, out); err != nil {
					return err
				}
			} else if r := out.Result; r != nil {
				fmt.Fprintf(e.stdout, "%s %s: would delete %d files (%d bytes), deleted %d files (%d bytes), kept %d files (%d bytes); run %s\n",
					out.Mode, out.Disposition, r.Would.Files, r.Would.Bytes, r.Deleted.Files, r.Deleted.Bytes, r.Retained.Files, r.Retained.Bytes, out.Restoration)
			}
			if out.Disposition != "completed" {
				return fmt.Errorf("collection %s: %s", out.Disposition, out.Reason)
			}
			return nil
		},
	}
}

func notifyCommand() *command {
	var pf projectFlags
	var urgent bool
	return &command{
		name: "notify", summary: "queue a message for a card's Planner (--urgent interrupts)",
		usage: `CARD "MESSAGE" [--urgent] [--root DIR] [--json]`,
		help: `Queues MESSAGE for CARD's designated recipient node (its Planner), which
reads it when it next runs (through the Analyst's queue_notification,
audited as an operator action). --urgent also queues a note on each
ancestor up to the nearest card the Run is executing, and interrupts the
work below that card: its active child and everything under it are stopped,
so its Planner reads the message at once. An urgent message for the running
root restarts the root's activation in the same Run. A paused or stopped
runtime only queues.`,
		flags: func(fs *flag.FlagSet) {
			pf.register(fs)
			fs.BoolVar(&urgent, "urgent", false, "interrupt the work between the card and its nearest live owner")
		},
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) != 2 || strings.TrimSpace(args[1]) == "" {
				return usageError{"expected: notify CARD \"MESSAGE\""}
			}
			srv, _, err := pf.live(e)
			if err != nil {
				return err
			}
			var out struct {
				Queued []string              `json:"queued"`
				Urgent *runtime.UrgentResult `json:"urgent"`
			}
			if err := srv.call(ctx, http.MethodPost, "/api/cards/"+url.PathEscape(args[0])+"/notifications",
				map[string]any{"message": args[1], "urgent": urgent}, &out); err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, out)
			}
			if u := out.Urgent; u != nil {
				fmt.Fprintf(e.stdout, "queued for %s\n", strings.Join(u.Queued, ", "))
				if u.Owner != "" {
					fmt.Fprintf(e.stdout, "interrupted %s: stopped %s\n", u.Owner, strings.Join(u.Stopped, ", "))
				} else {
					fmt.Fprintf(e.stdout, "no interruption: %s\n", u.Suppressed)
				}
				return nil
			}
			fmt.Fprintf(e.stdout, "queued for %s\n", strings.Join(out.Queued, ", "))
			return nil
		},
	}
}
