// Package exitnode is the voice channel's call-scoped network fallback: a
// lease that routes the machine through a configured Tailscale exit node for
// one call and then restores the previous route. The lease is journaled
// before the route changes, a user's manual change during the call wins at
// release, and a journal left by a crash is repaired at start-up.
package exitnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Peer is a Tailscale node as `tailscale status --json` describes it.
type Peer struct {
	ID             string   `json:"ID"`
	HostName       string   `json:"HostName"`
	TailscaleIPs   []string `json:"TailscaleIPs"`
	Online         bool     `json:"Online"`
	ExitNodeOption bool     `json:"ExitNodeOption"`
	ExitNode       bool     `json:"ExitNode"`
}

// Status is the part of `tailscale status --json` the lease reads.
type Status struct {
	Peer map[string]Peer `json:"Peer"`
}

// Current returns the peer in use as exit node, if any.
func (s Status) Current() (Peer, bool) {
	for _, p := range s.Peer {
		if p.ExitNode {
			return p, true
		}
	}
	return Peer{}, false
}

// ByID finds a peer by its stable ID.
func (s Status) ByID(id string) (Peer, bool) {
	for _, p := range s.Peer {
		if p.ID == id {
			return p, true
		}
	}
	return Peer{}, false
}

// IPv4 is the peer's 100.x address, by which `tailscale set` selects it.
func (p Peer) IPv4() string {
	for _, ip := range p.TailscaleIPs {
		if strings.Count(ip, ".") == 3 {
			return ip
		}
	}
	return ""
}

// CLI runs the tailscale command.
type CLI interface {
	Status(ctx context.Context) (Status, error)
	// SetExitNode selects the exit node at ip ("" clears it).
	SetExitNode(ctx context.Context, ip string) error
}

// Command is the real tailscale CLI.
type Command struct{ Path string }

// Status implements CLI.
func (c Command) Status(ctx context.Context) (Status, error) {
	out, err := exec.CommandContext(ctx, c.path(), "status", "--json").Output()
	if err != nil {
		return Status{}, fmt.Errorf("tailscale status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(out, &s); err != nil {
		return Status{}, fmt.Errorf("read tailscale status: %w", err)
	}
	return s, nil
}

// SetExitNode implements CLI.
func (c Command) SetExitNode(ctx context.Context, ip string) error {
	if out, err := exec.CommandContext(ctx, c.path(), "set", "--exit-node="+ip).CombinedOutput(); err != nil {
		return fmt.Errorf("tailscale set --exit-node=%s: %v: %s", ip, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c Command) path() string {
	if c.Path == "" {
		return "tailscale"
	}
	return c.Path
}

// Options configure a Manager.
type Options struct {
	CLI CLI
	// PeerID is the configured exit node's stable ID (STEWARD_VOICE_EXIT_NODE_ID).
	PeerID string
	// Journal is the lease's write-ahead file.
	Journal string
	// Probe checks that the new route carries SIP (an authorized TLS
	// connection to the SIP server); it is retried until ProbeTimeout
	// (default 20 s), since the CLI can acknowledge before the route works.
	Probe        func(ctx context.Context) error
	ProbeTimeout time.Duration
	ProbeEvery   time.Duration
}

// Manager hands out one lease at a time.
type Manager struct {
	opts Options
	mu   sync.Mutex
	held bool
}

// journal is the lease's record, written before the route changes.
type journal struct {
	Selected string    `json:"selected"`
	Previous string    `json:"previous"`
	At       time.Time `json:"at"`
}

// New returns a manager; call Repair at start-up.
func New(opts Options) *Manager {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 20 * time.Second
	}
	if opts.ProbeEvery <= 0 {
		opts.ProbeEvery = 500 * time.Millisecond
	}
	return &Manager{opts: opts}
}

// ErrBusy reports a lease already held (settings cannot change mid-call either).
var ErrBusy = errors.New("the call-scoped exit node is already in use by a call")

// Held reports whether a call holds the lease (settings must not change then).
func (m *Manager) Held() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// Lease is a held route change; Release restores the previous route.
type Lease struct {
	m    *Manager
	once sync.Once
}

// Acquire journals the current and configured exit nodes, selects the
// configured one by its current 100.x address and waits for the probe.
// Only an online peer offering itself as exit node is accepted.
func (m *Manager) Acquire(ctx context.Context) (*Lease, error) {
	m.mu.Lock()
	if m.held {
		m.mu.Unlock()
		return nil, ErrBusy
	}
	m.held = true
	m.mu.Unlock()
	lease := &Lease{m: m}
	fail := func(err error) (*Lease, error) {
		lease.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	st, err := m.opts.CLI.Status(ctx)
	if err != nil {
		m.setHeld(false)
		return nil, err
	}
	peer, ok := st.ByID(m.opts.PeerID)
	switch {
	case !ok:
		m.setHeld(false)
		return nil, fmt.Errorf("exit node %s is not in this tailnet", m.opts.PeerID)
	case !peer.Online || !peer.ExitNodeOption:
		m.setHeld(false)
		return nil, fmt.Errorf("exit node %s (%s) is not an online exit node", peer.HostName, m.opts.PeerID)
	case peer.IPv4() == "":
		m.setHeld(false)
		return nil, fmt.Errorf("exit node %s has no 100.x address", peer.HostName)
	}
	prev := ""
	if cur, ok := st.Current(); ok {
		prev = cur.ID
	}
	if err := m.writeJournal(journal{Selected: peer.ID, Previous: prev, At: time.Now().UTC()}); err != nil {
		m.setHeld(false)
		return nil, err
	}
	if err := m.opts.CLI.SetExitNode(ctx, peer.IPv4()); err != nil {
		return fail(err)
	}
	if m.opts.Probe != nil {
		pctx, cancel := context.WithTimeout(ctx, m.opts.ProbeTimeout)
		defer cancel()
		for {
			err := m.opts.Probe(pctx)
			if err == nil {
				break
			}
			select {
			case <-pctx.Done():
				return fail(fmt.Errorf("SIP is not reachable through exit node %s after %s: %w", peer.HostName, m.opts.ProbeTimeout, err))
			case <-time.After(m.opts.ProbeEvery):
			}
		}
	}
	return lease, nil
}

// Release restores the route the lease replaced, unless the user selected
// another exit node meanwhile, and removes the journal. It runs once.
func (l *Lease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		err = l.m.restore(ctx)
		l.m.setHeld(false)
	})
	return err
}

// Repair completes a lease a crashed process left journaled.
func (m *Manager) Repair(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held {
		return ErrBusy
	}
	return m.restore(ctx)
}

func (m *Manager) restore(ctx context.Context) error {
	j, ok, err := m.readJournal()
	if err != nil || !ok {
		return err
	}
	st, err := m.opts.CLI.Status(ctx)
	if err != nil {
		return fmt.Errorf("restore the route after a call: %w", err)
	}
	cur, hasCur := st.Current()
	if hasCur && cur.ID == j.Selected {
		ip := ""
		if j.Previous != "" {
			if p, ok := st.ByID(j.Previous); ok && p.Online {
				ip = p.IPv4()
			}
		}
		if err := m.opts.CLI.SetExitNode(ctx, ip); err != nil {
			return fmt.Errorf("restore the route after a call: %w", err)
		}
	}
	// Another selection (the user's) wins: nothing to undo.
	if err := os.Remove(m.opts.Journal); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the exit-node journal: %w", err)
	}
	return nil
}

func (m *Manager) setHeld(v bool) {
	m.mu.Lock()
	m.held = v
	m.mu.Unlock()
}

func (m *Manager) writeJournal(j journal) error {
	b, _ := json.Marshal(j)
	if err := os.MkdirAll(filepath.Dir(m.opts.Journal), 0o700); err != nil {
		return fmt.Errorf("write the exit-node journal: %w", err)
	}
	tmp := m.opts.Journal + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the exit-node journal: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, m.opts.Journal)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the exit-node journal: %w", err)
	}
	return nil
}

func (m *Manager) readJournal() (journal, bool, error) {
	var j journal
	b, err := os.ReadFile(m.opts.Journal)
	if errors.Is(err, os.ErrNotExist) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("read the exit-node journal: %w", err)
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, false, fmt.Errorf("the exit-node journal %s is damaged (%v); check `tailscale status` and delete it", m.opts.Journal, err)
	}
	return j, true, nil
}
