package exitnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/voice/exitnode"
)

// The test binary doubles as a fake `tailscale` CLI over a JSON state file:
// `status --json` prints it, `set --exit-node=IP` selects the peer with
// that address (or none) and logs the command.
func TestMain(m *testing.M) {
	if p := os.Getenv("FAKE_TAILSCALE_STATE"); p != "" {
		os.Exit(fakeTailscale(p, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeTailscale(path string, args []string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch {
	case len(args) == 2 && args[0] == "status" && args[1] == "--json":
		os.Stdout.Write(b)
		return 0
	case len(args) == 2 && args[0] == "set" && strings.HasPrefix(args[1], "--exit-node="):
		ip := strings.TrimPrefix(args[1], "--exit-node=")
		var st exitnode.Status
		json.Unmarshal(b, &st)
		found := ip == ""
		for k, p := range st.Peer {
			p.ExitNode = ip != "" && p.IPv4() == ip
			found = found || p.ExitNode
			st.Peer[k] = p
		}
		if !found {
			fmt.Fprintf(os.Stderr, "invalid value %q for --exit-node; must be IP or unique node name\n", ip)
			return 1
		}
		out, _ := json.Marshal(st)
		os.WriteFile(path, out, 0o600)
		f, _ := os.OpenFile(path+".log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		fmt.Fprintln(f, strings.Join(args, " "))
		f.Close()
		return 0
	}
	fmt.Fprintf(os.Stderr, "unexpected tailscale %q\n", args)
	return 2
}

type tailnet struct {
	t     *testing.T
	state string
	cli   exitnode.Command
}

func newTailnet(t *testing.T, peers ...exitnode.Peer) *tailnet {
	dir := t.TempDir()
	st := exitnode.Status{Peer: map[string]exitnode.Peer{}}
	for _, p := range peers {
		st.Peer["nodekey:"+p.ID] = p
	}
	b, _ := json.Marshal(st)
	state := filepath.Join(dir, "state.json")
	os.WriteFile(state, b, 0o600)
	self, _ := os.Executable()
	t.Setenv("FAKE_TAILSCALE_STATE", state)
	return &tailnet{t: t, state: state, cli: exitnode.Command{Path: self}}
}

func (n *tailnet) current() string {
	st, err := n.cli.Status(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	if p, ok := st.Current(); ok {
		return p.ID
	}
	return ""
}

func (n *tailnet) log() string {
	b, _ := os.ReadFile(n.state + ".log")
	return strings.TrimSpace(string(b))
}

var (
	home   = exitnode.Peer{ID: "nHome", HostName: "home-router", TailscaleIPs: []string{"100.64.0.2", "fd7a::2"}, Online: true, ExitNodeOption: true}
	office = exitnode.Peer{ID: "nOffice", HostName: "office", TailscaleIPs: []string{"100.64.0.3"}, Online: true, ExitNodeOption: true, ExitNode: true}
	laptop = exitnode.Peer{ID: "nLaptop", HostName: "laptop", TailscaleIPs: []string{"100.64.0.4"}, Online: true}
)

func TestLeaseSelectsAndRestores(t *testing.T) {
	n := newTailnet(t, home, office, laptop)
	journal := filepath.Join(t.TempDir(), "voice-network.journal")
	probes := 0
	m := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: "nHome", Journal: journal, ProbeEvery: time.Millisecond,
		Probe: func(ctx context.Context) error {
			if probes++; probes < 3 {
				return errors.New("route not ready")
			}
			return nil
		}})
	lease, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.current() != "nHome" || probes != 3 || !m.Held() {
		t.Fatalf("during the call: exit node %s, %d probes, held %v", n.current(), probes, m.Held())
	}
	var j map[string]any
	b, _ := os.ReadFile(journal)
	json.Unmarshal(b, &j)
	if j["selected"] != "nHome" || j["previous"] != "nOffice" {
		t.Fatalf("journal %s", b)
	}
	if _, err := m.Acquire(context.Background()); !errors.Is(err, exitnode.ErrBusy) {
		t.Fatalf("second lease: %v", err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.current() != "nOffice" || m.Held() {
		t.Fatalf("after the call: %s, held %v", n.current(), m.Held())
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatal("the journal outlived the lease")
	}
	if got := n.log(); got != "set --exit-node=100.64.0.2\nset --exit-node=100.64.0.3" {
		t.Fatalf("commands %q", got)
	}
}

func TestUserChangeDuringCallWins(t *testing.T) {
	n := newTailnet(t, home, office, laptop)
	m := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: "nHome", Journal: filepath.Join(t.TempDir(), "j")})
	lease, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n.cli.SetExitNode(context.Background(), "") // the user turns the exit node off mid-call
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.current() != "" {
		t.Fatalf("release overrode the user's choice: %s", n.current())
	}
}

func TestRepairAfterCrashAndRefusals(t *testing.T) {
	n := newTailnet(t, home, office, laptop)
	journal := filepath.Join(t.TempDir(), "j")
	m := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: "nHome", Journal: journal})
	if _, err := m.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The host dies holding the lease; a new one repairs at start-up.
	m2 := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: "nHome", Journal: journal})
	if err := m2.Repair(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.current() != "nOffice" {
		t.Fatalf("after repair: %s", n.current())
	}
	for _, c := range []struct {
		peer, want string
	}{
		{"nLaptop", "not an online exit node"},
		{"nGone", "not in this tailnet"},
	} {
		m := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: c.peer, Journal: journal})
		if _, err := m.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) || m.Held() {
			t.Errorf("%s: %v", c.peer, err)
		}
	}
	// A probe that never passes gives the route back.
	m3 := exitnode.New(exitnode.Options{CLI: n.cli, PeerID: "nHome", Journal: journal, ProbeTimeout: 50 * time.Millisecond, ProbeEvery: 5 * time.Millisecond,
		Probe: func(ctx context.Context) error { return errors.New("TLS handshake to the SIP server failed") }})
	if _, err := m3.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), "SIP is not reachable") {
		t.Fatalf("probe failure: %v", err)
	}
	if n.current() != "nOffice" || m3.Held() {
		t.Fatalf("after a failed probe: %s held %v", n.current(), m3.Held())
	}
	os.WriteFile(journal, []byte("{torn"), 0o600)
	if err := m3.Repair(context.Background()); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged journal: %v", err)
	}
}
