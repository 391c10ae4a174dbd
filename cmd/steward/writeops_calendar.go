package main

// Calendar and contacts writes: the writers behind the connectors' gated
// tools and the confirmers of `steward writeops confirm-calendar`.

import (
	"context"
	"errors"
	"io"
	"runtime"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/calendar/ekbridge"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/mcptool"
	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// closers closes several stores.
type closers []func() error

func (c closers) Close() error {
	var errs []error
	for _, f := range c {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// calendarConfirmers returns the journal confirmers of the calendar and
// contacts write kinds: each reads its index (read-only, opened on the first
// check) for evidence from a run that started after the write completed.
func calendarConfirmers(ctx context.Context, env *cliEnv) (map[writeops.Kind]writeops.Confirmer, io.Closer, error) {
	_, _, calIndex, err := calendarConnector.files(env)
	if err != nil {
		return nil, nil, err
	}
	_, _, conIndex, err := contactsConnector.files(env)
	if err != nil {
		return nil, nil, err
	}
	cal := mcptool.NewLazy(func(ctx context.Context) (*calendar.Index, error) { return calendar.OpenIndexReadOnly(ctx, calIndex) },
		(*calendar.Index).Close)
	con := mcptool.NewLazy(func(ctx context.Context) (*contacts.Index, error) { return contacts.OpenIndexReadOnly(ctx, conIndex) },
		(*contacts.Index).Close)
	cfg, err := env.Config()
	if err != nil {
		return nil, nil, err
	}
	stale := cfg.Millis("WRITE_OP_STARTED_STALE_MS", writeops.DefaultStaleStarted, time.Second, 24*time.Hour)
	if err := cfg.Err(); err != nil {
		return nil, nil, err
	}
	cc := calendar.NewConfirmer(calendar.ConfirmerOptions{Index: cal.Get, StaleStarted: stale})
	pc := &contacts.Confirmer{Index: con.Get, StaleStarted: stale}
	return map[writeops.Kind]writeops.Confirmer{
		writeops.KindCalendarCreate: cc, writeops.KindCalendarUpdate: cc, writeops.KindCalendarDelete: cc,
		writeops.KindContactsCreate: pc, writeops.KindContactsUpdate: pc,
	}, closers{cal.Close, con.Close}, nil
}

// lazyJournal opens the write journal on the first write of a connector
// process and keeps it for the process's life.
func lazyJournal(env *cliEnv) *mcptool.Lazy[*journal] {
	return mcptool.NewLazy(func(ctx context.Context) (*journal, error) { return openJournal(ctx, env, audit.ActorHost) },
		(*journal).Close)
}

// calendarWriter returns the opener of the calendar connector's Writer:
// calendar.yaml is read on every write (so edits apply without a restart),
// the index is opened read-only, and on macOS Apple Calendar writes go
// through the launcher's EventKit bridge when STEWARD_CALENDAR_BRIDGE_DIR is
// set, else through Calendar.app's AppleScript.
func calendarWriter(env *cliEnv, indexPath string) func(context.Context) (*calendar.Writer, error) {
	idx := mcptool.NewLazy(func(ctx context.Context) (*calendar.Index, error) { return calendar.OpenIndexReadOnly(ctx, indexPath) },
		(*calendar.Index).Close)
	j := lazyJournal(env)
	var apple calendar.AppleWriter
	if runtime.GOOS == "darwin" {
		opts := calendar.AppleOptions{Script: osascript.Exec{}}
		if cfg, err := env.Config(); err == nil {
			if dir := cfg.Path(ekbridge.EnvDir, ""); dir != "" {
				opts.Bridge = &ekbridge.Client{Dir: dir}
			}
		}
		apple = calendar.NewAppleWriter(opts)
	}
	w := calendar.NewWriter(calendar.WriterOptions{
		Config: func(context.Context) (*calendar.Config, error) {
			_, configPath, _, err := calendarConnector.files(env)
			if err != nil {
				return nil, err
			}
			return calendarConnector.loadConfig(configPath)
		},
		Index:   idx.Get,
		Journal: journalOf(j),
		Apple:   apple,
	})
	return func(context.Context) (*calendar.Writer, error) { return w, nil }
}

// contactsWriter is calendarWriter's counterpart for contacts.
func contactsWriter(env *cliEnv, indexPath string) func(context.Context) (*contacts.Writer, error) {
	idx := mcptool.NewLazy(func(ctx context.Context) (*contacts.Index, error) { return contacts.OpenIndexReadOnly(ctx, indexPath) },
		(*contacts.Index).Close)
	var script osascript.Runner
	if runtime.GOOS == "darwin" {
		script = osascript.Exec{}
	}
	w := contacts.NewWriter(contacts.WriterOptions{
		Config: func(context.Context) (*contacts.Config, error) {
			_, configPath, _, err := contactsConnector.files(env)
			if err != nil {
				return nil, err
			}
			return contactsConnector.loadConfig(configPath)
		},
		Index:   idx.Get,
		Journal: journalOf(lazyJournal(env)),
		Script:  script,
	})
	return func(context.Context) (*contacts.Writer, error) { return w, nil }
}

// journalOf adapts a lazily opened journal to the writers' Journal.
func journalOf(l *mcptool.Lazy[*journal]) lazyJournalExec { return lazyJournalExec{l} }

type lazyJournalExec struct{ l *mcptool.Lazy[*journal] }

func (j lazyJournalExec) Execute(ctx context.Context, n writeops.NewOperation, ex writeops.Executor) (writeops.Operation, error) {
	s, err := j.l.Get(ctx)
	if err != nil {
		return writeops.Operation{}, err
	}
	return s.Execute(ctx, n, ex)
}
