package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentstack/agentstack/steward/scheduler"
	"github.com/agentstack/agentstack/steward/searchprep"
)

// SchedulerInfo is the background jobs' section of the System page.
type SchedulerInfo struct {
	// InProcess is true when this host runs the scheduler; otherwise the
	// jobs are read from the log another `steward scheduler` writes.
	InProcess bool                  `json:"inProcess"`
	Log       string                `json:"log"`
	Jobs      []scheduler.JobStatus `json:"jobs"`
	Error     string                `json:"error,omitempty"`
}

// StoreStatus is one primary SQLite store's readability and writability.
type StoreStatus struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	State     string `json:"state"`
	Detail    string `json:"detail,omitempty"`
	SizeBytes int64  `json:"sizeBytes"`
}

// DiskStatus is the free space where STEWARD_HOME lives.
type DiskStatus struct {
	Path       string `json:"path"`
	State      string `json:"state"`
	FreeBytes  uint64 `json:"freeBytes"`
	TotalBytes uint64 `json:"totalBytes"`
	Detail     string `json:"detail,omitempty"`
}

// healthLog remembers each checked item's last state so that only changes
// are audited.
type healthLog struct {
	mu    sync.Mutex
	state map[string]string
}

// transitions returns the items whose state differs from the last
// snapshot's (an item never seen before was unknown) and remembers the new
// states.
func (l *healthLog) transitions(items []ServiceStatus) []AuditEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		l.state = map[string]string{}
	}
	var out []AuditEvent
	for _, it := range items {
		prev, ok := l.state[it.Name]
		if !ok {
			prev = StateUnknown
		}
		if prev == it.State {
			continue
		}
		l.state[it.Name] = it.State
		out = append(out, AuditEvent{Actor: "host", Type: "health.transition", Risk: "low",
			Summary: fmt.Sprintf("%s: %s → %s", it.Name, prev, it.State),
			Payload: map[string]any{"item": it.Name, "from": prev, "to": it.State, "detail": it.Detail}})
	}
	return out
}

// auditHealth records the state changes of st's items.
func (h *Host) auditHealth(ctx context.Context, st *SystemStatus) {
	items := append([]ServiceStatus{st.Host}, st.Services...)
	for _, s := range st.Stores {
		items = append(items, ServiceStatus{Name: "store:" + s.Name, State: s.State, Detail: s.Detail})
	}
	if st.Disk != nil {
		items = append(items, ServiceStatus{Name: "disk", State: st.Disk.State, Detail: st.Disk.Detail})
	}
	for _, e := range h.health.transitions(items) {
		h.audit(ctx, e)
	}
}

// systemSections are the parts of the snapshot besides services and tools.
type systemSections struct {
	Scheduler   *SchedulerInfo    `json:"scheduler,omitempty"`
	Stores      []StoreStatus     `json:"stores"`
	Disk        *DiskStatus       `json:"disk,omitempty"`
	Preparation *searchprep.State `json:"preparation,omitempty"`
}
