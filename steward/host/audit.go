package host

import (
	"context"

	"github.com/agentstack/agentstack/steward/audit"
)

// LedgerAuditor records the host's audit events in the audit ledger, which
// redacts them before storage.
func LedgerAuditor(l *audit.Ledger) Auditor { return ledgerAuditor{l} }

type ledgerAuditor struct{ l *audit.Ledger }

func (a ledgerAuditor) Audit(ctx context.Context, e AuditEvent) {
	a.l.Record(ctx, audit.Event{Actor: e.Actor, Type: e.Type, Risk: audit.Risk(e.Risk), ChatID: e.ChatID,
		Tool: e.Tool, Summary: e.Summary, Payload: e.Payload})
}
