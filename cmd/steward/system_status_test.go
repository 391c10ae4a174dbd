package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/host"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestConnectorToolManifest starts each of Steward's own connectors and
// checks that the bundled manifest lists exactly their tools.
func TestConnectorToolManifest(t *testing.T) {
	vars := map[string]string{}
	env, _, _ := testEnv(t, vars)
	cfg, _ := env.Config()
	servers, err := connectorServers(cfg, "http://127.0.0.1:1/v1", "")
	if err != nil {
		t.Fatal(err)
	}
	b := mcpbridge.New(mcpbridge.Options{Servers: servers})
	b.Start(context.Background())
	defer b.Close()
	if err := b.WaitStarted(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, s := range b.Status() {
		if s.State != mcpbridge.StateReady {
			t.Fatalf("connector %s did not start: %+v", s.Name, s)
		}
		got[s.Name] = []string{}
	}
	for _, tool := range b.Tools() {
		server, name, _ := mcpbridge.SplitToolName(tool.Spec().Name)
		got[server] = append(got[server], name)
	}
	for _, names := range got {
		slices.Sort(names)
	}
	data, _ := json.MarshalIndent(got, "", "  ")
	data = append(data, '\n')
	if *update {
		if err := os.WriteFile("connector_tools.json", data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(data, connectorToolsJSON) {
		t.Errorf("connector_tools.json is stale; run go test ./cmd/steward -run TestConnectorToolManifest -update\nwant:\n%s", data)
	}
}

// connectorPID finds the child process running `<self> mcp NAME`.
func connectorPID(t *testing.T, name string) int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		fields := procStat(pid)
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && strings.HasSuffix(string(cmdline), "\x00mcp\x00"+name+"\x00") {
			return pid
		}
	}
	return 0
}

type systemSnapshot struct {
	Services    []host.ServiceStatus `json:"services"`
	Tools       []host.ToolStatus    `json:"tools"`
	Stores      []host.StoreStatus   `json:"stores"`
	Disk        *host.DiskStatus     `json:"disk"`
	Scheduler   *host.SchedulerInfo  `json:"scheduler"`
	Preparation *struct {
		State string `json:"state"`
	} `json:"preparation"`
}

func (s systemSnapshot) service(name string) host.ServiceStatus {
	for _, sv := range s.Services {
		if sv.Name == name {
			return sv
		}
	}
	return host.ServiceStatus{}
}

func (s systemSnapshot) store(name string) host.StoreStatus {
	for _, st := range s.Stores {
		if st.Name == name {
			return st
		}
	}
	return host.StoreStatus{}
}

// TestSystemStatusTellsTheTruth checks the System page's snapshot against a
// real serve: a killed connector keeps its tools listed as unavailable, a
// read-only store is an error naming its path, health changes are audited
// once each.
func TestSystemStatusTellsTheTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs serve")
	}
	up := llmtest.NewServer(t)
	vars := map[string]string{}
	env, _, _ := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	base, token := runServe(t, env, home)
	var snap systemSnapshot
	get := func() systemSnapshot {
		var s systemSnapshot
		getJSON(t, base+"/system/status", token, &s)
		return s
	}
	waitLong(t, "connectors ready", func() bool {
		snap = get()
		// No contacts.yaml: the running connector is "not configured", not ok.
		return snap.service("mcp:contacts").State == stateNotConfigured && snap.service("mcp:shell").State == host.StateOK
	})
	if snap.Scheduler == nil || !snap.Scheduler.InProcess || len(snap.Scheduler.Jobs) != 10 {
		t.Fatalf("scheduler section = %+v", snap.Scheduler)
	}
	if snap.Disk == nil || snap.Disk.FreeBytes == 0 || snap.Disk.Path != home {
		t.Errorf("disk = %+v", snap.Disk)
	}
	if snap.Preparation == nil || snap.Preparation.State == "" {
		t.Errorf("preparation = %+v", snap.Preparation)
	}
	for _, name := range []string{"usage", "audit", "chats", "watches"} {
		if st := snap.store(name); st.State != host.StateOK {
			t.Errorf("store %s = %+v", name, st)
		}
	}
	if st := snap.store("mail mirror"); st.State != host.StateUnknown || st.Detail != "not built yet" {
		t.Errorf("mail mirror before any sync = %+v", st)
	}
	if sv := snap.service("source: mail"); sv.State != host.StateUnknown || !strings.HasPrefix(sv.Detail, "not configured") {
		t.Errorf("mail source = %+v", sv)
	}
	if sv := snap.service("gateway models"); sv.State != host.StateWarning || !strings.Contains(sv.Detail, "local-embed missing") {
		t.Errorf("gateway models = %+v", sv)
	}

	// A connector that goes down keeps its tools listed, marked unavailable,
	// with the policy decision. It cannot come back: its settings are now bad.
	os.WriteFile(filepath.Join(home, "config.env"), []byte("CONTACTS_INDEX_DB=relative/path\n"), 0o600)
	pid := connectorPID(t, "contacts")
	if pid == 0 {
		t.Fatal("no contacts connector process")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitLong(t, "contacts down", func() bool {
		snap = get()
		st := snap.service("mcp:contacts").State
		return st == host.StateWarning || st == host.StateError
	})
	var contactTools []host.ToolStatus
	for _, tool := range snap.Tools {
		if tool.Source == "contacts" {
			contactTools = append(contactTools, tool)
		}
	}
	if len(contactTools) != len(connectorManifest()["contacts"]) {
		t.Fatalf("contacts tools while down: %+v", contactTools)
	}
	for _, tool := range contactTools {
		if tool.Available || tool.Decision == "" || !strings.HasPrefix(tool.Name, "mcp__contacts__") {
			t.Errorf("contacts tool while down = %+v", tool)
		}
	}
	for _, tool := range snap.Tools {
		if tool.Name == "mcp__shell__find_files" && !tool.Available {
			t.Errorf("a live connector's tool is marked unavailable: %+v", tool)
		}
	}

	// A store made read-only is an error naming its path; the change is
	// audited once, not on every refresh.
	chats := filepath.Join(home, "chats.db")
	os.Chmod(chats, 0o444)
	for range 3 {
		snap = get()
	}
	if st := snap.store("chats"); st.State != host.StateError || !strings.Contains(st.Detail, chats) || !strings.Contains(st.Detail, "read-only") {
		t.Errorf("read-only chats store = %+v", st)
	}
	os.Chmod(chats, 0o600)
	snap = get()
	if st := snap.store("chats"); st.State != host.StateOK {
		t.Errorf("chats store after restoring = %+v", st)
	}
	var page struct {
		Events []struct {
			Summary string `json:"summary"`
		} `json:"events"`
	}
	waitLong(t, "transitions audited", func() bool {
		getJSON(t, base+"/audit?type=health.transition&limit=200", token, &page)
		n := 0
		for _, e := range page.Events {
			if strings.HasPrefix(e.Summary, "store:chats:") {
				n++
			}
		}
		return n == 3
	})
	counts := map[string]int{}
	for _, e := range page.Events {
		counts[e.Summary]++
	}
	for _, want := range []string{"store:chats: unknown → ok", "store:chats: ok → error", "store:chats: error → ok"} {
		if counts[want] != 1 {
			t.Errorf("audit has %d × %q; all: %v", counts[want], want, counts)
		}
	}
	for s, n := range counts {
		if n != 1 && !strings.HasPrefix(s, "mcp:") {
			t.Errorf("%q audited %d times", s, n)
		}
	}
}
